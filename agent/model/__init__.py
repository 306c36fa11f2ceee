"""Model clients for OpenAI-compatible endpoints."""
