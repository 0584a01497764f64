"""From what a bring-up saw to its rows and its patch: each judgement reads the state the
steps filled (_state.py) and puts the rows it answers."""

from __future__ import annotations

import math
import os
import statistics

from ref2va_accept.bringup import _probes as probes
from ref2va_accept.bringup import _readings as readings
from ref2va_accept.bringup._patch import CampaignPatch, ScalarEdit, build
from ref2va_accept.bringup._pricing import Pricing
from ref2va_accept.bringup._records import CacheDit, CacheRequest
from ref2va_accept.bringup._rows import confirmed, contradicted, measured, not_checked
from ref2va_accept.bringup._state import START_TOLERANCE, PolicyRun, cache_of
from ref2va_accept.campaign import fill_points
from ref2va_accept.core import Ref2VAError
from ref2va_accept.evidence import BringupRow
from ref2va_contract.diagnostics import ENABLED_PATH_FILE, TEXT_ENCODER_TP_KEY


class Judging(Pricing):
    """The judgements of a bring-up, run once its steps are done."""

    def judge_cache_dit(self) -> None:
        """The Cache-DiT server's rows, from its requests, their enabled paths and its log."""
        cache = self.data.cache_dit or CacheDit()  # its stop recorded it first
        cache.requests = {
            k: CacheRequest(ok=v.sample.ok, sha256=v.sample.sha256, explain=v.explain(),
                            cache=cache_of(self.cache_paths.get(k)))
            for k, v in self.cache_runs.items()}
        self.data.cache_dit = cache
        for row in readings.cache_rows(self.cache_runs, self.cache_paths, self.cache_log,
                                       self.plan.cache_dit_steps):
            self.put(row)

    # -- rows from the policies ------------------------------------------------------------------
    def judge_policies(self) -> None:
        runs = self.policies
        served = [r for r in runs if r.served]
        chosen = next((r for r in served if r.release is None or r.release.released), None)
        self.patch_inputs.chosen = chosen
        if runs:
            self.put(policy_row(runs, chosen))
        else:
            self.put(not_checked("tp_and_memory_policy", "no memory-policy profile was tried"))
        starts = [r.start_s for r in runs if r.start_s is not None]
        self.patch_inputs.start_s = statistics.median(starts) if starts else None
        self.put(start_row(starts, (self.model.protocol.expected_start_s or {}).get("5s")))
        first = served[0] if served else None
        self.judge_imports(first, runs)
        self.judge_pythonpath(runs)
        self.judge_dumps(chosen or first)
        self.judge_stops(runs)
        self.judge_long()
        self.judge_determinism(chosen or first)

    def judge_imports(self, first: PolicyRun | None, runs: list[PolicyRun]) -> None:
        wanted = {m: v for m, v in self.imports.items() if m in ("vllm_ascend", "mindiesd")}
        if self.preflight_error is not None:
            self.put(not_checked("backend_imports", "the identity preflight did not read the "
                                 f"imports: {self.preflight_error}"))
            return
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
        self.put(readings.dump_owner_row(run))
        if run is None or not run.served:
            for row in ("point_shapes", "point_dtypes"):
                self.put(not_checked(row, "no B0 request completed"))
        elif not lossless or track is None:
            for row in ("point_shapes", "point_dtypes"):
                self.put(not_checked(row, "the campaign has no 5 s lossless track"))
        else:
            self.judge_points(track, run)
        self.judge_dump_time(run)

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

    def judge_dump_time(self, run: PolicyRun | None) -> None:
        tracks = self.model.tracks
        scale = (tracks[self.plan.track_15s].num_frames / tracks[self.plan.track_5s].num_frames
                 if self.plan.track_15s and self.plan.track_5s else 1.0)
        # The bound of the server that ran the request the row reads.
        where = self.long_run if self.plan.track_15s else run
        self.put(readings.dump_time_row(run, self.long_request, self.long_path,
                                        self.server_bounds(where), self.plan.track_15s is not None,
                                        scale))

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
        bounds = self.server_bounds(self.long_run)
        for row in readings.long_rows(self.long_request, self.long_timeout_s, bounds,
                                      self.plan.track_15s is not None):
            self.put(row)

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
                                        math.ceil(start), "median start measured",
                                        f"protocol.expected_start_s.{duration}"))
        chosen = self.patch_inputs.chosen
        if chosen is not None and chosen.request is not None \
                and chosen.request.sample.latency_s is not None:
            dump = float((chosen.enabled_path or {}).get("dump_seconds") or 0.0)
            edits.append(ScalarEdit(("protocol", "expected_request_s", "5s"),
                                    round(chosen.request.sample.latency_s - dump, 3),
                                    "B0's 5 s request less its dump time",
                                    "protocol.expected_request_s.5s"))
        if self.long_request is not None and self.long_request.complete \
                and self.long_request.sample.latency_s is not None:
            dump = float((self.long_path or {}).get("dump_seconds") or 0.0)
            edits.append(ScalarEdit(("protocol", "expected_request_s", "15s"),
                                    round(self.long_request.sample.latency_s - dump, 3),
                                    "B0's untimed 15 s request less its dump time",
                                    "protocol.expected_request_s.15s"))
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
                             self.plan.profiles):
                text = path.read_text(encoding="utf-8") if path.is_file() else ""
                if "diffusion-attention-backend: FLASH_ATTN" in text:
                    profile_edits.append((path, ("args", "diffusion-attention-backend"),
                                          "TORCH_SDPA", "import mindiesd fails"))
        return build(self.campaign.path, dumps=self.patch_inputs.dumps,
                     edits=[*edits, *self.price_edits()], profile_edits=sorted(profile_edits),
                     run_id=self.bundle.run_id)


def _policy_line(run: PolicyRun) -> str:
    if not run.started:
        return f"{run.profile}: did not start ({run.start_error})"
    if not run.served:
        return (f"{run.profile}: started in {run.start_s:.1f} s, request "
                f"{run.request.explain() if run.request else 'not sent'}")
    tp = ("text-encoder tp not reported" if run.tp_seen is None
          else f"text-encoder tp {run.tp_seen}")
    hbm = ("" if run.hbm_loaded_mb is None else ", HBM over idle " + ", ".join(
        f"{d}: {mb:.0f} MB" for d, mb in run.hbm_loaded_mb.items()))
    held = ("" if run.release is None or run.release.released
            else ", memory held after its stop: " + ", ".join(
                f"{d}: {mb:.0f} MB" for d, mb in run.release.held_mb.items()))
    return f"{run.profile}: started in {run.start_s:.1f} s, served, {tp}{hbm}{held}"


def policy_row(runs: list[PolicyRun], chosen: PolicyRun | None) -> BringupRow:
    """tp_and_memory_policy: a profile that started, served and released its memory, on a
    server that reports the profile's text-encoder-tp-size."""
    seen = "; ".join(_policy_line(r) for r in runs)
    if chosen is None:
        return contradicted("tp_and_memory_policy", seen)
    want, got = chosen.tp_expected, chosen.tp_seen
    if want is None:
        return not_checked("tp_and_memory_policy", f"{seen}; {chosen.profile} sets no "
                           "text-encoder-tp-size to compare the server's with")
    if got is None:
        return not_checked("tp_and_memory_policy", f"{seen}; the server reported no "
                           f"text-encoder tp size ({ENABLED_PATH_FILE} has no "
                           f"{TEXT_ENCODER_TP_KEY}), the profile's is {want}")
    if got != want:
        return contradicted("tp_and_memory_policy", f"{seen}; the profile's text-encoder tp "
                            f"is {want}")
    return confirmed("tp_and_memory_policy", seen, f"chosen: {chosen.profile}")


def start_row(starts: list[float], estimate: float | None) -> BringupRow:
    """start_time: the median start of the memory-policy profiles against the campaign's
    estimate (within START_TOLERANCE), or measured when the campaign has none."""
    if not starts:
        return not_checked("start_time", "no engine started")
    mid = statistics.median(starts)
    if estimate is None:
        return measured("start_time", f"median start {mid:.1f} s")
    off = abs(mid - estimate) / estimate if estimate else 1.0
    return (confirmed if off <= START_TOLERANCE else contradicted)(
        "start_time", f"median start {mid:.1f} s against the estimate {estimate:g} s "
        f"({off:.0%} off)")
