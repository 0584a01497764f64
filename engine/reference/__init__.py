"""The reference engine: a small CPU-runnable server that speaks vLLM-Omni's video HTTP contract.

Run it as ``python -m engine.reference serve --config PROFILE.yaml``. The judge talks to it only
over HTTP, exactly as it talks to the real vLLM-Omni server, and never imports it.
"""
