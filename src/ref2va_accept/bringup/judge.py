"""From what a bring-up saw to its rows and its patch: each judgement reads the state the
steps filled (state.py) and puts the rows it answers."""

from __future__ import annotations

import math
import os
import statistics
from typing import Any

from ref2va_accept.bringup import probes
from ref2va_accept.bringup.patch import CampaignPatch, ScalarEdit, build
from ref2va_accept.bringup.rows import confirmed, contradicted, measured, not_checked
from ref2va_accept.bringup.state import (
    BOUND_HEADROOM,
    START_TOLERANCE,
    BringupState,
    PolicyRun,
    cache_of,
    enabled_path_of,
)
from ref2va_accept.campaign import fill_points
from ref2va_accept.core import Ref2VAError
from ref2va_accept.engines import EngineInstance
from ref2va_contract.diagnostics import ENABLED_PATH_FILE


class Judging(BringupState):
    """The judgements of a bring-up, run once its steps are done."""

    def judgecache_of(self, engine: EngineInstance) -> None:
        first, second, lossless = (self.cache_runs.get(k) for k in ("first", "second",
                                                                     "lossless"))
        paths = {k: enabled_path_of(v) for k, v in self.cache_runs.items()}
        self.data.setdefault("cache_dit", {})["requests"] = {
            k: {"ok": v.sample.ok, "sha256": v.sample.sha256, "explain": v.explain(),
                "cache": dict(zip(("backend", "reused_steps"), cache_of(paths[k]), strict=True))}
            for k, v in self.cache_runs.items()}
        if first is None or not first.sample.ok:
            said = first.explain() if first else "not sent"
            log_text = engine.log_tail(200)
            avg = next((line for line in [said, *log_text.splitlines()]
                        if "ReduceOp.AVG" in line or "AVG" in line.split()), None)
            self.put(contradicted("cache_dit_avg", f"refused: {avg.strip()[:240]}" if avg
                                  else f"the first Cache-DiT request failed: {said[:240]}"))
        else:
            backend, reused = cache_of(paths["first"])
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
            a, b = cache_of(paths["first"])[1], cache_of(paths["second"])[1]
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
            backend, reused = cache_of(paths["lossless"])
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
        self.patch_inputs.chosen = chosen
        if chosen is not None:
            self.put(confirmed("tp_and_memory_policy", "; ".join(lines),
                               f"chosen: {chosen.profile}"))
        elif runs:
            self.put(contradicted("tp_and_memory_policy", "; ".join(lines)))
        starts = [r.start_s for r in runs if r.start_s is not None]
        mid = statistics.median(starts) if starts else None
        self.patch_inputs.start_s = mid
        estimate = (self.model.protocol.expected_start_s or {}).get("5s")
        if mid is None:
            self.put(not_checked("start_time", "no engine started"))
        elif estimate is None:
            self.put(measured("start_time", f"median start {mid:.1f} s"))
        else:
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
        self.patch_inputs.dumps = dumps
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
        stops = self.stops
        if not stops:
            self.put(not_checked("stop_order", "no engine was stopped"))
            self.put(not_checked("memory_release", "no engine was stopped"))
            return
        trouble = []
        for stop in stops:
            audit = stop.audit
            first = audit.steps[0] if audit.steps else None
            if audit.needed_sigkill or audit.survivors or audit.problems:
                trouble.append(f"{audit.instance}: " + "; ".join(audit.problems or [
                    "needed SIGKILL"]))
            elif first is not None and first.alive_after:
                trouble.append(f"{audit.instance}: {first.alive_after} process(es) alive "
                               "after SIGTERM to the main process")
        releases = [s.release for s in stops if s.release is not None]
        held = [r for r in releases if not r.released]
        main_s = [s.audit.steps[0].waited_s for s in stops if s.audit.steps]
        worst = max((r.waited_s for r in releases), default=None)
        self.patch_inputs.release_worst_s = worst
        if trouble or held:
            self.put(contradicted("stop_order", "; ".join(trouble + [
                f"HBM held after a stop: {r.held_mb}" for r in held])))
        else:
            self.put(confirmed("stop_order", f"{len(stops)} stop(s) clean; the main process "
                               f"exited {max(main_s, default=0):.1f} s after SIGTERM at worst"))
        if self.model.devices.kind == "none":
            self.put(not_checked("memory_release", "no accelerator is assigned"))
        elif held:
            self.put(contradicted("memory_release", "; ".join(
                f"after {r.waited_s:.0f} s still {r.held_mb} MB over idle"
                + (f" ({r.problem})" if r.problem else "") for r in held)))
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
        self.put(confirmed("wave_timeout", f"{latency:.1f} s, inside the client timeout "
                           f"{self.long_timeout_s:g} s and the server bound {bound:g} s"))
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
        start = self.patch_inputs.start_s
        if start is not None:
            for duration in self.model.protocol.expected_start_s or {"5s": 0, "15s": 0}:
                edits.append(ScalarEdit(("protocol", "expected_start_s", duration),
                                        math.ceil(start), "median start measured"))
        chosen = self.patch_inputs.chosen
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
        worst = self.patch_inputs.release_worst_s
        timeout = self.model.devices.memory_release.timeout_s
        if worst is not None and 2 * worst > timeout:
            edits.append(ScalarEdit(("devices", "memory_release", "timeout_s"),
                                    math.ceil(2 * worst), "twice the slowest release measured"))
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
        return build(self.campaign.path, dumps=self.patch_inputs.dumps,
                     edits=edits, profile_edits=sorted(profile_edits))


