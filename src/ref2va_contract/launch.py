"""How the judge starts an engine: its kinds, the environment it sets, the profiles' token."""

from __future__ import annotations

from typing import Final

# The engine kinds: a campaign's ``engine.kind``, a launch profile's ``engine:`` and the folder
# under ``engine/profiles/`` that holds that kind's profiles.
REFERENCE_ENGINE: Final = "reference"
VLLM_OMNI_ENGINE: Final = "vllm-omni"
ENGINE_KINDS: Final = (REFERENCE_ENGINE, VLLM_OMNI_ENGINE)

# Set by the judge in every instance's environment: where request-owned dumps may land (roots
# separated by ``os.pathsep``); a dump folder outside them is refused by the engine.
DIAGNOSTICS_ROOT_ENV: Final = "REF2VA_DIAGNOSTICS_ROOT"
# Set by the judge in every instance's environment, ``<run id>/<instance id>``: the mark by which
# the cleanup audit finds the instance's processes (every child inherits it).
INSTANCE_TAG_ENV: Final = "REF2VA_INSTANCE"
# Set by the judge in every instance's environment, ``<pid>:<start time>`` of the judge process
# that started it: an instance whose judge is gone is a leftover the next run stops.
JUDGE_ENV: Final = "REF2VA_JUDGE"
# Set by the judge in every instance's environment: a random value new for each instance. The
# reference engine echoes it in ``api.INSTANCE_NONCE_HEADER`` on every response, so the judge can
# tell its own instance from another server that happens to answer on the same port.
INSTANCE_NONCE_ENV: Final = "REF2VA_INSTANCE_NONCE"

# Declared device time: the reference engine can sleep a stated cost per unit of work instead of
# (or beside) computing it, through these profile flags or this variable. A latency that was
# declared is no measurement, so the judge refuses them unless a campaign says it allows them
# (its harness self-tests), and then caps every verdict (``declared_device_time``).
DECLARED_TIME_ENV: Final = "REF2VA_REFERENCE_COST_MODEL"
DECLARED_TIME_FLAGS: Final = ("cost-model", "step-cost-ms")

# In a launch profile's ``env`` values: the campaign's engine workdir, made absolute by the judge.
WORKDIR_TOKEN: Final = "${workdir}"

# The project's own variables (this prefix) reach an engine only as the campaign, the profile or
# the judge sets them, never from the caller's shell: a stray REF2VA_REFERENCE_COST_MODEL there
# would bring declared device time back into a campaign that declares none, unseen in evidence.
PROJECT_ENV_PREFIX: Final = "REF2VA_"
