"""The bring-up's steps: each starts what `step_schedule` lists, records what it saw before the next
starts and puts the rows it answers at once (the judgements that need several steps run last,
_judge.py)."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

from ref2va_accept.arms import Arms, build_request
from ref2va_accept.bringup import _probes as probes
from ref2va_accept.bringup import _readings as readings
from ref2va_accept.bringup._judge import Judging
from ref2va_accept.bringup._records import (
    BadAudio,
    CacheDit,
    Flags,
    InputReading,
    LongRequest,
    PreflightError,
)
from ref2va_accept.bringup._rows import confirmed, contradicted, not_checked
from ref2va_accept.bringup._state import (
    POINT_FOR_PATH,
    TRACK_LABEL,
    PolicyRun,
    enabled_path_of,
)
from ref2va_accept.bringup._step_schedule import display
from ref2va_accept.campaign import ArmSpec
from ref2va_accept.campaign.identity import IdentityToolMissing, preflight
from ref2va_accept.core import ArmRole, Ref2VAError
from ref2va_accept.engines import (
    EngineInstance,
    Release,
    engine_environment,
    engine_kind,
)
from ref2va_accept.planning import Arm
from ref2va_accept.timing import ReferenceFile, TimedClient


class Steps(Judging):
    """The steps: each starts what `step_schedule` lists and records what it saw (the prices'
    own steps are _pricing.py's)."""

    # -- steps -----------------------------------------------------------------------------------
    def host(self) -> None:
        try:
            result = preflight(self.campaign)
        except IdentityToolMissing as exc:
            self.put(contradicted("identity_lines", f"a tool the pin needs is missing: {exc}"))
            self.data.preflight = PreflightError(error=str(exc))
            self.preflight_error = f"a tool the pin needs is missing: {exc}"
            self.put(not_checked("mindiesd", f"the identity preflight did not read the imports: "
                                 f"{self.preflight_error}"))
            return
        self.data.preflight = result
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
        else:
            self.put(readings.mindiesd_row(self.imports["mindiesd"]))

    def launch_environment(self) -> dict[str, str]:
        """B0's environment as its launch composes it (engine_environment): where the server's
        tools are looked up."""
        if self.launch_env is None:
            launch = self.arms(self.plan.track_5s or next(iter(self.model.tracks)),
                               self.model.baseline).launch_spec(Arm(ArmRole.B0,
                                                                    self.model.baseline))
            self.launch_env = engine_environment(launch, os.environ)
        return self.launch_env

    def flags(self) -> None:
        used: dict[str, set[str]] = {}
        specs = [self.policy_spec(p) for p in self.plan.profiles] + list(self.model.candidates)
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
        found, why = probes.help_flags(self.model.engine.resolved_command(),
                                       self.launch_environment(), self.campaign.engine_workdir())
        if found is None:
            self.put(not_checked("flags", why))
            return
        missing = sorted(f for f in used if f not in found)
        self.data.flags = Flags(used={f: sorted(p) for f, p in sorted(used.items())},
                                missing=missing)
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
        env = self.launch_environment()  # ffprobe as the server finds it, on its PATH
        seen: list[InputReading] = []
        bad: list[str] = []
        for path, shown in audio.items():
            read = probes.ffprobe_duration(path, env)
            own = probes.judge_duration(path)
            seen.append(InputReading(file=shown, ffprobe_s=read.seconds, read_from=read.read_from,
                                     decoded_s=own, problem=read.problem))
            name = Path(shown).name
            if read.seconds is None:
                bad.append(f"{name}: {read.problem}")
            elif not probes.within_h3(read.seconds):
                bad.append(f"{name}: ffprobe reads {read.seconds:.3f} s (the {read.read_from}'s), "
                           "outside 2-15 s")
            elif own is not None and abs(own - read.seconds) > 0.1:
                bad.append(f"{name}: ffprobe reads {read.seconds:.3f} s (the "
                           f"{read.read_from}'s), the judge decodes {own:.3f} s")
        self.data.inputs = seen
        if bad:
            self.put(contradicted("ffprobe_duration", "; ".join(bad)))
        else:
            self.put(confirmed("ffprobe_duration", "ffprobe on the server's PATH reads "
                               + ", ".join(f"{Path(s.file).name}: {s.ffprobe_s:.3f} s "
                                           f"(the {s.read_from}'s)" for s in seen)))

    def policy(self, profile: Path, first: bool) -> PolicyRun:
        run = PolicyRun(display(self.campaign, profile), profile)
        self.policies.append(run)
        track = self.plan.track_5s
        if track is None:
            run.start_error = "the campaign has no 5 s track"
            return run
        spec = self.policy_spec(profile)
        try:
            tp = self.campaign.profile(spec).args.get("text-encoder-tp-size")
        except Ref2VAError:
            tp = None  # the start below names the profile's problem
        run.tp_expected = tp if isinstance(tp, int) and not isinstance(tp, bool) else None
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
                self.capture_server = run
                self.capture(arms, engine, run)
                self.bad_audio(arms, engine)
                self.long_run = run
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
                                           - self.idle.used_mb.get(str(d), 0.0), 1)
                             for d in self.model.devices.visible}

    def stop(self, engine: EngineInstance, run: PolicyRun | None) -> Release | None:
        audit = self.registry.stop(engine)  # the evidence records it (run_bringup subscribes)
        release = self.record_stop(audit, f"B0 {run.profile}" if run is not None
                                   else f"Cache-DiT ({self.plan.cache_dit})")
        if run is not None:
            run.stop, run.release = audit, release
        else:
            self.data.cache_dit = CacheDit(stop=audit)
            if release is not None:
                self.data.cache_dit.release = release.record()
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
        self.bundle.add_sample(sample.json_dict())
        detail = (sample.detail or "").removeprefix(f"HTTP {sample.status}: ")
        self.data.bad_audio = BadAudio(status=sample.status, wording=detail[:300],
                                       failure=sample.failure)
        self.bad_audio_seen = (sample.status, detail, sample.failure)
        self.put(readings.bad_audio_row(sample.status, detail, sample.failure))

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
        self.data.long_request = LongRequest(
            track=track, ok=self.long_request.sample.ok, complete=self.long_request.complete,
            latency_s=self.long_request.sample.latency_s, explain=self.long_request.explain(),
            client_timeout_s=arms.plan.timeouts.request_s,
            server_bounds=self.server_bounds(self.long_run))

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
        steps = self.plan.cache_dit_steps
        # Enough steps to cache some (the schedule says when it raised them); the lossless
        # request keeps the track's, so that its bytes can equal B0's.
        raised = steps.requested_steps if steps is not None and steps.raised else None
        try:
            for name, runner, at in (("first", arms, raised), ("second", arms, raised),
                                     ("lossless", lossless, None)):
                self.cache_runs[name] = runner.request(
                    engine, candidate, kind=f"{TRACK_LABEL}-{name}", index=len(self.cache_runs),
                    diagnostics_points=(POINT_FOR_PATH,), steps=at)
                self.cache_paths[name] = enabled_path_of(self.cache_runs[name])
            self.cache_log = engine.log_tail(200)
        finally:
            self.stop(engine, None)
        self.judge_cache_dit()


__all__ = ["Steps"]
