"""End to end: a real track run with identifiers planted in the environment (a host name, a user,
CI variables with a token in a URL, secrets, a workspace) and in the engine's own log, then the
whole evidence folder, file names included, is searched for each: zero hits."""

from __future__ import annotations

from pathlib import Path

from tests.unit.plugin_sessions import run_in_checkout
from tests.unit.suite_runner import CHEAP_STEPS, campaign_variant, only_run

HOST = "gpu-node-zq7x.corp-planted.example"
USER = "zqplantuser"
TOKEN = "glpat-Zq7PlantedToken0123456"
HF = "hf_ZqPlantedHfToken0123456789abcdef"
ENVIRONMENT = {
    "HOSTNAME": HOST,
    "USER": USER, "LOGNAME": USER,
    "GIT_URL": f"https://zqbot:{TOKEN}@git.planted-corp.example/ml/ref2va.git",
    "BUILD_URL": "https://ci.planted-corp.example/job/zq-ref2va/77/",
    "JENKINS_URL": "https://ci.planted-corp.example/",
    "NODE_NAME": "zq-builder-42",
    "WORKSPACE": f"/lustre/{USER}/jenkins/ws/zq-ref2va",
    "JOB_NAME": "zq-team/zq-ref2va-nightly",
    "HF_TOKEN": HF,
    "REF2VA_HIDE": "zq-project-aurora",
}
# Printed by the engine's interpreter at start-up, one line each ("Invalid -W option ignored:
# invalid action: '...'"): the engine's log carries them as any engine would print its setup.
IN_LOG = {
    HOST: "<host>", USER: "<user>", "zq.person@planted-corp.example": "<email>",
    HF: "<secret>", "10.77.66.55": "<ip>", f"/gpfs/{USER}/ckpt/h3.bin": "<abs>/h3.bin",
    "zq-builder-42": "<host>", "aa-bb-cc-dd-ee-0f": "<mac>", "zq-project-aurora": "<hidden>",
    f"/lustre/{USER}/jenkins/ws/zq-ref2va/out/run.log": "<workspace>/out/run.log",
}
PLANTED = (HOST, "gpu-node-zq7x", USER, "zqbot", TOKEN, "planted-corp", "zq-builder-42",
           "zq-ref2va", "zq-team", HF, "zq-project-aurora", "zq.person", "10.77.66.55",
           "aa-bb-cc-dd-ee-0f", f"/gpfs/{USER}", "/lustre/")


def test_planted_identifiers_never_reach_the_evidence(tmp_path: Path) -> None:
    environment = {"REF2VA_REFERENCE_COST_MODEL":
                   '{"block_ms": 0.5, "text_kv_ms": 12.0, "ref_kv_ms": 0.25}',
                   "PYTHONWARNINGS": ",".join(IN_LOG)}
    campaign = campaign_variant(tmp_path / "c", environment=environment, steps=CHEAP_STEPS)
    evidence = tmp_path / "evidence"
    result = run_in_checkout("tests/acceptance/test_b0_output.py", "-m", "lossless and 5s",
                             "--campaign", str(campaign), "--evidence-dir", str(evidence),
                             env=ENVIRONMENT)
    assert result.returncode == 0, result.stdout[-3000:]
    run = only_run(evidence)
    hits: list[str] = []
    files = 0
    for path in sorted(run.rglob("*")):
        relative = path.relative_to(run).as_posix()
        hits += [f"name {relative}: {v}" for v in PLANTED if v.lower() in relative.lower()]
        if path.is_file():
            files += 1
            content = path.read_bytes().decode("utf-8", errors="replace").lower()
            hits += [f"{relative}: {v}" for v in PLANTED if v.lower() in content]
    assert files >= 6 and not hits, hits
    # Planted for real: each value reached the engine's log and stands there as its label.
    log = "\n".join(p.read_text() for p in (run / "logs").iterdir())
    for label in IN_LOG.values():
        assert f"invalid action: '{label}'" in log, (label, log[-2000:])
    # The report's environment table is an allowlist: no CI variable, not even by name.
    report = (run / "report.html").read_text()
    for name in ("GIT_URL", "BUILD_URL", "NODE_NAME", "WORKSPACE", "JENKINS_URL", "JOB_NAME"):
        assert name not in report
    assert "ref2va-accept" in report and "reference-ci" in report
