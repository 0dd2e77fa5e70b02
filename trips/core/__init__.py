"""What every floor needs: the database and the unit of work, the Redis client, the job queue, rate limits, epochs,
the text floor, JSON and problem answers, languages, metrics and logs. It imports nothing of the project but
trips.errors."""
