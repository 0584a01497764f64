"""The bring-up: one command an operator runs once on a fresh host, before anything is frozen.

It makes exactly the starts and requests `schedule` lists (so `plan` prices what it spends),
answers every question of `rows.QUESTIONS` with a row, and writes `bringup.json`,
`bringup.html` and `bringup.patch` into its run folder beside the usual evidence (every instance,
sample, log and dump of its engines). Each step records what it saw before the next starts; a
step that fails leaves the rows that depend on it `not_checked`, naming the failure, and the
steps that do not depend on it still run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ref2va_contract.diagnostics import ENABLED_PATH_FILE

from ..campaign import LoadedCampaign, load_campaign
from ..campaign.schema import ArmSpec
from ..client import ReferenceFile, TimedClient
from ..device_memory import IdleLevel, Release, read_idle, wait_for_release
from ..devices import probe_for
from ..engine_kinds import engine_kind
from ..errors import Ref2VAError
from ..evidence import EvidenceBundle, new_run_id
from ..fill_points import fill_points
from ..identity import preflight
from ..identity.pin import IdentityToolMissing
from ..plan import Arm, TrackPlan, plan_track
from ..sanitize import Sanitizer
from ..server import EngineInstance, InstanceRegistry, engine_environment
from ..workload import Arms, Outcome, build_request
from . import probes
from .page import write_page
from .patch import CampaignPatch, ScalarEdit, build
from .rows import Row, complete, confirmed, contradicted, measured, not_checked
from .schedule import BringupSchedule, ceil_s, display, median, price, schedule

log = logging.getLogger(__name__)

SERVER_BOUNDS = ("VLLM_OMNI_DLO_DP_WAVE_TIMEOUT", "VLLM_OMNI_VIDEO_SYNC_TIMEOUT")
DEFAULT_BOUND_S = 600.0  # both bounds' default in vLLM-Omni 0.30.0
# A first 15 s request is clear of the server bound with this much headroom left (run-to-run
# spread on the host and a slower first request after a fresh start).
BOUND_HEADROOM = 0.8
START_TOLERANCE = 0.25  # a measured start within 25% of the estimate confirms it
POINT_FOR_PATH = "latent.video"  # one small point: enough for enabled_path.json
TRACK_LABEL = "bringup"


@dataclass
class PolicyRun:
    """One B0 memory-policy profile: its start, request, dumps, stop and memory release."""

    profile: str
    path: Path | None = None
    started: bool = False
    start_s: float | None = None
    start_error: str | None = None
    hbm_loaded_mb: dict[str, float] | None = None
    hbm_problem: str | None = None
    server_env: dict[str, str] | None = None
    request: Outcome | None = None
    enabled_path: dict[str, Any] | None = None
    dump_folders: int = 0
    stop: dict[str, Any] | None = None
    release: Release | None = None

    @property
    def served(self) -> bool:
        return self.request is not None and self.request.complete

    def to_dict(self) -> dict[str, Any]:
        outcome = self.request
        return {
            "profile": self.profile, "started": self.started,
            "start_s": None if self.start_s is None else round(self.start_s, 3),
            "start_error": self.start_error, "hbm_loaded_mb": self.hbm_loaded_mb,
            "hbm_problem": self.hbm_problem,
            "request": None if outcome is None else {
                "ok": outcome.sample.ok, "complete": outcome.complete,
                "latency_s": outcome.sample.latency_s, "sha256": outcome.sample.sha256,
                "explain": outcome.explain(), "sample_id": outcome.sample.sample_id},
            "enabled_path": self.enabled_path, "dump_folders": self.dump_folders,
            "stop": self.stop,
            "release": None if self.release is None else self.release.to_dict(),
        }


@dataclass
class BringupResult:
    """What one bring-up saw, its rows, and where it wrote them."""

    folder: Path
    rows: list[Row]
    data: dict[str, Any]
    patch: CampaignPatch | None = None
    patch_file: Path | None = None

    @property
    def contradicted(self) -> list[Row]:
        return [r for r in self.rows if r.status == "contradicted"]

    @property
    def exit_code(self) -> int:
        return 1 if self.contradicted else 0

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for row in self.rows:
            found[row.status] = found.get(row.status, 0) + 1
        return found


def _enabled_path(outcome: Outcome | None) -> dict[str, Any] | None:
    if outcome is None or outcome.dump_dir is None:
        return None
    try:
        return dict(json.loads((outcome.dump_dir / ENABLED_PATH_FILE).read_text("utf-8")))
    except (OSError, ValueError):
        return None


def _cache(path: dict[str, Any] | None) -> tuple[str, list[Any]]:
    cache = (path or {}).get("cache") or {}
    return str(cache.get("backend", "unknown")), list(cache.get("reused_steps") or [])


@dataclass
class _Bringup:
    campaign: LoadedCampaign
    bundle: EvidenceBundle
    plan: BringupSchedule
    registry: InstanceRegistry = field(default_factory=InstanceRegistry)
    rows: dict[str, Row] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    policies: list[PolicyRun] = field(default_factory=list)
    idle: IdleLevel | None = None
    imports: dict[str, str] = field(default_factory=dict)
    cache_runs: dict[str, Outcome] = field(default_factory=dict)
    long_request: Outcome | None = None
    long_path: dict[str, Any] | None = None
    patch_inputs: dict[str, Any] = field(default_factory=dict)

    # -- helpers ---------------------------------------------------------------------------------
    @property
    def model(self) -> Any:
        return self.campaign.model

    def put(self, row: Row) -> None:
        self.rows[row.id] = row
        log.info("bring-up: %s", row.line())

    def track_plan(self, track: str, arm_spec: ArmSpec) -> TrackPlan:
        plan = plan_track(self.campaign, track, order_seed=0)
        return replace(plan, arms=(Arm(arm_spec.id, arm_spec),))

    def arms(self, track: str, arm_spec: ArmSpec) -> Arms:
        return Arms(self.campaign, self.track_plan(track, arm_spec), self.bundle, self.registry)

    def policy_spec(self, profile: Path) -> ArmSpec:
        rel = os.path.relpath(profile, self.campaign.folder)
        spec: ArmSpec = self.model.baseline.model_copy(update={"profile": rel})
        return spec

    def bounds(self) -> dict[str, float]:
        env = self.model.environment
        found = {}
        for name in SERVER_BOUNDS:
            try:
                found[name] = float(env.get(name, DEFAULT_BOUND_S))
            except ValueError:
                found[name] = DEFAULT_BOUND_S
        return found

    def probe(self) -> Any:
        devices = self.model.devices
        return probe_for(devices.kind, devices.visible)

    # -- steps -----------------------------------------------------------------------------------
    def host(self) -> None:
        try:
            result = preflight(self.campaign)
        except IdentityToolMissing as exc:
            self.put(contradicted("identity_lines", f"a tool the pin needs is missing: {exc}"))
            self.data["preflight"] = {"error": str(exc)}
            return
        self.data["preflight"] = result.to_dict()
        fields = [r for r in result.rows if not r.field.startswith("import ")]
        unread = [r for r in fields if r.status == "not found"]
        if unread:
            self.put(contradicted("identity_lines", "no host value for " + ", ".join(
                f"{r.field} ({r.source})" for r in unread)))
        else:
            drift = [r.field for r in fields if r.status == "DRIFT"]
            self.put(confirmed("identity_lines", f"{len(fields)} field(s) read on the host"
                               + (f"; differing from the pin: {', '.join(drift)}" if drift
                                  else ""), "ref2va-accept preflight prints the table"))
        for row in result.rows:
            if row.field.startswith("import "):
                self.imports[row.field.removeprefix("import ")] = row.host or row.source
        if "mindiesd" not in self.imports:
            self.put(not_checked("mindiesd", "the campaign pins no mindiesd (not an NPU host)"))
        elif self.imports["mindiesd"] == "importable":
            self.put(confirmed("mindiesd", "import mindiesd works where the server runs"))
        else:
            self.put(contradicted("mindiesd", f"import mindiesd: {self.imports['mindiesd']}",
                                  "pin TORCH_SDPA in every profile (the patch does)"))

    def flags(self) -> None:
        used: dict[str, set[str]] = {}
        specs = [self.policy_spec(p) for p in self.plan.policies] + list(self.model.candidates)
        for spec in specs:
            try:
                profile = self.campaign.profile(spec)
            except Ref2VAError as exc:
                self.put(contradicted("flags", f"a profile does not load: {exc}"))
                return
            for flag, value in profile.args.items():
                if value is not False and value is not None:
                    used.setdefault(f"--{flag}", set()).add(Path(spec.profile).name)
        kind = engine_kind(self.model.engine.kind)
        if kind.name != "vllm-omni":
            self.put(not_checked("flags", f"the {kind.name} engine has no `serve --omni "
                                 "--help=all`"))
            return
        launch = self.arms(self.plan.track_5s or next(iter(self.model.tracks)),
                           self.model.baseline).launch_spec(Arm("b0", self.model.baseline))
        env = engine_environment(launch, os.environ)
        found, why = probes.help_flags(self.model.engine.resolved_command(), env,
                                       self.campaign.engine_workdir())
        if found is None:
            self.put(not_checked("flags", why))
            return
        missing = sorted(f for f in used if f not in found)
        self.data["flags"] = {"used": {f: sorted(p) for f, p in sorted(used.items())},
                              "missing": missing}
        if missing:
            self.put(contradicted("flags", "not in `vllm serve --omni --help=all`: " + ", ".join(
                f"{f} ({', '.join(sorted(used[f]))})" for f in missing)))
        else:
            self.put(confirmed("flags", f"all {len(used)} profile flags are options"))

    def inputs(self) -> None:
        audio: dict[Path, str] = {}
        for track in self.model.tracks.values():
            pinned = track.inputs.reference_audio
            if pinned is not None:
                audio[self.campaign.resolve(pinned.path)] = pinned.path
        if not audio:
            self.put(not_checked("ffprobe_duration", "the campaign sends no reference audio"))
            return
        seen: list[dict[str, Any]] = []
        bad: list[str] = []
        for path, shown in audio.items():
            ffprobe, why = probes.ffprobe_duration(path, os.environ)
            own = probes.judge_duration(path)
            seen.append({"file": shown, "ffprobe_s": ffprobe, "decoded_s": own, "problem": why})
            if ffprobe is None:
                bad.append(f"{Path(shown).name}: {why}")
            elif not probes.within_h3(ffprobe):
                bad.append(f"{Path(shown).name}: ffprobe reads {ffprobe:.3f} s, outside 2-15 s")
            elif own is not None and abs(own - ffprobe) > 0.1:
                bad.append(f"{Path(shown).name}: ffprobe reads {ffprobe:.3f} s, the judge "
                           f"decodes {own:.3f} s")
        self.data["inputs"] = seen
        if bad:
            self.put(contradicted("ffprobe_duration", "; ".join(bad)))
        else:
            self.put(confirmed("ffprobe_duration", ", ".join(
                f"{Path(s['file']).name}: {s['ffprobe_s']:.3f} s" for s in seen)))

    def policy(self, profile: Path, first: bool) -> PolicyRun:
        run = PolicyRun(display(self.campaign, profile), profile)
        self.policies.append(run)
        track = self.plan.track_5s
        if track is None:
            run.start_error = "the campaign has no 5 s track"
            return run
        spec = self.policy_spec(profile)
        arms = self.arms(track, spec)
        t0 = time.monotonic()
        try:
            engine = arms.start("b0")
        except Ref2VAError as exc:
            run.start_error = str(exc).splitlines()[0]
            return run
        run.started, run.start_s = True, time.monotonic() - t0
        try:
            self.loaded_memory(run)
            run.server_env = probes.process_environment(engine.pid) if engine.pid else None
            points = (arms.plan.lossless.diagnostics
                      if arms.plan.quality == "lossless" else (POINT_FOR_PATH,))
            run.request = arms.request(engine, "b0", kind=TRACK_LABEL, index=0,
                                       diagnostics_points=points)
            run.enabled_path = _enabled_path(run.request)
            if run.request.dump_dir is not None:
                tree = run.request.dump_dir.parent
                run.dump_folders = sum(1 for p in tree.rglob("*") if p.is_dir() and any(
                    f.is_file() for f in p.iterdir())) if tree.is_dir() else 0
            if first and run.served:
                self.bad_audio(arms, engine)
                self.long(engine, spec)
        finally:
            self.stop(engine, run)
        return run

    def loaded_memory(self, run: PolicyRun) -> None:
        if self.idle is None or self.idle.used_mb is None:
            run.hbm_problem = "no idle reading" if self.idle is None else self.idle.problem
            return
        snapshot = self.probe().snapshot()
        if not snapshot.readable:
            run.hbm_problem = snapshot.problem
            return
        run.hbm_loaded_mb = {str(d): round(snapshot.memory_used_mb.get(d, 0.0)
                                           - self.idle.used_mb.get(d, 0.0), 1)
                             for d in self.model.devices.visible}

    def stop(self, engine: EngineInstance, run: PolicyRun | None) -> Release | None:
        audit = self.registry.stop(engine)
        self.bundle.add_audit(audit.to_dict())
        stop = audit.to_dict()
        release = None
        if self.model.devices.kind != "none" and self.idle is not None:
            release = wait_for_release(self.probe(), self.model.devices.visible, self.idle,
                                       self.model.devices.memory_release)
        if run is not None:
            run.stop, run.release = stop, release
        else:
            self.data.setdefault("cache_dit", {})["stop"] = stop
            if release is not None:
                self.data["cache_dit"]["release"] = release.to_dict()
        self.data.setdefault("stops", []).append({"audit": stop, "release": (
            None if release is None else release.to_dict())})
        self.bundle.checkpoint()
        return release

    def bad_audio(self, arms: Arms, engine: EngineInstance) -> None:
        plan = arms.plan
        request = build_request(plan, plan.arms[0], plan.seeds[0])
        references = tuple(r for r in request.references if not r.mime.startswith("audio"))
        request = replace(request, references=(*references, ReferenceFile(
            "too-short.wav", probes.short_wav(), "audio/wav")))
        with TimedClient(engine.base_url, plan.timeouts) as client:
            sample, _ = client.generate(request, arm="b0", track=plan.track_id,
                                        kind="bringup-bad-audio", index=0, seed=plan.seeds[0])
        self.bundle.add_sample(sample.to_dict() | {"request": request.describe()})
        detail = (sample.detail or "").removeprefix(f"HTTP {sample.status}: ")
        self.data["bad_audio"] = {"status": sample.status, "wording": detail[:300]}
        if sample.status == 400 and ("duration" in detail.lower() or " s" in detail):
            self.put(confirmed("bad_audio_400", f"HTTP 400: {detail[:200]}"))
        else:
            self.put(contradicted("bad_audio_400", f"HTTP {sample.status}: {detail[:200]}"
                                  if sample.status else f"no answer: {sample.failure}"))

    def long(self, engine: EngineInstance, spec: ArmSpec) -> None:
        track = self.plan.track_15s
        if track is None:
            return
        arms = self.arms(track, spec)
        points = arms.plan.lossless.diagnostics if arms.plan.quality == "lossless" else ()
        self.long_request = arms.request(engine, "b0", kind=TRACK_LABEL, index=1,
                                         diagnostics_points=points)
        self.long_path = _enabled_path(self.long_request)
        self.data["long_request"] = {"track": track, "ok": self.long_request.sample.ok,
                                     "complete": self.long_request.complete,
                                     "latency_s": self.long_request.sample.latency_s,
                                     "explain": self.long_request.explain(),
                                     "client_timeout_s": arms.plan.timeouts.request_s,
                                     "server_bounds_s": self.bounds()}

    def cache_dit(self) -> None:
        candidate = self.plan.cache_dit
        track = self.plan.track_5s
        if candidate is None or track is None:
            why = ("no candidate's profile sets cache-backend: cache_dit" if candidate is None
                   else "the campaign has no 5 s track")
            for row in ("cache_dit_avg", "cache_dit_reset", "lossless_no_cache"):
                self.put(not_checked(row, why))
            return
        spec = next(c for c in self.model.candidates if c.id == candidate)
        arms = self.arms(track, spec)
        lossless = Arms(self.campaign, replace(arms.plan, arms=(Arm(spec.id, spec.model_copy(
            update={"request": {**spec.request, "quality": "lossless"}})),)), self.bundle,
            self.registry)
        try:
            engine = arms.start(candidate)
        except Ref2VAError as exc:
            why = f"the Cache-DiT server did not start: {str(exc).splitlines()[0]}"
            for row in ("cache_dit_avg", "cache_dit_reset", "lossless_no_cache"):
                self.put(not_checked(row, why))
            return
        try:
            for name, runner in (("first", arms), ("second", arms), ("lossless", lossless)):
                self.cache_runs[name] = runner.request(
                    engine, candidate, kind=f"{TRACK_LABEL}-{name}", index=len(self.cache_runs),
                    diagnostics_points=(POINT_FOR_PATH,))
        finally:
            self.stop(engine, None)
        self.judge_cache(engine)

    def judge_cache(self, engine: EngineInstance) -> None:
        first, second, lossless = (self.cache_runs.get(k) for k in ("first", "second",
                                                                     "lossless"))
        paths = {k: _enabled_path(v) for k, v in self.cache_runs.items()}
        self.data.setdefault("cache_dit", {})["requests"] = {
            k: {"ok": v.sample.ok, "sha256": v.sample.sha256, "explain": v.explain(),
                "cache": dict(zip(("backend", "reused_steps"), _cache(paths[k]), strict=True))}
            for k, v in self.cache_runs.items()}
        if first is None or not first.sample.ok:
            said = first.explain() if first else "not sent"
            log_text = engine.log_tail(200)
            avg = next((line for line in [said, *log_text.splitlines()]
                        if "ReduceOp.AVG" in line or "AVG" in line.split()), None)
            self.put(contradicted("cache_dit_avg", f"refused: {avg.strip()[:240]}" if avg
                                  else f"the first Cache-DiT request failed: {said[:240]}"))
        else:
            backend, reused = _cache(paths["first"])
            if backend == "none":
                self.put(contradicted("cache_dit_avg", "the Cache-DiT server ran no cache "
                                      "(enabled_path.json: cache backend none)"))
            else:
                self.put(confirmed("cache_dit_avg", f"completed with {backend} on, "
                                   f"{len(reused)} cached step(s)"))
        if first is None or second is None or not (first.complete and second.complete):
            self.put(not_checked("cache_dit_reset", "the two identical requests did not both "
                                 "complete"))
        else:
            a, b = _cache(paths["first"])[1], _cache(paths["second"])[1]
            if a == b and first.sample.sha256 == second.sample.sha256:
                self.put(confirmed("cache_dit_reset", f"the same {len(a)} cached step(s) and "
                                   "the same bytes in both requests"))
            else:
                self.put(contradicted("cache_dit_reset", f"cached steps {a} then {b}; bytes "
                                      + ("equal" if first.sample.sha256 == second.sample.sha256
                                         else "differ")))
        if lossless is None or not lossless.complete:
            self.put(not_checked("lossless_no_cache", "the quality=lossless request did not "
                                 "complete: " + (lossless.explain() if lossless else "not sent")))
        else:
            backend, reused = _cache(paths["lossless"])
            if backend == "none" and not reused:
                self.put(confirmed("lossless_no_cache", "enabled_path.json: cache backend none, "
                                   "no cached step"))
            else:
                self.put(contradicted("lossless_no_cache", f"cache backend {backend}, cached "
                                      f"steps {reused}"))

    # -- rows from the policies ------------------------------------------------------------------
    def judge_policies(self) -> None:
        runs = self.policies
        served = [r for r in runs if r.served]
        lines = []
        for r in runs:
            if not r.started:
                lines.append(f"{r.profile}: did not start ({r.start_error})")
            elif not r.served:
                lines.append(f"{r.profile}: started in {r.start_s:.1f} s, request "
                             f"{r.request.explain() if r.request else 'not sent'}")
            else:
                hbm = ("" if r.hbm_loaded_mb is None else ", HBM over idle " + ", ".join(
                    f"{d}: {mb:.0f} MB" for d, mb in r.hbm_loaded_mb.items()))
                lines.append(f"{r.profile}: started in {r.start_s:.1f} s, served{hbm}")
        chosen = next((r for r in served if r.release is None or r.release.released), None)
        self.patch_inputs["chosen"] = chosen
        if chosen is not None:
            self.put(confirmed("tp_and_memory_policy", "; ".join(lines),
                               f"chosen: {chosen.profile}"))
        elif runs:
            self.put(contradicted("tp_and_memory_policy", "; ".join(lines)))
        starts = [r.start_s for r in runs if r.start_s is not None]
        self.patch_inputs["start_s"] = median(starts)
        estimate = (self.model.protocol.expected_start_s or {}).get("5s")
        if not starts:
            self.put(not_checked("start_time", "no engine started"))
        elif estimate is None:
            self.put(measured("start_time", f"median start {median(starts):.1f} s"))
        else:
            mid = median(starts) or 0.0
            off = abs(mid - estimate) / estimate if estimate else 1.0
            row = confirmed if off <= START_TOLERANCE else contradicted
            self.put(row("start_time", f"median start {mid:.1f} s against the estimate "
                         f"{estimate:g} s ({off:.0%} off)"))
        first = served[0] if served else None
        self.judge_imports(first, runs)
        self.judge_pythonpath(runs)
        self.judge_dumps(chosen or first)
        self.judge_stops(runs)
        self.judge_long()
        self.judge_determinism(chosen or first)

    def judge_imports(self, first: PolicyRun | None, runs: list[PolicyRun]) -> None:
        wanted = {m: v for m, v in self.imports.items() if m in ("vllm_ascend", "mindiesd")}
        if not wanted:
            self.put(not_checked("backend_imports", "the campaign pins neither vllm-ascend nor "
                                 "mindiesd (not an NPU host)"))
            return
        broken = [f"{m}: {v}" for m, v in wanted.items() if v != "importable"]
        if broken:
            self.put(contradicted("backend_imports", "; ".join(broken)))
        elif first is None:
            said = next((r.request.explain() for r in runs if r.request), "no B0 request sent")
            self.put(contradicted("backend_imports", f"imports work, but no first request "
                                  f"succeeded: {said[:200]}"))
        else:
            attention = (first.enabled_path or {}).get("attention", "not reported")
            self.put(confirmed("backend_imports", f"{', '.join(wanted)} import; the first "
                               f"request succeeded (attention: {attention})"))

    def judge_pythonpath(self, runs: list[PolicyRun]) -> None:
        inherited = os.environ.get("PYTHONPATH")
        envs = [(r.profile, r.server_env) for r in runs if r.server_env is not None]
        if not inherited:
            self.put(not_checked("pythonpath_kept", "the judge's environment has no PYTHONPATH "
                                 "(source CANN's set_env.sh first, as the host's shell does)"))
            return
        if not envs:
            self.put(not_checked("pythonpath_kept", "no server's environment could be read"))
            return
        lost = []
        for profile, env in envs:
            _, missing = probes.kept_entries(inherited, env.get("PYTHONPATH"))
            if missing:
                lost.append(f"{profile}: lost {len(missing)} of the inherited entries")
        if lost:
            self.put(contradicted("pythonpath_kept", "; ".join(lost)))
        else:
            self.put(confirmed("pythonpath_kept", f"every inherited entry kept in {len(envs)} "
                               "server(s)"))

    def judge_dumps(self, run: PolicyRun | None) -> None:
        track = self.plan.track_5s
        lossless = track is not None and track.endswith("lossless")
        if run is None or run.request is None:
            for row in ("dump_owner", "point_shapes", "point_dtypes", "dump_time"):
                self.put(not_checked(row, "no B0 request completed"))
            return
        path = run.enabled_path
        if path is None:
            self.put(contradicted("dump_owner", f"no {ENABLED_PATH_FILE} in the request's dump "
                                  "folder"))
        else:
            rank = path.get("rank")
            if run.dump_folders == 1 and rank in (0, None):
                self.put(confirmed("dump_owner", "one dump folder, " + (
                    "rank 0" if rank == 0 else "the engine names no rank")))
            else:
                self.put(contradicted("dump_owner", f"{run.dump_folders} dump folder(s), "
                                      f"rank {rank}"))
        if not lossless or track is None:
            for row in ("point_shapes", "point_dtypes"):
                self.put(not_checked(row, "the campaign has no 5 s lossless track"))
        else:
            self.judge_points(track, run)
        self.judge_dump_time(path)

    def judge_points(self, track: str, run: PolicyRun) -> None:
        assert run.request is not None and run.request.dump_dir is not None
        dumps = [(track, run.request.dump_dir, run.request.media_path)]
        if (self.long_request is not None and self.long_request.dump_dir is not None
                and self.plan.track_15s and self.plan.track_15s.endswith("lossless")):
            dumps.append((self.plan.track_15s, self.long_request.dump_dir,
                          self.long_request.media_path))
        self.patch_inputs["dumps"] = dumps
        shapes_bad, shapes_new, dtypes_bad, missing, checked = [], [], [], [], 0
        unreadable: list[str] = []  # campaign lines fill-points cannot edit: compared by hand
        for name, folder, mp4 in dumps:
            try:
                result = fill_points(self.campaign.path, folder, tracks=[name], mp4=mp4,
                                     force=True, dry_run=True)
            except Ref2VAError as exc:
                missing.append(f"{name}: {exc}")
                continue
            for fill in result.fills:
                if fill.new_shape is None:
                    if "one-line flow mapping" in (fill.reason or ""):
                        unreadable.append(f"{name} {fill.name}")
                    else:  # the engine did not write it, or wrote something unreadable
                        missing.append(f"{name} {fill.name}: {fill.reason}")
                    continue
                checked += 1
                if isinstance(fill.old_shape, str):
                    shapes_new.append(f"{fill.name} {fill.new_shape}")
                elif fill.old_shape != fill.new_shape:
                    shapes_bad.append(f"{name} {fill.name}: campaign {fill.old_shape}, "
                                      f"host {fill.new_shape}")
                if fill.new_dtype != fill.old_dtype:
                    dtypes_bad.append(f"{name} {fill.name}: campaign {fill.old_dtype}, "
                                      f"host {fill.new_dtype}")
        if shapes_bad or missing:
            self.put(contradicted("point_shapes", "; ".join(shapes_bad + [
                f"not written: {m}" for m in missing])))
        elif unreadable:
            self.put(not_checked("point_shapes", f"{checked} point(s) compared; these lines of "
                                 "the campaign are not one-line flow mappings (compare them by "
                                 "hand): " + ", ".join(unreadable)))
        elif shapes_new:
            self.put(measured("point_shapes", f"{len(shapes_new)} placeholder shape(s) "
                              "measured (in the patch)", "; ".join(shapes_new)))
        else:
            self.put(confirmed("point_shapes", f"{checked} point(s) as frozen"))
        if dtypes_bad:
            self.put(contradicted("point_dtypes", "; ".join(dtypes_bad)))
        elif checked:
            self.put(confirmed("point_dtypes", f"{checked} point(s) as the campaign says"))
        else:
            self.put(not_checked("point_dtypes", "no point was read"))

    def judge_dump_time(self, path: dict[str, Any] | None) -> None:
        seconds = (path or {}).get("dump_seconds")
        if seconds is None:
            self.put(not_checked("dump_time", f"{ENABLED_PATH_FILE} has no dump_seconds"))
            return
        bound = min(self.bounds().values())
        long_dump = (self.long_path or {}).get("dump_seconds")
        tracks = self.model.tracks
        scale = (tracks[self.plan.track_15s].num_frames / tracks[self.plan.track_5s].num_frames
                 if self.plan.track_15s and self.plan.track_5s else 1.0)
        dump_15 = float(long_dump) if long_dump is not None else float(seconds) * scale
        request_15 = (self.long_request.sample.latency_s if self.long_request is not None
                      and self.long_request.sample.latency_s is not None
                      else (self.model.protocol.expected_request_s or {}).get("15s", 0.0))
        total = float(request_15) + (0.0 if long_dump is not None else dump_15)
        seen = (f"{float(seconds):.1f} s for the 5 s points; 15 s: {dump_15:.1f} s "
                f"({'measured' if long_dump is not None else 'scaled by frames'}), a 15 s "
                f"request with them {total:.0f} s against the {bound:.0f} s bound")
        self.put((confirmed if total < bound else contradicted)("dump_time", seen))

    def judge_stops(self, runs: list[PolicyRun]) -> None:
        stops = self.data.get("stops", [])
        if not stops:
            self.put(not_checked("stop_order", "no engine was stopped"))
            self.put(not_checked("memory_release", "no engine was stopped"))
            return
        trouble = []
        for stop in stops:
            audit = stop["audit"]
            steps = audit.get("steps") or []
            first = steps[0] if steps else {}
            if audit.get("needed_sigkill") or audit.get("survivors") or audit.get("problems"):
                trouble.append(f"{audit['instance']}: " + "; ".join(audit.get("problems") or [
                    "needed SIGKILL"]))
            elif first.get("alive_after"):
                trouble.append(f"{audit['instance']}: {first['alive_after']} process(es) alive "
                               "after SIGTERM to the main process")
        releases = [s["release"] for s in stops if s["release"] is not None]
        held = [r for r in releases if not r["released"]]
        main_s = [s["audit"]["steps"][0]["waited_s"] for s in stops if s["audit"].get("steps")]
        worst = max((r["waited_s"] for r in releases), default=None)
        self.patch_inputs["release_worst_s"] = worst
        if trouble or held:
            self.put(contradicted("stop_order", "; ".join(trouble + [
                f"HBM held after a stop: {r['held_mb']}" for r in held])))
        else:
            self.put(confirmed("stop_order", f"{len(stops)} stop(s) clean; the main process "
                               f"exited {max(main_s, default=0):.1f} s after SIGTERM at worst"))
        if self.model.devices.kind == "none":
            self.put(not_checked("memory_release", "no accelerator is assigned"))
        elif held:
            self.put(contradicted("memory_release", "; ".join(
                f"after {r['waited_s']:.0f} s still {r['held_mb']} MB over idle"
                + (f" ({r['problem']})" if r.get("problem") else "") for r in held)))
        else:
            self.put(confirmed("memory_release", f"back to idle within {worst:.1f} s at worst "
                               f"(timeout {self.model.devices.memory_release.timeout_s:g} s)"))

    def judge_long(self) -> None:
        outcome = self.long_request
        if self.plan.track_15s is None:
            for row in ("wave_timeout", "first_15s_bound"):
                self.put(not_checked(row, "the campaign has no 15 s track"))
            return
        if outcome is None:
            for row in ("wave_timeout", "first_15s_bound"):
                self.put(not_checked(row, "no B0 server served its 5 s request, so the 15 s "
                                     "request was not sent"))
            return
        bound = min(self.bounds().values())
        latency = outcome.sample.latency_s
        if not outcome.complete:
            self.put(contradicted("wave_timeout", outcome.explain()[:240]))
            self.put(contradicted("first_15s_bound", outcome.explain()[:240]))
            return
        assert latency is not None
        client = self.data["long_request"]["client_timeout_s"]
        self.put(confirmed("wave_timeout", f"{latency:.1f} s, inside the client timeout "
                           f"{client:g} s and the server bound {bound:g} s"))
        verdict = confirmed if latency <= BOUND_HEADROOM * bound else contradicted
        self.put(verdict("first_15s_bound", f"{latency:.1f} s is {latency / bound:.0%} of the "
                     f"{bound:g} s bound"))

    def judge_determinism(self, run: PolicyRun | None) -> None:
        pairs = []
        first, second = self.cache_runs.get("first"), self.cache_runs.get("second")
        if first and second and first.complete and second.complete:
            pairs.append(("two identical requests on the Cache-DiT server", first, second))
        lossless = self.cache_runs.get("lossless")
        if run is not None and run.request and run.request.complete and lossless \
                and lossless.complete:
            pairs.append(("B0 and the Cache-DiT server's quality=lossless request (two "
                          "instances)", run.request, lossless))
        if not pairs:
            self.put(not_checked("hccl_determinism", "no pair of identical requests completed"))
            return
        differ = [name for name, a, b in pairs if a.sample.sha256 != b.sample.sha256]
        if differ:
            self.put(contradicted("hccl_determinism", "bytes differ: " + "; ".join(differ),
                                  "set HCCL_DETERMINISTIC=true in the campaign's environment"))
        else:
            self.put(confirmed("hccl_determinism", "same bytes: " + "; ".join(
                name for name, _, _ in pairs)))

    # -- the patch -------------------------------------------------------------------------------
    def make_patch(self) -> CampaignPatch:
        edits: list[ScalarEdit] = []
        start = self.patch_inputs.get("start_s")
        if start is not None:
            for duration in self.model.protocol.expected_start_s or {"5s": 0, "15s": 0}:
                edits.append(ScalarEdit(("protocol", "expected_start_s", duration),
                                        ceil_s(start), "median start measured"))
        chosen: PolicyRun | None = self.patch_inputs.get("chosen")
        if chosen is not None and chosen.request is not None \
                and chosen.request.sample.latency_s is not None:
            dump = float((chosen.enabled_path or {}).get("dump_seconds") or 0.0)
            edits.append(ScalarEdit(("protocol", "expected_request_s", "5s"),
                                    round(chosen.request.sample.latency_s - dump, 3),
                                    "B0's 5 s request less its dump time"))
        if self.long_request is not None and self.long_request.complete \
                and self.long_request.sample.latency_s is not None:
            dump = float((self.long_path or {}).get("dump_seconds") or 0.0)
            edits.append(ScalarEdit(("protocol", "expected_request_s", "15s"),
                                    round(self.long_request.sample.latency_s - dump, 3),
                                    "B0's untimed 15 s request less its dump time"))
        worst = self.patch_inputs.get("release_worst_s")
        timeout = self.model.devices.memory_release.timeout_s
        if worst is not None and 2 * worst > timeout:
            edits.append(ScalarEdit(("devices", "memory_release", "timeout_s"),
                                    ceil_s(2 * worst), "twice the slowest release measured"))
        if chosen is not None and chosen.path is not None:
            own = self.campaign.resolve(self.model.baseline.profile)
            if chosen.path != own:
                rel = os.path.relpath(chosen.path, self.campaign.folder).replace(os.sep, "/")
                edits.append(ScalarEdit(("baseline", "profile"), rel,
                                        "the first memory policy that started, served and "
                                        "released"))
        profile_edits = []
        if self.imports.get("mindiesd", "importable") != "importable":
            for path in {self.campaign.resolve(s.profile) for s in
                         [self.model.baseline, *self.model.candidates]} | set(
                             self.plan.policies):
                text = path.read_text(encoding="utf-8") if path.is_file() else ""
                if "diffusion-attention-backend: FLASH_ATTN" in text:
                    profile_edits.append((path, ("args", "diffusion-attention-backend"),
                                          "TORCH_SDPA", "import mindiesd fails"))
        return build(self.campaign.path, dumps=self.patch_inputs.get("dumps", []),
                     edits=edits, profile_edits=sorted(profile_edits))


def patch_base(campaign: LoadedCampaign) -> Path:
    """Where the patch applies: the engine workdir (the checkout) when the campaign is in it,
    else the campaign's own folder."""
    workdir = campaign.engine_workdir()
    try:
        campaign.folder.relative_to(workdir)
        return workdir
    except ValueError:
        return campaign.folder


def run_bringup(campaign_path: Path, evidence_root: Path, run_id: str | None = None,
                policies: tuple[Path, ...] | None = None) -> BringupResult:
    """Run the bring-up of `campaign_path` and write its page, JSON and patch."""
    campaign = load_campaign(campaign_path)
    plan = schedule(campaign, policies)
    run_id = run_id or f"bringup-{new_run_id()}"
    sanitizer = Sanitizer.for_this_host(repo=campaign.engine_workdir(), evidence=evidence_root)
    bundle = EvidenceBundle.create(evidence_root, run_id, sanitizer)
    work = _Bringup(campaign, bundle, plan)
    cost = price(campaign, plan)
    work.data["schedule"] = plan.to_dict(campaign)
    work.data["cost"] = cost.to_dict()
    started = time.monotonic()
    failure: str | None = None
    try:
        work.host()
        work.flags()
        work.inputs()
        if campaign.model.devices.kind != "none":
            work.idle = read_idle(work.probe(), campaign.model.devices.visible)
            work.data["idle"] = work.idle.to_dict()
        for profile in plan.policies:
            first = not any(r.served for r in work.policies)
            work.policy(profile, first)
            work.data["policies"] = [r.to_dict() for r in work.policies]
            bundle.checkpoint()
        work.cache_dit()
        work.judge_policies()
    except KeyboardInterrupt:
        failure = "interrupted"
        raise
    except Exception as exc:
        failure = f"{type(exc).__name__}: {exc}"
        log.exception("bring-up stopped early")
    finally:
        with contextlib.suppress(Exception):
            for audit in work.registry.stop_all():
                bundle.add_audit(audit.to_dict())
        work.data["policies"] = [r.to_dict() for r in work.policies]
        work.data["elapsed_s"] = round(time.monotonic() - started, 1)
        work.data["failure"] = failure
        why = (f"the bring-up stopped early ({failure})" if failure
               else "not reached: an earlier step failed")
        work.put(not_checked("live_line", "needs a person at the host's terminal: watch the "
                             "progress line of any `pytest -m ...` run there"))
        rows = complete(work.rows, why)
        result = BringupResult(bundle.folder, rows, work.data)
        try:
            result.patch = work.make_patch()
        except Exception as exc:
            work.data["patch_error"] = str(exc)
            log.exception("bring-up: no patch")
        write_page(result, campaign, bundle, patch_base(campaign), cost.line(plan))
        bundle.set_section("bringup", {"campaign": campaign.path.name,
                                       "rows": [r.to_dict() for r in rows],
                                       "failure": failure})
        bundle.finish("interrupted" if failure == "interrupted" else "complete",
                      lambda checks: [])
        bundle.sanitize_files()
    return result


def summary_lines(result: BringupResult) -> list[str]:
    counts = result.counts()
    lines = [row.line() for row in result.rows]
    lines.append(", ".join(f"{counts.get(s, 0)} {s}" for s in (
        "confirmed", "measured", "contradicted", "not_checked")))
    return lines


__all__ = ["BringupResult", "run_bringup", "summary_lines"]
