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
import logging
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ref2va_accept.arms import Arms, build_request
from ref2va_accept.bringup import probes
from ref2va_accept.bringup.judge import Judging
from ref2va_accept.bringup.page import write_page
from ref2va_accept.bringup.patch import CampaignPatch
from ref2va_accept.bringup.rows import Row, complete, confirmed, contradicted, not_checked
from ref2va_accept.bringup.schedule import display, price, schedule
from ref2va_accept.bringup.state import (
    POINT_FOR_PATH,
    TRACK_LABEL,
    PolicyRecord,
    PolicyRun,
    StopRecord,
    enabled_path_of,
)
from ref2va_accept.campaign import ArmSpec, LoadedCampaign, load_campaign
from ref2va_accept.campaign.identity import preflight
from ref2va_accept.campaign.identity.pin import IdentityToolMissing
from ref2va_accept.core import ArmRole, Ref2VAError
from ref2va_accept.engines import (
    EngineInstance,
    Release,
    engine_environment,
    engine_kind,
    read_idle,
    wait_for_release,
)
from ref2va_accept.evidence import EvidenceBundle, new_run_id
from ref2va_accept.evidence.sanitize import Sanitizer
from ref2va_accept.planning import Arm
from ref2va_accept.timing import ReferenceFile, TimedClient

log = logging.getLogger(__name__)


@dataclass
class BringupResult:
    """What one bring-up saw, its rows, and where it wrote them."""

    folder: Path
    rows: list[Row]
    data: dict[str, Any]
    patch: CampaignPatch | None = None
    patch_file: Path | None = None
    policies: list[PolicyRecord] = field(default_factory=list)  # as bringup.json records them
    failure: str | None = None  # why it stopped early, if it did
    elapsed_s: float | None = None

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



class _Bringup(Judging):
    """The steps: each starts what `schedule` lists and records what it saw."""

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
                           self.model.baseline).launch_spec(Arm(ArmRole.B0, self.model.baseline))
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
            engine = arms.start(ArmRole.B0)
        except Ref2VAError as exc:
            run.start_error = str(exc).splitlines()[0]
            return run
        run.started, run.start_s = True, time.monotonic() - t0
        try:
            self.loaded_memory(run)
            run.server_env = probes.process_environment(engine.pid) if engine.pid else None
            points = (arms.plan.lossless.diagnostics
                      if arms.plan.quality == "lossless" else (POINT_FOR_PATH,))
            run.request = arms.request(engine, ArmRole.B0, kind=TRACK_LABEL, index=0,
                                       diagnostics_points=points)
            run.enabled_path = enabled_path_of(run.request)
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
        recorded = {"audit": stop, "release": None if release is None else release.to_dict()}
        self.stops.append(StopRecord.model_validate(recorded))
        self.data.setdefault("stops", []).append(recorded)
        self.bundle.checkpoint()
        return release

    def bad_audio(self, arms: Arms, engine: EngineInstance) -> None:
        plan = arms.plan
        request = build_request(plan, plan.arms[0], plan.seeds[0])
        references = tuple(r for r in request.references if not r.mime.startswith("audio"))
        request = replace(request, references=(*references, ReferenceFile(
            "too-short.wav", probes.short_wav(), "audio/wav")))
        with TimedClient(engine.base_url, plan.timeouts) as client:
            sample, _ = client.generate(request, arm=ArmRole.B0, track=plan.track_id,
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
        self.long_request = arms.request(engine, ArmRole.B0, kind=TRACK_LABEL, index=1,
                                         diagnostics_points=points)
        self.long_path = enabled_path_of(self.long_request)
        self.long_timeout_s = arms.plan.timeouts.request_s
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
        self.judgecache_of(engine)


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
        elapsed_s = round(time.monotonic() - started, 1)
        work.data["elapsed_s"] = elapsed_s
        work.data["failure"] = failure
        why = (f"the bring-up stopped early ({failure})" if failure
               else "not reached: an earlier step failed")
        work.put(not_checked("live_line", "needs a person at the host's terminal: watch the "
                             "progress line of any `pytest -m ...` run there"))
        rows = complete(work.rows, why)
        result = BringupResult(bundle.folder, rows, work.data,
                               policies=[r.record() for r in work.policies], failure=failure,
                               elapsed_s=elapsed_s)
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
