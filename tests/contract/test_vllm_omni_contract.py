"""The vLLM-Omni 0.30.0 contract: every upstream name the suite relies on is still where it was.

One test per relied-on item (its id is the item: `flag:--ulysses-degree`, `form:extra_params`,
`env:VLLM_OMNI_DLO_DP_WAVE_TIMEOUT=600`, `limit:MINIMAX_H3_MAX_AUDIO_BYTES`,
`hook:DiffusionWorker.execute_model`, `base-flag:--worker-extension-cls`, `cache-dit:summary`,
`order:extension-first`, ...), read statically from the pinned release wheel and, for base-vLLM
flags and Cache-DiT's names, from the vLLM 0.30.0 and cache-dit 1.5.0 wheels it is built on. A
wheel that cannot be obtained is a failure with one line saying how to provide it offline.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import pytest

from tests.contract import wheel as wheel_mod
from tests.contract.checks import check, check_all
from tests.contract.relied_on import (
    CATEGORIES,
    LIMIT_SOURCES,
    LIMITS_MODULE,
    Derivation,
    Item,
    derive,
    judge_limits,
)
from tests.contract.upstream import Upstream, literal
from tests.contract.wheel import PINNED_SHA256, SourceTree, WheelError

# The fixtures `pinned_wheel` and `upstream` (the wheels, read once) are in conftest.py.

DERIVED: Derivation = derive()
# needs-source items exist only while a shipped profile waits for a later source: not required.
REQUIRED = tuple(c for c in CATEGORIES if c != "needs-source")


def test_pinned_wheel_is_obtained_and_verified(pinned_wheel: Path | WheelError) -> None:
    if isinstance(pinned_wheel, WheelError):
        pytest.fail(str(pinned_wheel), pytrace=False)
    assert wheel_mod.sha256_of(pinned_wheel) == PINNED_SHA256
    with zipfile.ZipFile(pinned_wheel) as zf:
        assert "vllm_omni/entrypoints/cli/serve.py" in zf.namelist()


@pytest.mark.parametrize("item", DERIVED.items, ids=lambda i: i.id)
def test_upstream_provides(upstream: Upstream, item: Item) -> None:
    problem = check(upstream, item)
    if problem is not None:
        pytest.fail(f"vLLM-Omni 0.30.0 wheel: {problem}", pytrace=False)


# --------------------------------------------------------------------------- the lists themselves


def test_relied_on_lists_cover_every_category() -> None:
    """A derivation that broke (a module missing, a campaign that no longer loads) must not pass
    as "nothing relied on"."""
    assert not DERIVED.problems, "cannot derive what the suite relies on:\n" + "\n".join(
        f"- {name}: {why}" for name, why in DERIVED.problems.items())
    empty = [c for c in REQUIRED if not DERIVED.category(c)]
    assert not empty, f"no relied-on item derived for {empty}"
    ids = {i.id for i in DERIVED.items}
    # Anchors: names the suite cannot work without; if these are not derived the derivation is
    # reading the wrong thing.
    for anchor in ("flag:--omni", "flag:--ulysses-degree", "form:prompt", "form:extra_params",
                   "form:input_references", "route:POST /v1/videos/sync", "route:GET /health",
                   "header:x-inference-time-s", "env:VLLM_OMNI_DLO_DP_WAVE_TIMEOUT=600",
                   "env:VLLM_OMNI_VIDEO_SYNC_TIMEOUT=600", "limit:MINIMAX_H3_MAX_AUDIO_BYTES",
                   "hook:DiffusionWorker.execute_model"):
        assert anchor in ids, f"{anchor} was not derived from the repository"
    refs = next(i for i in DERIVED.items if i.id == "form:input_references")
    assert refs.expected[0] == "file", "input_references must be sent as file parts"


def test_every_mapped_limit_exists_judge_side() -> None:
    import importlib

    judge = judge_limits(importlib.import_module(LIMITS_MODULE))
    stale = sorted(set(LIMIT_SOURCES) - set(judge))
    assert not stale, (f"relied_on.LIMIT_SOURCES maps {stale}, which {LIMITS_MODULE} no longer "
                       f"defines: drop or rename them")


# --------------------------------------------------------------------------- the checker fails


MUTATIONS = (
    # (relied-on item, file inside the wheel, text to find exactly once, replacement)
    ("flag:--vae-patch-parallel-size", "vllm_omni/entrypoints/cli/serve.py",
     '"--vae-patch-parallel-size",', '"--vae-patch-parallel-sz",'),
    ("form:num_inference_steps", "vllm_omni/entrypoints/openai/video/generation/helpers.py",
     "    num_inference_steps: int | None = Form(default=None),",
     "    steps: int | None = Form(default=None),"),
    ("hook:DiffusionWorker.execute_stepwise", "vllm_omni/diffusion/worker/diffusion_worker.py",
     "    def execute_stepwise(self, scheduler_output: DiffusionSchedulerOutput)"
     ' -> BaseRunnerOutput:\n        """Execute one diffusion step by delegating',
     "    def execute_one_step(self, scheduler_output: DiffusionSchedulerOutput)"
     ' -> BaseRunnerOutput:\n        """Execute one diffusion step by delegating'),
)


@pytest.fixture(scope="module")
def unmutated(upstream: Upstream) -> dict[str, str]:
    """What the checker finds in the released wheels themselves: every mutation test compares a
    copy's findings with these, which do not change from test to test (checked once, not once a
    test)."""
    return check_all(upstream, DERIVED.items)


@pytest.fixture(scope="module")
def extracted(upstream: Upstream, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pinned wheel's sources, extracted once for the module: each test that edits a copy of
    them links one (see _linked_copy) instead of extracting the 1,600 files again."""
    return upstream.tree.extract_to(tmp_path_factory.mktemp("omni-extracted"))


def _linked_copy(extracted: Path, dest: Path) -> Path:
    """A copy of the extracted sources whose files are hard links to them: an edit must replace
    a file (unlink it, then write), never write through the link into the shared extraction."""
    shutil.copytree(extracted, dest, copy_function=os.link)
    return dest


def _replace(file: Path, text: str) -> None:
    file.unlink()  # a hard link to the shared extraction: write a new file in its place
    file.write_text(text, encoding="utf-8")


def test_checker_reports_exactly_the_names_removed_from_a_copy(
        upstream: Upstream, unmutated: dict[str, str], extracted: Path, tmp_path: Path) -> None:
    by_id = {i.id: i for i in DERIVED.items}
    missing = [m[0] for m in MUTATIONS if m[0] not in by_id]
    assert not missing, f"the mutation test edits {missing}, which are no longer relied on"
    copy = SourceTree(_linked_copy(extracted, tmp_path / "wheel"))
    for _, path, old, new in MUTATIONS:
        file = copy.root / path
        text = file.read_text(encoding="utf-8")
        assert text.count(old) == 1, f"{path}: the mutation's anchor text is not there once"
        _replace(file, text.replace(old, new))
    after = check_all(Upstream(copy, base=upstream.base, cache_dit=upstream.cache_dit),
                      DERIVED.items)
    new_findings = {k: v for k, v in after.items() if k not in unmutated}
    assert set(new_findings) == {m[0] for m in MUTATIONS}, new_findings
    for item_id, message in new_findings.items():
        assert message.startswith(f"{item_id}: "), message
    assert "vllm_omni/entrypoints/cli/serve.py" in new_findings[MUTATIONS[0][0]]
    assert "helpers.py _parse_video_form" in new_findings[MUTATIONS[1][0]]
    assert "DiffusionWorker" in new_findings[MUTATIONS[2][0]]


def _mutated(tree: SourceTree, dest: Path, edits: tuple[tuple[str, str, str], ...],
             extracted: Path | None = None) -> SourceTree:
    """An extracted copy of `tree` with each (path, text found exactly once, replacement);
    linked from `extracted` (the module's extraction of the same wheel) where given."""
    root = _linked_copy(extracted, dest) if extracted is not None else tree.extract_to(dest)
    copy = SourceTree(root, tree.package)
    for path, old, new in edits:
        file = copy.root / path
        text = file.read_text(encoding="utf-8")
        assert text.count(old) == 1, f"{path}: the mutation's anchor text is not there once"
        _replace(file, text.replace(old, new))
    return copy


def _read(other: Upstream | str | None) -> Upstream:
    if not isinstance(other, Upstream):
        pytest.fail(f"a release the contract reads is missing: {other}", pytrace=False)
    return other


def _new_findings(unmutated: dict[str, str], mutated: Upstream) -> dict[str, str]:
    """The mutated copy's findings that the released wheels (`unmutated`) do not have."""
    return {k: v for k, v in check_all(mutated, DERIVED.items).items() if k not in unmutated}


_LOOP = "vllm_omni/diffusion/models/minimax_h3/denoise_loop.py"
_PUBLISH = "            minimax_h3_publish_denoise_progress(step, s_v, num_steps)\n"
_DIT_CALL = "                v_video, v_audio = model(**fk)\n"


def test_base_flags_are_read_in_vllms_own_parser_and_a_copy_without_one_fails(
        upstream: Upstream, unmutated: dict[str, str], tmp_path: Path) -> None:
    base = _read(upstream.base)
    assert check(upstream, Item("base-flag", "--worker-extension-cls", "x", "why")) is None
    assert "defines no such option" in str(
        check(upstream, Item("base-flag", "--no-such-vllm-flag", "x", "why")))
    copy = _mutated(base.tree, tmp_path / "vllm", (
        ("vllm/engine/arg_utils.py", '"--worker-extension-cls", **parallel_kwargs',
         '"--worker-extension-class", **parallel_kwargs'),
        # A generated one: FrontendArgs' field `port` is the option --port.
        ("vllm/entrypoints/launchers/cli_args.py", "    port: int = 8000",
         "    listen_port: int = 8000")))
    found = _new_findings(unmutated, Upstream(upstream.tree, base=Upstream(copy),
                                             cache_dit=upstream.cache_dit))
    assert set(found) == {"base-flag:--worker-extension-cls", "base-flag:--port"}, found
    assert "vLLM 0.30.0's `vllm serve` parser" in found["base-flag:--worker-extension-cls"]
    # Not read at all is a failure saying so, never a pass.
    unread = check(Upstream(upstream.tree), Item("base-flag", "--dtype", "x", "why"))
    assert unread is not None and "the vLLM wheel was not read" in unread


def test_cache_dit_names_are_read_in_its_wheel_and_a_copy_without_them_fails(
        upstream: Upstream, unmutated: dict[str, str], tmp_path: Path) -> None:
    released = _read(upstream.cache_dit)
    copy = _mutated(released.tree, tmp_path / "cache-dit", (
        ("cache_dit/summary.py", "def summary(", "def summarize("),
        ("cache_dit/summary.py", "  cached_steps: list[int] = dataclasses",
         "  steps_cached: list[int] = dataclasses")))
    found = _new_findings(unmutated, Upstream(upstream.tree, base=upstream.base,
                                             cache_dit=Upstream(copy)))
    assert set(found) == {"cache-dit:summary", "cache-dit:summary.details",
                          "cache-dit:summary.logging", "cache-dit:CacheStats.cached_steps"}, found
    assert "cache-dit 1.5.0: cache_dit/summary.py: no top-level function summary" in \
        found["cache-dit:summary"]
    unread = check(Upstream(upstream.tree), Item("cache-dit", "summary", "x", "function",
                                                 "cache_dit/summary.py"))
    assert unread is not None and "the Cache-DiT wheel was not read" in unread


@pytest.mark.parametrize(("item", "edits", "said"), [
    ("order:extension-first", (("vllm_omni/diffusion/worker/diffusion_worker.py",
                                "(worker_extension_cls, worker_class)",
                                "(worker_class, worker_extension_cls)"),),
     "the extension is not first"),
    ("order:step-published-before-dit", ((_LOOP, _PUBLISH, ""),
                                         (_LOOP, _DIT_CALL, _DIT_CALL + _PUBLISH)),
     "the step is published after the DiT call"),
    ("order:forward-diffuse-decode", (("vllm_omni/diffusion/models/minimax_h3/"
                                       "pipeline_minimax_h3.py",
                                       "video_rows, audio_rows = minimax_h3_denoise_loop(",
                                       "video_rows, audio_rows = run_steps("),),
     "does not run minimax_h3_denoise_loop"),
])
def test_the_call_order_the_extension_relies_on_fails_on_a_copy_that_changes_it(
        upstream: Upstream, unmutated: dict[str, str], extracted: Path, tmp_path: Path,
        item: str,
        edits: tuple[tuple[str, str, str], ...], said: str) -> None:
    copy = _mutated(upstream.tree, tmp_path / "omni", edits, extracted)
    found = _new_findings(unmutated, Upstream(copy, base=upstream.base,
                                             cache_dit=upstream.cache_dit))
    assert set(found) == {item}, found
    assert said in found[item] and found[item].startswith(f"{item}: the extension relies on")


_CACHE_BACKEND = "vllm_omni/diffusion/cache/cachedit/backend.py"
_TRANSFORMER = "vllm_omni/diffusion/models/minimax_h3/minimax_h3_transformer.py"
_TEXT_ENCODER = "vllm_omni/diffusion/models/minimax_h3/encoder.py"
_VAE = "vllm_omni/diffusion/models/minimax_h3/vae.py"
_PREPROC = "vllm_omni/model_executor/models/minimax_h3/preprocessing.py"
_H3 = "hook:MiniMaxH3Pipeline:"
_IMAGE_SHAPE = "limit:resolve_minimax_h3_reference_image_shape:"


@pytest.mark.parametrize(("edits", "items", "said"), [
    # Cache-DiT's targets, read from the pipeline by enabled_path
    (((_CACHE_BACKEND, "pipeline._cache_dit_targets = tuple(",
       "pipeline._cache_targets = tuple("),),
     {"hook:CacheDiTBackend.enable:pipeline._cache_dit_targets"},
     "never assigns pipeline._cache_dit_targets"),
    # the DiT and its blocks called through __call__, so hooks fire
    (((_LOOP, _DIT_CALL, _DIT_CALL.replace("model(", "model.forward(")),),
     {"hook:minimax_h3_denoise_loop:model", "order:step-published-before-dit"},
     "calls model.forward(...), which skips nn.Module.__call__"),
    (((_TRANSFORMER, "            hidden = block(\n", "            hidden = block.forward(\n"),),
     {"hook:MiniMaxH3DiTModel.forward:self.blocks[*]"},
     "loops over self.blocks but does not call each item itself"),
    # H3's text-encoder paths
    (((_TEXT_ENCODER, "        self.text_model = MiniMaxH3Qwen3VLTextModel(",
       "        self.language_model = MiniMaxH3Qwen3VLTextModel("),),
     {f"{_H3}text_encoder.text_model", f"{_H3}text_encoder.text_model.embed_tokens",
      f"{_H3}text_encoder.text_model.layers.0"},
     "class MiniMaxH3Qwen3VLEncoder (and its bases in the wheel) assigns no self.text_model"),
    (((_TEXT_ENCODER, "        self.layers = nn.ModuleList(",
       "        self.decoder_layers = nn.ModuleList("),),
     {f"{_H3}text_encoder.text_model.layers.0"}, "assigns no self.layers"),
    # H3's VAE paths: the alias the encode goes through, and the modules it calls
    (((_VAE, "patches(self.remote.model)\n        self.model = self.remote.model",
       "patches(self.remote.model)\n        self.vae = self.remote.model"),),
     {f"{_H3}video_vae.model", f"{_H3}video_vae.model.encoder",
      f"{_H3}video_vae.model.quant_conv"}, "MiniMaxH3VideoVAE"),
    (((_VAE, "latent = self.model.encoder(audio)", "latent = self.model.encoder.forward(audio)"),),
     {"hook:MiniMaxH3AudioVAE.encode_waveform:self.model.encoder"}, "calls self.model.encoder"),
    # a limit is checked in the comparison that holds it, not anywhere in the function
    (((_PREPROC, "if min(width, height) < 256 or max(width, height) > 5760:",
       "if min(width, height) < 5760 or max(width, height) > 256:"),),
     {f"{_IMAGE_SHAPE}MIN_IMAGE_EDGE", f"{_IMAGE_SHAPE}MAX_IMAGE_EDGE"},
     "compares min(width, height) < 5760"),
], ids=["cache-dit-targets", "dit-called", "blocks-called", "text-model", "text-layers",
        "video-vae-alias", "audio-encoder-called", "limit-comparison"])
def test_what_the_extension_reads_fails_on_a_copy_without_it(
        upstream: Upstream, unmutated: dict[str, str], extracted: Path, tmp_path: Path,
        edits: tuple[tuple[str, str, str], ...], items: set[str], said: str) -> None:
    copy = _mutated(upstream.tree, tmp_path / "omni", edits, extracted)
    found = _new_findings(unmutated, Upstream(copy, base=upstream.base,
                                             cache_dit=upstream.cache_dit))
    assert set(found) == items, found
    assert any(said in message for message in found.values()), found
    assert all(message.startswith(f"{item}: ") for item, message in found.items()), found


def test_checker_flags_wrong_values_and_kinds(upstream: Upstream) -> None:
    """Values, not only names: a changed default or limit, a bare flag that takes a value."""
    from tests.contract.relied_on import ENV_READERS, LimitSource

    sync = "VLLM_OMNI_VIDEO_SYNC_TIMEOUT"
    env_ok = Item("env", f"{sync}=600", "test", (sync, 600.0), ENV_READERS[sync])
    env_bad = Item("env", f"{sync}=900", "test", (sync, 900.0), ENV_READERS[sync])
    assert check(upstream, env_ok) is None
    assert "default of 900" in (check(upstream, env_bad) or "")
    src = LimitSource("vllm_omni/model_executor/models/minimax_h3/reference_video.py",
                      "MINIMAX_H3_MAX_AUDIO_BYTES")
    assert check(upstream, Item("limit", "x", "judge.X", ("X", 15 * 2**20, src))) is None
    assert "= 15728640" in (check(upstream, Item("limit", "x", "judge.X", ("X", 16 * 2**20, src)))
                            or "")
    preproc = "vllm_omni/model_executor/models/minimax_h3/preprocessing.py"
    function = "resolve_minimax_h3_reference_image_shape"
    upper = LimitSource(preproc, function=function, bound="ratio <= _")
    lower = LimitSource(preproc, function=function, bound="ratio >= _")
    assert check(upstream, Item("limit", "y", "judge.Y", ("Y", 2.5, upper))) is None
    assert check(upstream, Item("limit", "y", "judge.Y", ("Y", 0.4, lower))) is None
    assert "compares ratio >= 0.4, ratio <= 2.5" in str(
        check(upstream, Item("limit", "y", "judge.Y", ("Y", 3.0, upper))))
    # The value in another comparison of the function is not the limit: refused, by name.
    swapped = check(upstream, Item("limit", "y", "judge.Y", ("Y", 2.5, lower)))
    assert swapped is not None and "should be upstream's `ratio >= 2.5`" in swapped
    assert "never compares height" in str(check(upstream, Item(
        "limit", "y", "judge.Y", ("Y", 2.5, LimitSource(preproc, function=function,
                                                         bound="height <= _")))))
    assert "bound=" in str(check(upstream, Item(
        "limit", "y", "judge.Y", ("Y", 2.5, LimitSource(preproc, function=function)))))
    assert check(upstream, Item("flag", "--ulysses-degree", "p.yaml", True)) is None
    bare = check(upstream, Item("flag", "--ulysses-degree", "p.yaml", False))
    assert bare is not None and "takes a value" in bare
    assert check(upstream, Item("flag", "--omni", "p.yaml", False)) is None
    assert "no such option" in (check(upstream, Item("flag", "--kv-offload-config", "p.yaml",
                                                     True)) or "")
    assert "defines it too" in (check(upstream, Item("base-flag", "--num-gpus", "x", "why"))
                                or "")
    assert check(upstream, Item("base-flag", "--dtype", "x", "why")) is None
    assert "stale" in (check(upstream, Item("needs-source", "p.yaml", "p.yaml", ("num-gpus",)))
                       or "")
    assert check(upstream, Item("needs-source", "p.yaml", "p.yaml",
                                ("kv-offload-config",))) is None
    assert check(upstream, Item("header", "x-not-sent", "client", [("POST", "/v1/videos/sync")]))
    assert check(upstream, Item("route", "GET /nowhere", "client", ("GET", "/nowhere")))


def test_reader_evaluates_constant_expressions() -> None:
    import ast

    assert literal(ast.parse("15 * 1024 * 1024", mode="eval").body) == 15 * 2**20
    assert literal(ast.parse('frozenset({"wav", "mp3"})', mode="eval").body) == {"wav", "mp3"}
    assert literal(ast.parse("-0.5", mode="eval").body) == -0.5


# --------------------------------------------------------------------------- obtaining the wheel


def test_a_wheel_with_another_hash_is_refused_naming_both(tmp_path: Path) -> None:
    fake = tmp_path / "vllm_omni-0.30.0-py3-none-any.whl"
    fake.write_bytes(b"not the release")
    with pytest.raises(WheelError) as err:
        wheel_mod.obtain({wheel_mod.WHEEL_ENV: str(fake)})
    message = str(err.value)
    assert PINNED_SHA256 in message and wheel_mod.sha256_of(fake) in message
    assert "\n" not in message


def test_a_missing_local_wheel_is_refused(tmp_path: Path) -> None:
    with pytest.raises(WheelError, match=wheel_mod.WHEEL_ENV):
        wheel_mod.obtain({wheel_mod.WHEEL_ENV: str(tmp_path / "absent.whl")})


def test_a_local_wheel_with_the_pinned_hash_is_used(pinned_wheel: Path | WheelError,
                                                    tmp_path: Path) -> None:
    if isinstance(pinned_wheel, WheelError):
        pytest.fail(str(pinned_wheel), pytrace=False)
    local = tmp_path / pinned_wheel.name
    shutil.copyfile(pinned_wheel, local)
    assert wheel_mod.obtain({wheel_mod.WHEEL_ENV: str(local)}) == local


def test_a_failed_download_is_one_line_saying_how_to_go_offline(tmp_path: Path) -> None:
    # An empty cache and an index-less pip: the download must fail, and say what to do.
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "PIP_NO_INDEX": "1",
           "PIP_FIND_LINKS": str(tmp_path)}
    env.pop(wheel_mod.WHEEL_ENV, None)
    with pytest.raises(WheelError) as err:
        wheel_mod.obtain(env, timeout_s=120)
    message = str(err.value)
    assert "\n" not in message
    assert wheel_mod.WHEEL_ENV in message and "pip download" in message
    assert not list((tmp_path / "ref2va" / "wheels").glob("*.whl"))


def test_the_cache_is_reused_without_pip(pinned_wheel: Path | WheelError, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    if isinstance(pinned_wheel, WheelError):
        pytest.fail(str(pinned_wheel), pytrace=False)
    cache = wheel_mod.cache_dir({"XDG_CACHE_HOME": str(tmp_path)})
    cache.mkdir(parents=True)
    shutil.copyfile(pinned_wheel, cache / pinned_wheel.name)

    def no_download(*_: object) -> None:
        raise AssertionError("pip was asked although the cache holds the pinned wheel")

    monkeypatch.setattr(wheel_mod, "_pip_download", no_download)
    assert wheel_mod.obtain({"XDG_CACHE_HOME": str(tmp_path)}) == cache / pinned_wheel.name
    # A cached file with another hash is not taken for the pinned wheel.
    (cache / pinned_wheel.name).write_bytes(b"tampered")
    with pytest.raises(AssertionError, match="pip was asked"):
        wheel_mod.obtain({"XDG_CACHE_HOME": str(tmp_path)})
