"""Real vLLM startups: the search, the server process, verification and records."""
