"""Fake vLLM-Omni Cache-DiT integration: the backend and the request-scoped runtime."""
