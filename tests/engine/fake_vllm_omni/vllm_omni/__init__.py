"""Fake vLLM-Omni for the worker extension's CI test (see ../README.md)."""
