"""The bit-exact comparator: every difference found and located, nothing equal reported as not."""

from __future__ import annotations

import json
import math
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ref2va_accept import tensors
from ref2va_accept.cli import main
from ref2va_accept.core import TensorFileError
from ref2va_accept.evidence import PointRecord
from ref2va_accept.judging import compare_decoded_mp4
from ref2va_accept.tensors import (
    DTYPES,
    DumpComparison,
    StreamingComparison,
    compare_arrays,
    compare_dumps,
    compare_tensor_files,
    read_header,
    write_tensor_file,
)
from ref2va_accept.tensors import (
    _streaming as streaming,
)
from tests.media_samples import write_mp4

pytestmark = pytest.mark.fast

# safetensors dtype -> the numpy type its elements are generated and written as. BF16 and F8
# have no numpy type: hypothesis draws their bit patterns, which covers every NaN and infinity.
STORAGE = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16,
    "F8_E4M3": np.uint8, "F8_E5M2": np.uint8, "I8": np.int8, "I16": np.int16, "I32": np.int32,
    "I64": np.int64, "U8": np.uint8, "U16": np.uint16, "U32": np.uint32, "U64": np.uint64,
    "BOOL": np.bool_,
}
FLOATS = ("F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2")
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6)
# Chunk sizes that put points across several chunks, and the default.
CHUNKS = st.sampled_from([8, 24, 64, tensors.CHUNK_BYTES])
PROPERTY = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def tensors_of(draw: st.DrawFn, dtype: str, min_size: int = 0) -> np.ndarray:
    shape = draw(SHAPES.filter(lambda s: math.prod(s) >= min_size))
    return np.asarray(draw(hnp.arrays(STORAGE[dtype], shape)))


@pytest.fixture
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


def _pair(root: Path, dtype: str, a: np.ndarray, b: np.ndarray, name: str = "t"
          ) -> tuple[Path, Path]:
    return (write_tensor_file(root / "a.safetensors", {name: a}, dtypes={name: dtype}),
            write_tensor_file(root / "b.safetensors", {name: b}, dtypes={name: dtype}))


def _compare(dtype: str, a: np.ndarray, b: np.ndarray, chunk: int) -> PointRecord:
    with tempfile.TemporaryDirectory() as tmp, mock.patch.object(streaming, "CHUNK_BYTES", chunk):
        result = compare_tensor_files(*_pair(Path(tmp), dtype, a, b))
    assert len(result.points) == 1
    return result.points[0]


def _flip(array: np.ndarray, element: int, bit: int) -> np.ndarray:
    flipped = array.copy()
    raw = flipped.reshape(-1).view(np.uint8)
    raw[element * array.itemsize + bit // 8] ^= 1 << (bit % 8)
    return flipped


# ------------------------------------------------------------------------------- properties


@pytest.mark.parametrize("dtype", list(DTYPES))
@PROPERTY
@given(data=st.data(), chunk=CHUNKS)
def test_equal_inputs_compare_equal(dtype: str, data: st.DataObject, chunk: int) -> None:
    array = data.draw(tensors_of(dtype))
    point = _compare(dtype, array, array.copy(), chunk)
    assert point.status == "equal" and point.equal
    assert (point.elements, point.differing, point.first_index) == (array.size, 0, None)


@pytest.mark.parametrize("dtype", list(DTYPES))
@PROPERTY
@given(data=st.data(), chunk=CHUNKS)
def test_any_single_flipped_bit_is_found_and_located(dtype: str, data: st.DataObject,
                                                     chunk: int) -> None:
    array = data.draw(tensors_of(dtype, min_size=1))
    element = data.draw(st.integers(0, array.size - 1))
    bit = data.draw(st.integers(0, array.itemsize * 8 - 1))
    point = _compare(dtype, array, _flip(array, element, bit), chunk)
    assert point.status == "differs"
    assert (point.differing, point.elements) == (1, array.size)
    assert point.first_index == list(int(i) for i in np.unravel_index(element, array.shape))
    assert (point.max_ulp is not None and point.max_ulp > 0) or dtype in FLOATS
    assert point.max_abs_diff is not None


def _ordered(bits: int, width: int) -> int:
    magnitude = bits & ((1 << (width - 1)) - 1)
    return -magnitude if bits >> (width - 1) else magnitude


def _from_ordered(value: int, width: int) -> int:
    return value if value >= 0 else (1 << (width - 1)) | -value


def _is_finite(dtype: str, bits: int) -> bool:
    width = DTYPES[dtype].itemsize * 8
    exponent_bits = {"F64": 11, "F32": 8, "F16": 5, "BF16": 8, "F8_E5M2": 5, "F8_E4M3": 4}[dtype]
    mantissa_bits = width - 1 - exponent_bits
    exponent = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1)
    if dtype == "F8_E4M3":  # no infinities; only S.1111.111 is NaN
        return bool((bits & 0x7F) != 0x7F)
    return bool(exponent != (1 << exponent_bits) - 1)


@pytest.mark.parametrize("dtype", FLOATS)
@PROPERTY
@given(data=st.data(), up=st.booleans())
def test_one_ulp_nudge_of_a_finite_float_is_one_ulp(dtype: str, data: st.DataObject,
                                                   up: bool) -> None:
    width = DTYPES[dtype].itemsize * 8
    unsigned = np.dtype(f"<u{width // 8}")
    bits = data.draw(st.integers(0, (1 << width) - 1).filter(lambda b: _is_finite(dtype, b)))
    nudged = _from_ordered(_ordered(bits, width) + (1 if up else -1), width)
    if not _is_finite(dtype, nudged) and dtype == "F8_E4M3":
        nudged = _from_ordered(_ordered(bits, width) - (1 if up else -1), width)
    a: np.ndarray = np.array([bits], unsigned).view(STORAGE[dtype])
    b = np.array([nudged], unsigned).view(a.dtype)
    point = _compare(dtype, a, b, tensors.CHUNK_BYTES)
    assert (point.status, point.max_ulp) == ("differs", 1)


@pytest.mark.parametrize("dtype", ["F64", "F32", "F16", "I8", "I32", "I64", "U8", "BOOL"])
@PROPERTY
@given(data=st.data())
def test_in_memory_arrays_follow_the_same_rules(dtype: str, data: st.DataObject) -> None:
    array = data.draw(tensors_of(dtype, min_size=1))
    assert compare_arrays("x", array, array.copy()).equal
    element = data.draw(st.integers(0, array.size - 1))
    point = compare_arrays("x", array, _flip(array, element, 0))
    assert (point.status, point.differing) == ("differs", 1)
    assert point.first_index == list(int(i) for i in np.unravel_index(element, array.shape))


# ------------------------------------------------------------------------------- semantics


def test_negative_zero_differs_from_zero_at_ulp_zero() -> None:
    point = compare_arrays("z", np.zeros(4, np.float32), np.array([0, 0, -0.0, 0], np.float32))
    assert (point.status, point.differing, point.first_index) == ("differs", 1, [2])
    assert (point.max_ulp, point.max_abs_diff) == (0, 0.0)


def test_nan_compares_by_bit_pattern() -> None:
    nan = np.array([0x7FC00000], np.uint32).view(np.float32)
    other_payload = np.array([0x7FC00001], np.uint32).view(np.float32)
    assert compare_arrays("n", nan, nan.copy()).equal
    point = compare_arrays("n", nan, other_payload)
    assert point.status == "differs" and math.isnan(point.max_abs_diff or 0.0)
    assert point.json_dict()["max_abs_diff"] == "nan"
    json.dumps(point.json_dict(), allow_nan=False)


def test_infinities_are_reported_not_crashed_on() -> None:
    point = compare_arrays("i", np.array([np.inf, 1.0]), np.array([-np.inf, 1.0]))
    assert point.max_abs_diff == math.inf and point.json_dict()["max_abs_diff"] == "inf"


def test_dtype_and_shape_mismatch(folder: Path) -> None:
    a = write_tensor_file(folder / "a.safetensors",
                          {"x": np.zeros((2, 3), np.float32), "y": np.zeros((2, 3), np.float32)})
    b = write_tensor_file(folder / "b.safetensors",
                          {"x": np.zeros((2, 3), np.float16), "y": np.zeros((3, 2), np.float32)})
    points = {p.name: p for p in compare_tensor_files(a, b).points}
    assert (points["x"].status, points["x"].dtype_a, points["x"].dtype_b) == (
        "dtype_mismatch", "F32", "F16")
    assert (points["y"].status, points["y"].shape_a, points["y"].shape_b) == (
        "shape_mismatch", [2, 3], [3, 2])


def test_bf16_bit_patterns_are_not_read_as_u16(folder: Path) -> None:
    a = write_tensor_file(folder / "a.safetensors", {"x": np.zeros(2, np.uint16)},
                          dtypes={"x": "BF16"})
    b = write_tensor_file(folder / "b.safetensors", {"x": np.zeros(2, np.uint16)})
    assert compare_tensor_files(a, b).points[0].status == "dtype_mismatch"
    assert read_header(a)["x"].dtype == "BF16"


def test_a_difference_in_the_last_element_across_several_chunks(folder: Path,
                                                                 monkeypatch: Any) -> None:
    monkeypatch.setattr(streaming, "CHUNK_BYTES", 64)
    a = np.arange(1000, dtype=np.float32).reshape(10, 100)
    b = a.copy()
    b[9, 99] = np.nextafter(b[9, 99], np.float32(np.inf))
    b[3, 50] = -b[3, 50]
    point = compare_tensor_files(*_pair(folder, "F32", a, b)).points[0]
    assert (point.differing, point.first_index) == (2, [3, 50])
    assert point.max_abs_diff == 2 * 350.0
    c = a.copy()
    c[9, 99] += 1
    point = compare_tensor_files(*_pair(folder, "F32", a, c)).points[0]
    assert (point.differing, point.first_index, point.max_abs_diff) == (1, [9, 99], 1.0)


def test_patched_chunk_size_is_the_one_read_with(folder: Path, monkeypatch: Any) -> None:
    # The chunk-boundary properties above patch streaming.CHUNK_BYTES; prove that this is the
    # value the reader uses, so that they really cross chunk boundaries.
    reads: list[int] = []
    real = streaming.read_into

    def counted(handle: Any, offset: int, view: Any, name: str) -> None:
        reads.append(len(view))
        real(handle, offset, view, name)

    monkeypatch.setattr(streaming, "read_into", counted)
    monkeypatch.setattr(streaming, "CHUNK_BYTES", 64)
    a = np.arange(100, dtype=np.float32)  # 400 bytes: 6 chunks of 64 and one of 16, per side
    assert compare_tensor_files(*_pair(folder, "F32", a, a.copy())).equal
    assert reads == [64] * 12 + [16] * 2


def test_the_package_exports_what_its_users_import() -> None:
    for name in tensors.__all__:
        assert getattr(tensors, name) is not None, name
    assert {"DUMP_SUFFIX", "Status", "TensorInfo", "read_header", "compare_dumps",
            "StreamingComparison", "write_tensor_file", "CHUNK_BYTES"} <= set(tensors.__all__)


def test_streaming_along_samples_finds_the_row_major_first() -> None:
    stream = StreamingComparison("audio", "F32", axis=1)
    a = np.zeros((2, 10), np.float32)
    b = a.copy()
    b[1, 2] = 1.0  # earlier in time, later channel
    b[0, 7] = 1.0  # row-major first
    for start in range(0, 10, 4):
        stream.add(a[:, start:start + 4], b[:, start:start + 4])
    point = stream.result()
    assert (point.shape_a, point.differing, point.first_index) == ([2, 10], 2, [0, 7])


def test_streaming_bf16_takes_bit_patterns() -> None:
    stream = StreamingComparison("x", "BF16")
    a = np.array([[0x3F80, 0x3F80]], np.uint16)  # 1.0 in bf16
    stream.add(a, a + np.array([[0, 1]], np.uint16))
    point = stream.result()
    assert (point.dtype_a, point.first_index, point.max_ulp) == ("BF16", [0, 1], 1)
    assert point.max_abs_diff == 2.0 ** -7


# ------------------------------------------------------------------------------- dump folders


def _dump(root: Path, points: dict[str, float]) -> Path:
    root.mkdir()
    for name, value in points.items():
        write_tensor_file(root / f"{name}.safetensors", {name: np.full(3, value, np.float32)})
    return root


def test_missing_point_in_either_folder_is_reported(folder: Path) -> None:
    a = _dump(folder / "a", {"cond.text": 1, "latent.video": 2})
    b = _dump(folder / "b", {"cond.text": 1, "dit.step000": 2})
    result = compare_dumps(a, b)
    assert [(p.name, p.status) for p in result.points] == [
        ("cond.text", "equal"), ("dit.step000", "missing_in_a"),
        ("latent.video", "missing_in_b")]
    assert result.first_divergence == "dit.step000" and not result.equal
    missing = compare_dumps(a, b, ["cond.text", "decoded.video"]).points[1]
    assert (missing.name, missing.status) == ("decoded.video", "missing_in_a")


def test_default_order_is_pipeline_order(folder: Path) -> None:
    names = ["latent.video", "dit.step010", "decoded.video", "zzz", "dit.step002", "cond.ref"]
    a = _dump(folder / "a", dict.fromkeys(names, 1.0))
    b = _dump(folder / "b", {**dict.fromkeys(names, 2.0), "cond.ref": 1.0})
    result = compare_dumps(a, b)
    assert [p.name for p in result.points] == [
        "cond.ref", "dit.step002", "dit.step010", "latent.video", "decoded.video", "zzz"]
    assert result.first_divergence == "dit.step002"


def test_pipeline_order_is_the_documented_one_not_the_alphabet(folder: Path) -> None:
    # The documented order (docs/quality.md, the 910C points): text, image, audio conditioning;
    # then each stage's video before its audio. Sorted by name, cond.audio would come first.
    documented = ["cond.text", "cond.image", "cond.audio", "dit.step000.video",
                  "dit.step000.audio", "dit.step002", "dit.step010", "latent.video",
                  "latent.audio", "decoded.video", "decoded.audio", "mp4.video", "mp4.audio"]
    assert tensors.in_order(reversed(documented)) == documented
    a = _dump(folder / "a", dict.fromkeys(documented[:4], 1.0))
    b = _dump(folder / "b", dict.fromkeys(documented[:4], 1.0) | {"cond.text": 2.0,
                                                                  "cond.audio": 2.0})
    result = compare_dumps(a, b)
    assert [p.name for p in result.points] == documented[:4]
    assert result.first_divergence == "cond.text"


def test_a_frozen_order_comes_first_and_the_rest_follow_in_pipeline_order() -> None:
    frozen = ["latent.video", "cond.audio", "cond.text"]
    names = {"cond.text", "cond.audio", "latent.video", "decoded.audio", "cond.image"}
    assert tensors.in_order(names, frozen) == [
        "latent.video", "cond.audio", "cond.text", "cond.image", "decoded.audio"]


def test_files_follow_a_given_order(folder: Path) -> None:
    arrays = {name: np.zeros(2, np.float32) for name in ("cond.audio", "cond.text")}
    a = write_tensor_file(folder / "a.safetensors", arrays)
    b = write_tensor_file(folder / "b.safetensors", {k: v + 1 for k, v in arrays.items()})
    assert compare_tensor_files(a, b).first_divergence == "cond.text"
    assert compare_tensor_files(a, b, ["cond.audio"]).first_divergence == "cond.audio"



def test_a_comparison_writes_what_it_reads_back_and_refuses_a_misspelt_key(folder: Path
                                                                           ) -> None:
    a = _dump(folder / "a", {"cond.text": 1, "latent.video": 2})
    b = _dump(folder / "b", {"cond.text": 1, "dit.step000": 2})
    written = json.loads(json.dumps(compare_dumps(a, b).json_dict()))
    assert list(written) == ["equal", "first_divergence", "points"]
    assert DumpComparison.model_validate(written) == compare_dumps(a, b)
    with pytest.raises(ValidationError, match="first_divergance"):
        DumpComparison.model_validate(written | {"first_divergance": "cond.text"})

def test_first_divergence_follows_the_given_order(folder: Path) -> None:
    a = _dump(folder / "a", {"dit.step002": 1, "dit.step010": 1, "latent.video": 1})
    b = _dump(folder / "b", {"dit.step002": 1, "dit.step010": 2, "latent.video": 2})
    result = compare_dumps(a, b, ["latent.video", "dit.step010", "dit.step002"])
    assert [p.name for p in result.points] == ["latent.video", "dit.step010", "dit.step002"]
    assert result.first_divergence == "latent.video"
    assert json.loads(json.dumps(result.json_dict()))["first_divergence"] == "latent.video"


def test_a_dump_file_must_hold_one_tensor(folder: Path) -> None:
    a = _dump(folder / "a", {"cond.text": 1})
    b = folder / "b"
    b.mkdir()
    write_tensor_file(b / "cond.text.safetensors",
                      {"x": np.zeros(3, np.float32), "y": np.zeros(3, np.float32)})
    with pytest.raises(TensorFileError, match=r"cond\.text\.safetensors: expected one tensor"):
        compare_dumps(a, b)


# ------------------------------------------------------------------------------- malformed


def _raw_file(path: Path, header: bytes, data: bytes = b"", length: int | None = None) -> Path:
    path.write_bytes(struct.pack("<Q", len(header) if length is None else length) + header + data)
    return path


def _header(**entry: Any) -> bytes:
    return json.dumps({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], **entry}}
                      ).encode()


@pytest.mark.parametrize("make, reason", [
    (lambda p: p.write_bytes(b"\x10\x00"), "truncated"),
    (lambda p: _raw_file(p, _header(), bytes(8), length=10_000), "runs past the end"),
    (lambda p: _raw_file(p, _header(data_offsets=[0, 16]), bytes(8)), "out of range"),
    (lambda p: _raw_file(p, _header(data_offsets=[0, 4]), bytes(8)), "needs 8"),
    (lambda p: _raw_file(p, b"not json {", bytes(8)), "not a safetensors file .no JSON object"),
    (lambda p: _raw_file(p, b"[1, 2]"), "not a safetensors file .no JSON object"),
    (lambda p: _raw_file(p, b'{"t": [1, 2}'), "not a safetensors file .header is not valid JSON"),
    (lambda p: _raw_file(p, b'{"a": 1}', length=1), "cannot hold a JSON object"),
    (lambda p: _raw_file(p, b"{" + bytes(8), length=200_000_000), "above the 100000000-byte"),
    (lambda p: _raw_file(p, _header(dtype="F128"), bytes(8)), "unsupported dtype"),
    (lambda p: _raw_file(p, _header(shape=[-2]), bytes(8)), "non-negative"),
    (lambda p: _raw_file(p, b'{"t": 1, "t": 2}'), "duplicate"),
    (lambda p: None, "no such file"),
])
def test_malformed_files_name_the_file(folder: Path, make: Any, reason: str) -> None:
    path = folder / "broken.safetensors"
    make(path)
    with pytest.raises(TensorFileError, match=rf"^broken\.safetensors: .*{reason}"):
        read_header(path)


# ------------------------------------------------------------------------------- CLI


def _bf16_files(folder: Path, flip: bool) -> tuple[Path, Path]:
    weights = np.arange(4 * 8, dtype=np.uint16).reshape(4, 8) + 0x3F00
    other = _flip(weights, 8 * 2 + 5, 0) if flip else weights.copy()
    a = write_tensor_file(folder / "a.safetensors", {"dit.w": weights}, dtypes={"dit.w": "BF16"})
    b = write_tensor_file(folder / "b.safetensors", {"dit.w": other}, dtypes={"dit.w": "BF16"})
    return a, b


def test_cli_identical_files_exit_0(folder: Path, capsys: Any) -> None:
    assert main(["compare-tensors", *map(str, _bf16_files(folder, flip=False))]) == 0
    assert capsys.readouterr().out.splitlines() == ["dit.w: equal", "all 1 points equal"]


def test_cli_one_flipped_bf16_bit_names_tensor_and_index(folder: Path, capsys: Any) -> None:
    assert main(["compare-tensors", *map(str, _bf16_files(folder, flip=True))]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("dit.w: DIFFERS 1/32 elements (3.12%), first at (2, 5)")
    assert out[0].endswith("max ULP 1") and out[-1] == "first divergence: dit.w"


def test_cli_tells_negative_zero_from_zero(folder: Path, capsys: Any) -> None:
    a, b = _pair(folder, "F32", np.zeros(2, np.float32), np.array([0.0, -0.0], np.float32))
    assert main(["compare-tensors", str(a), str(b), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["first_divergence"] == "t"
    assert report["points"][0] | {"fraction": None} == {
        "name": "t", "status": "differs", "equal": False, "dtype_a": "F32", "dtype_b": "F32",
        "shape_a": [2], "shape_b": [2], "elements": 2, "differing": 1, "fraction": None,
        "first_index": [1], "max_abs_diff": 0.0, "max_ulp": 0}


def test_cli_folders(folder: Path, capsys: Any) -> None:
    a = _dump(folder / "a", {"dit.step001": 1})
    b = _dump(folder / "b", {"dit.step001": 1})
    assert main(["compare-tensors", str(a), str(b), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["equal"] is True


def test_cli_malformed_file_exits_2_with_one_line(folder: Path, capsys: Any) -> None:
    good, _ = _bf16_files(folder, flip=False)
    bad = folder / "bad.safetensors"
    bad.write_bytes(good.read_bytes()[:12])
    assert main(["compare-tensors", str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.safetensors" in err and "Traceback" not in err
    assert str(folder) not in err


def test_cli_names_cond_text_as_the_first_divergence(folder: Path, capsys: Any) -> None:
    # Both differ; the text conditioning comes first in the pipeline, whatever the alphabet says.
    a = _dump(folder / "a", {"cond.audio": 1.0, "cond.text": 1.0})
    b = _dump(folder / "b", {"cond.audio": 2.0, "cond.text": 2.0})
    assert main(["compare-tensors", str(a), str(b)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("cond.text: DIFFERS") and out[-1] == "first divergence: cond.text"


def test_cli_with_a_campaign_track_compares_its_frozen_points(folder: Path, capsys: Any) -> None:
    campaign = Path(__file__).resolve().parents[2] / "fixtures/campaigns/reference.yaml"
    a = _dump(folder / "a", {"cond.audio": 1.0, "cond.text": 1.0, "extra.point": 1.0})
    b = _dump(folder / "b", {"cond.audio": 2.0, "cond.text": 1.0, "extra.point": 1.0})
    assert main(["compare-tensors", str(a), str(b), "--json", "--campaign", str(campaign),
                 "--track", "5s-lossless"]) == 1
    report = json.loads(capsys.readouterr().out)
    names = [p["name"] for p in report["points"]]
    # The track's diagnostics points in their frozen order, absent ones reported, not skipped;
    # then what the dumps hold beyond the contract.
    assert names == ["cond.text", "cond.image", "cond.audio", "dit.step000", "dit.step025",
                     "dit.step049", "latent.video", "latent.audio", "decoded.video",
                     "decoded.audio", "extra.point"]
    assert report["first_divergence"] == "cond.image"  # missing on both sides comes first
    assert main(["compare-tensors", str(a), str(b), "--campaign", str(campaign)]) == 2
    assert "--campaign and --track go together" in capsys.readouterr().err


@pytest.mark.parametrize("content", [b"this is a text file, not tensors\n" * 3,
                                     b"\x00\x00\x00\x18ftypisom" + bytes(64)])
def test_cli_file_that_is_not_safetensors_says_so(folder: Path, capsys: Any,
                                                   content: bytes) -> None:
    good, _ = _bf16_files(folder, flip=False)
    other = folder / "notes.safetensors"
    other.write_bytes(content)
    assert main(["compare-tensors", str(good), str(other)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and str(folder) not in err
    assert "notes.safetensors: not a safetensors file" in err
    assert "exceeds" not in err and "limit" not in err


# ------------------------------------------------------------------------------- decoded MP4


def _mp4(path: Path, frames: int = 12, changed: int | None = None, audio: bool = True) -> Path:
    """Noisy 32x32 pictures and noisy audio; ``changed``: that frame inverted."""
    rng = np.random.default_rng(5)
    pictures = rng.integers(0, 256, (frames, 32, 32, 3), np.uint8)
    if changed is not None:
        pictures[changed] = 255 - pictures[changed]
    samples = (rng.standard_normal((2, 32000 * frames // 24)) * 0.1).astype(np.float32)
    # No lookahead: a change in frame k must not alter how earlier frames are encoded.
    return write_mp4(path, pictures=pictures, audio=audio, samples=samples,
                     codec_options={"preset": "ultrafast", "tune": "zerolatency"})


@pytest.fixture(scope="module")
def mp4s(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mp4")
    return {"a": _mp4(root / "a.mp4"), "same": _mp4(root / "same.mp4"),
            "changed": _mp4(root / "changed.mp4", changed=7),
            "short": _mp4(root / "short.mp4", frames=10),
            "silent": _mp4(root / "silent.mp4", audio=False)}


def test_identical_mp4s_decode_equal(mp4s: dict[str, Path]) -> None:
    result = compare_decoded_mp4(mp4s["a"], mp4s["same"])
    assert [(p.name, p.status) for p in result.points] == [
        ("mp4.video", "equal"), ("mp4.audio", "equal")]
    video, audio = result.points
    assert video.shape_a == [12, 32, 32, 3] and video.dtype_a == "U8"
    assert audio.shape_a is not None and audio.shape_a[0] == 2 and audio.dtype_a == "F32"


def test_one_changed_frame_is_located(mp4s: dict[str, Path]) -> None:
    result = compare_decoded_mp4(mp4s["a"], mp4s["changed"])
    assert result.first_divergence == "mp4.video"
    video = result.points[0]
    assert video.status == "differs" and video.first_index is not None
    assert video.first_index[0] == 7


def test_a_different_frame_count_is_a_shape_mismatch(mp4s: dict[str, Path]) -> None:
    video = compare_decoded_mp4(mp4s["a"], mp4s["short"]).points[0]
    assert (video.status, video.shape_a, video.shape_b) == (
        "shape_mismatch", [12, 32, 32, 3], [10, 32, 32, 3])


def test_a_missing_audio_stream_is_reported_missing(mp4s: dict[str, Path]) -> None:
    assert compare_decoded_mp4(mp4s["a"], mp4s["silent"]).points[1].status == "missing_in_b"
    assert compare_decoded_mp4(mp4s["silent"], mp4s["a"]).points[1].status == "missing_in_a"
