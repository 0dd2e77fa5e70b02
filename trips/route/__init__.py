"""The route engine: link recognition, source formats, GPX parse and export, geodesy, pacing, the pipeline that
cuts a route into days, rerouting through a waypoint."""
