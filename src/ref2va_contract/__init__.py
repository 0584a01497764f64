"""The judge/engine contract: every name both sides spell, written once.

The judge (``ref2va_accept``) and the judged (``engine/``) never import each other; both import
this package. It holds constants only, imports nothing outside the standard library, and neither
side's code: ``tests/unit/test_boundaries.py`` checks all three rules.

- :mod:`.api`: the HTTP routes and response headers of vLLM-Omni's video API that the judge
  uses and the reference engine serves;
- :mod:`.launch`: the engine kinds, the environment variables the judge sets at launch and the
  ``${workdir}`` token of launch profiles;
- :mod:`.diagnostics`: a request's ``extra_params.acceptance`` block, the dump folder's layout
  and the ``enabled_path.json`` keys the judge audits.
"""
