"""Code that runs inside the real vLLM-Omni 0.30.0 server (the system under test).

``extension.Ref2VADiagnostics`` is loaded by ``--worker-extension-cls
engine.vllm_omni.extension.Ref2VADiagnostics`` into every diffusion worker; ``hooks`` lists the
upstream names it relies on, as plain data, so that a contract test can check each one against the
release wheel; ``request_block``, ``dump_writer``, ``watch`` and ``enabled_path`` are the
extension's parts. Importing this package imports neither torch nor vllm_omni: a machine without
them can import it (the launch profile puts the repository root on ``PYTHONPATH``).
"""

from __future__ import annotations
