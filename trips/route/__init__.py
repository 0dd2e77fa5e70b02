"""The route engine: route links and the route services' formats, GPX parsing, GPX and FIT export, geodesy,
elevation, pacing and the rider's times."""
