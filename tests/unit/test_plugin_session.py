"""The plugin in pytest sessions run in this process (pytester): scenario order, where the report
and the run folder go, the engine registry per session, and what the plugin imports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ref2va_accept.core import file_sha256
from ref2va_accept.evidence import rebuild
from tests.unit.evidence_schema import read_bundle
from tests.unit.plugin_sessions import MARKS, run_plugin
from tests.unit.suite_runner import ROOT, campaign_variant

pytest_plugins = ["pytester"]

REFERENCE = ROOT / "fixtures/campaigns/reference.yaml"


@pytest.fixture
def session(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(MARKS)
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return run_plugin(pytester, "--campaign", str(REFERENCE), *args)


@pytest.mark.fast
def test_verdict_scenarios_run_last_whatever_their_folder_is_called(
        session: pytest.Pytester) -> None:
    for folder, mark, names in (("a_verdicts", "verdict", ("v1", "v2")),
                                ("b_perf", "perf", ("p1",)), ("c_quality", "quality", ("q1",)),
                                ("d_acceptance", "acceptance", ("a1", "a2")),
                                ("e_unit", None, ("u1",))):
        session.mkpydir(folder)
        marked = f"import pytest\npytestmark = pytest.mark.{mark}\n" if mark else ""
        (session.path / folder / f"test_{folder}.py").write_text(
            marked + "".join(f"def test_{n}():\n    pass\n" for n in names))
    result = _run(session, "-v", "--evidence-dir", str(session.path / "evidence"))
    result.assert_outcomes(passed=7)
    ran = [line.split("::")[1].split()[0] for line in result.outlines if "PASSED" in line]
    # The harness's own tests keep their place ahead; then acceptance, quality (the cheapest
    # decisive check), perf, verdicts, each group in collection order.
    assert ran == ["test_u1", "test_a1", "test_a2", "test_q1", "test_p1", "test_v1", "test_v2"]


@pytest.mark.fast
def test_a_session_without_campaign_scenarios_makes_no_run_folder_nor_report(
        session: pytest.Pytester) -> None:
    session.makepyfile(test_own="def test_own():\n    pass\n")
    evidence = session.path / "evidence"
    _run(session, "--evidence-dir", str(evidence)).assert_outcomes(passed=1)
    assert not evidence.exists()
    assert not list(session.path.rglob("report.html"))


CAMPAIGN_SCENARIO = '''
import pytest

from ref2va_accept.plugin._engines import REGISTRY

pytestmark = pytest.mark.acceptance


def test_scenario(track_id, evidence, pytestconfig):
    evidence.note(f"{track_id} ran")
    # One registry per session, with one audit subscriber, however many sessions ran before.
    assert len(pytestconfig.stash[REGISTRY].on_audit) == 1
'''


def test_a_campaign_run_writes_its_report_events_and_bundle_in_the_run_folder(
        session: pytest.Pytester) -> None:
    session.makepyfile(test_scenario=CAMPAIGN_SCENARIO)
    evidence = session.path / "evidence"
    seen: list[Path] = []
    for _ in range(2):  # the second session must not inherit the first one's registry
        _run(session, "-m", "5s and lossless", "--evidence-dir",
             str(evidence)).assert_outcomes(passed=1)
        # Run ids sort by second only (two runs in one second differ in a random tag), so the
        # second run is the folder the second session added.
        seen += [p for p in evidence.iterdir() if not p.is_symlink() and p not in seen]
    assert len(seen) == 2
    run = (evidence / "latest").resolve()
    assert run == seen[-1].resolve()
    bundle = read_bundle(run)
    assert bundle["status"] == "complete" and bundle["notes"] == ["5s-lossless ran"]
    assert rebuild(run).json_dict() == bundle
    assert (run / "events.jsonl").is_file()
    report = (run / "report.html").read_text()
    assert "Ref2VA acceptance report" in report and "Verdicts per track" in report
    assert "test_scenario.py::test_scenario[5s-lossless]" in report


def test_a_named_run_writes_that_folder_once_and_bad_names_are_refused(
        session: pytest.Pytester) -> None:
    """--run-id (what `./ref2va campaign` names its lanes with): the folder is that name, a
    second run of the same name is refused before anything runs, and a name that could leave
    the evidence folder or hide in it is refused."""
    session.makepyfile(test_scenario=CAMPAIGN_SCENARIO)
    evidence = session.path / "evidence"
    _run(session, "-m", "5s and lossless", "--evidence-dir", str(evidence), "--run-id",
         "20261201T051308Z-99b0d4-lane2").assert_outcomes(passed=1)
    run = evidence / "20261201T051308Z-99b0d4-lane2"
    assert read_bundle(run)["run_id"] == run.name
    assert (evidence / "latest").resolve() == run.resolve()
    again = _run(session, "-m", "5s and lossless", "--evidence-dir", str(evidence),
                 "--run-id", run.name)
    assert again.ret == pytest.ExitCode.USAGE_ERROR
    assert f"evidence/{run.name} exists already" in "\n".join(again.errlines)
    assert read_bundle(run)["notes"] == ["5s-lossless ran"]  # the first run's, untouched
    for bad in ("../elsewhere", ".hidden", "a/b", "latest", "x" * 101, "bad id"):
        refused = _run(session, "--evidence-dir", str(evidence), "--run-id", bad)
        assert refused.ret == pytest.ExitCode.USAGE_ERROR, bad
        assert f"--run-id {bad!r}: letters, digits" in "\n".join(refused.errlines)
    assert sorted(p.name for p in evidence.iterdir()) == ["20261201T051308Z-99b0d4-lane2",
                                                          "latest"]


def test_profiling_runs_only_when_the_mark_expression_names_it(session: pytest.Pytester) -> None:
    """`pytest -m "lossy and 15s"` on the host must not start profiled instances (hours there):
    the profile scenarios run when -m names `profile`, and are deselected otherwise."""
    session.makepyfile(test_scenario=CAMPAIGN_SCENARIO.replace("pytest.mark.acceptance",
                                                               "pytest.mark.profile"))
    evidence = str(session.path / "evidence")
    for args, ran in ((("-m", "lossy and 15s"), 0), ((), 0), (("-m", "profile and 15s"), 2),
                      (("-m", "profile and lossy and 15s"), 1)):
        result = _run(session, "--evidence-dir", evidence, *args)
        outcomes = result.parseoutcomes()
        assert outcomes.get("passed", 0) == ran, (args, outcomes)
        assert outcomes.get("deselected", 0) == 4 - ran, (args, outcomes)


def test_a_users_own_html_path_is_left_alone(session: pytest.Pytester) -> None:
    session.makepyfile(test_scenario=CAMPAIGN_SCENARIO)
    evidence = session.path / "evidence"
    _run(session, "-m", "5s and lossless", "--evidence-dir", str(evidence), "--html",
         str(session.path / "mine.html")).assert_outcomes(passed=1)
    assert (session.path / "mine.html").is_file()
    assert not list(evidence.rglob("report.html"))
    assert json.loads((evidence / "latest" / "evidence.json").read_text())["status"] == "complete"


@pytest.mark.fast
def test_collecting_only_makes_no_run_folder(session: pytest.Pytester) -> None:
    session.makepyfile(test_scenario=CAMPAIGN_SCENARIO)
    evidence = session.path / "evidence"
    result = _run(session, "--collect-only", "-q", "--evidence-dir", str(evidence))
    assert result.ret == 0
    assert not evidence.exists()


@pytest.mark.fast
@pytest.mark.parametrize(("damage", "said"), [
    ("yaml", "invalid YAML"), ("schema", "surprise: unknown key"), ("lock", "malformed lock")])
def test_an_unusable_campaign_is_said_once_and_nothing_runs(
        session: pytest.Pytester, tmp_path: Path, damage: str, said: str) -> None:
    # Three scenario modules: each used to report the error at its collection, then again in
    # the short summary (six times for the shipped scenarios).
    for name in ("test_one", "test_two", "test_three"):
        session.makepyfile(**{name: CAMPAIGN_SCENARIO})
    if damage == "lock":
        campaign = campaign_variant(tmp_path / "c")
        (tmp_path / "c" / "campaign.lock.json").write_text('{"schema": 1')
    else:
        campaign = tmp_path / "bad.yaml"
        campaign.write_text("name: x\nfoo: [\n" if damage == "yaml"
                            else "schema_version: 1\nname: x\nsurprise: 1\n")
    evidence = session.path / "evidence"
    result = run_plugin(session, "-ra", "-m", "5s and lossless", "--campaign",
                        str(campaign), "--evidence-dir", str(evidence))
    output = "\n".join(result.outlines + result.errlines)
    assert output.count(said) == 1, output
    assert "ref2va: cannot use the campaign" in output and "Traceback" not in output
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.assert_outcomes()  # nothing ran, nothing errored
    assert not evidence.exists()


def test_inputs_not_matching_their_pins_stop_the_run_before_any_scenario(
        session: pytest.Pytester, tmp_path: Path) -> None:
    session.makepyfile(test_scenario=CAMPAIGN_SCENARIO)
    campaign = campaign_variant(tmp_path / "c")
    pins = yaml.safe_load(campaign.read_text())["tracks"]["5s-lossless"]["inputs"]
    (tmp_path / "c" / "inputs" / "prompt.txt").unlink()
    image = tmp_path / "c" / "inputs" / "reference.png"
    image.write_bytes(image.read_bytes() + b"\0")
    found = file_sha256(image)
    evidence = session.path / "evidence"
    result = run_plugin(session, "-m", "5s and lossless", "--campaign", str(campaign),
                        "--evidence-dir", str(evidence))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.assert_outcomes()  # the scenario never ran
    errors = [line for line in result.errlines if "input check" in line]
    # One line per input, naming the tracks that share it, the field, the path (relative to the
    # campaign) and both full hashes.
    tracks = "tracks 5s-lossless, 5s-lossy, 15s-lossless, 15s-lossy"
    assert errors == [
        f"ERROR: ref2va: input check: {tracks}: inputs.prompt: inputs/prompt.txt: missing; "
        f"pinned sha256 {pins['prompt']['sha256']}",
        f"ref2va: input check: {tracks}: inputs.reference_image: inputs/reference.png: "
        f"pinned sha256 {pins['reference_image']['sha256']}, found {found}"]
    assert "Traceback" not in "\n".join(result.outlines + result.errlines)
    # The run still ends as a run: a final status, the checks, the verdict rows and the report.
    run = (evidence / "latest").resolve()
    bundle = read_bundle(run)
    assert bundle["status"] == "stopped" and bundle["instances"] == []
    assert not any(note.endswith("ran") for note in bundle["notes"])
    assert any(found in note and "reference.png" in note for note in bundle["notes"])
    inputs = [c for c in bundle["checks"] if c["name"] == "inputs"]
    assert {(c["track"], c["arm"], c["reason"]) for c in inputs} >= {
        ("5s-lossless", "b0", "protocol_deviation")}
    assert {v["track"] for v in bundle["verdicts"]} == {"5s-lossless"}
    assert all(v["verdict"] == "inconclusive" and "protocol_deviation" in v["reasons"]
               for v in bundle["verdicts"])
    assert found in (run / "report.html").read_text()
    assert "Ref2VA verdicts per track" in result.stdout.str()


@pytest.mark.parametrize(("selection", "warned"), [("5s and lossy", True),
                                                    ("5s and lossless", False)])
def test_pins_that_are_undeclared_stand_ins_are_said_before_any_engine(
        session: pytest.Pytester, tmp_path: Path, selection: str, warned: bool) -> None:
    session.makepyfile(test_scenario=CAMPAIGN_SCENARIO)
    campaign = campaign_variant(tmp_path / "c", models=True)
    data = yaml.safe_load(campaign.read_text())
    data["scorer_weights"]["clip_vitb32"]["stand_in"] = False  # the stand-in's pin, undeclared
    campaign.write_text(yaml.safe_dump(data, sort_keys=False))
    (tmp_path / "c" / "inputs" / "prompt.txt").unlink()  # and the run stops before any engine
    evidence = session.path / "evidence"
    result = run_plugin(session, "-m", selection, "--campaign", str(campaign),
                        "--evidence-dir", str(evidence))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    line = ("ref2va: scorer_weights clip_vitb32 (pinned to the sha256 of clip_vitb32's seeded "
            "stand-in): the campaign does not mark them stand_in: true, so no lossy verdict "
            "scored with them will be better than inconclusive; pin the real files")
    output = "\n".join(result.outlines + result.errlines)
    assert (line in output) is warned, output
    notes = read_bundle((evidence / "latest").resolve())["notes"]
    assert (line in notes) is warned


def test_inputs_matching_their_pins_let_the_run_go_on(session: pytest.Pytester,
                                                       tmp_path: Path) -> None:
    session.makepyfile(test_scenario=CAMPAIGN_SCENARIO)
    evidence = session.path / "evidence"
    run_plugin(session, "-m", "5s and lossless", "--campaign",
               str(campaign_variant(tmp_path / "c")), "--evidence-dir",
               str(evidence)).assert_outcomes(passed=1)
    bundle = read_bundle((evidence / "latest").resolve())
    assert bundle["status"] == "complete" and bundle["notes"] == ["5s-lossless ran"]
    assert not [c for c in bundle["checks"] if c["name"] == "inputs"]
