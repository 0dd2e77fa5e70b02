"""Place search: Nominatim when configured, else the offline gazetteer."""
