"""App-wide infrastructure: the database and unit of work, rate limits, the text floor, JSON and problem answers,
health and metrics, logs. What oauth/ and mcp/ may import; it imports no feature code of trips."""
