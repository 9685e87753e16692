"""``save`` / ``load``: pytrees of owners round-trip exactly, loads are recorded TRANSFERs,
damaged or foreign files are refused before anything is allocated, and a failed save
leaves no file behind."""

from __future__ import annotations

import errno
import json
import math
import os
import pathlib
import tempfile
import tracemalloc
import zipfile
from collections import Counter, namedtuple
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tenferro_storage as ts
from tenferro_storage import ledger
from tenferro_storage.errors import (
    BorrowError,
    CopyForbiddenError,
    FileAccessError,
    FileFormatError,
    SaveError,
)

A, C = ledger.AllocationReason, ledger.CopyReason
DTYPES = ["float32", "float64", "complex64", "complex128", "int32", "int64", "bool"]


def _same(a: Any, b: Any) -> None:
    """Equal structure, types, dtypes, shapes and bits (NaNs included)."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    elif isinstance(a, ts.Tensor):
        assert (a.dtype, a.shape) == (b.dtype, b.shape)
        x, y = a.to_numpy(), b.to_numpy()
        assert x.tobytes() == y.tobytes()
    elif isinstance(a, float | complex):
        assert repr(a) == repr(b)
    else:
        assert a == b


def _owners(tree: Any) -> list[ts.Tensor]:
    """The owners in ``tree`` (dict keys may mix str and int, which a pytree cannot sort)."""
    if isinstance(tree, dict):
        return [o for v in tree.values() for o in _owners(v)]
    if isinstance(tree, list | tuple):
        return [o for v in tree for o in _owners(v)]
    return [tree] if isinstance(tree, ts.Tensor) else []


@st.composite
def owners(draw: st.DrawFn) -> ts.Tensor:
    dt = draw(st.sampled_from(DTYPES))
    shape = tuple(draw(st.lists(st.integers(0, 3), max_size=3)))
    seed = draw(st.integers(0, 2**16))
    raw = np.random.default_rng(seed).normal(size=(*shape, 2)) * 1e3
    arr = (raw[..., 0] + 1j * raw[..., 1]) if dt.startswith("complex") else raw[..., 0]
    return ts.from_numpy(arr.astype(dt) if dt != "bool" else arr > 0)


SCALARS = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=5)
           | st.floats(allow_nan=True) | st.complex_numbers(allow_nan=True))
TREES = st.recursive(
    SCALARS | owners(),
    lambda kids: (st.lists(kids, max_size=3) | st.lists(kids, max_size=3).map(tuple)
                  | st.dictionaries(st.text(max_size=3) | st.integers(-5, 5), kids, max_size=3)),
    max_leaves=8,
)


@settings(deadline=None)
@given(tree=TREES)
@example(tree={"w": ts.ones((2, 3)), "b": [ts.zeros(0, "complex64"), None, (1, 2.5, "s")]})
@example(tree=[float("nan"), -0.0, float("inf"), complex(float("nan"), -0.0), 2**100])
def test_trees_round_trip_exactly_and_loads_are_recorded_transfers(tree: Any) -> None:
    """Structure, dict order, key types, scalars (bit-exact floats), dtypes, shapes and
    values come back; each array leaf costs one TRANSFER copy on save and one TRANSFER
    copy plus one TRANSFER_DESTINATION allocation on load, and nothing else."""
    with tempfile.TemporaryDirectory() as d:
        _round_trip(tree, pathlib.Path(d) / "tree.tfz")


def _round_trip(tree: Any, path: pathlib.Path) -> None:
    leaves = _owners(tree)
    nbytes = sum(x.to_numpy().nbytes for x in leaves)
    with ledger.capture() as rec:
        ts.save(path, tree)
    assert rec.allocations == Counter()
    assert rec.copies == (Counter({C.TRANSFER: len(leaves)}) if leaves else Counter())
    with ledger.capture() as rec:
        out = ts.load(path)
    assert rec.allocations == (Counter({A.TRANSFER_DESTINATION: len(leaves)}) if leaves
                               else Counter())
    assert rec.copy_bytes == (Counter({C.TRANSFER: nbytes}) if nbytes else Counter())
    _same(tree, out)


def test_views_and_numpy_arrays_load_as_owners_and_numpy_reads_the_leaves(
    tmp_path: pathlib.Path,
) -> None:
    """A view, a strided numpy slice and a big-endian array are written C-order little-endian;
    each loads as an owner with the same values; ``numpy.load`` reads the ``.npy`` members."""
    src = ts.from_numpy(np.arange(12.0).reshape(3, 4))
    view = src.as_view()
    strided = np.arange(20, dtype=np.int32).reshape(4, 5)[::2, ::-2]
    big = np.arange(5, dtype=">f8")
    ts.save(tmp_path / "x", {"view": view, "strided": strided, "big": big})
    view.release()
    out = ts.load(tmp_path / "x")
    assert all(type(v) is ts.Tensor for v in out.values())
    np.testing.assert_array_equal(out["view"].to_numpy(), src.to_numpy())
    np.testing.assert_array_equal(out["strided"].to_numpy(), strided)
    np.testing.assert_array_equal(out["big"].to_numpy(), big)
    assert out["big"].dtype == "float64"
    with np.load(tmp_path / "x", allow_pickle=False) as npz:
        desc = json.loads(zipfile.ZipFile(tmp_path / "x").read("tenferro.json"))
        i = dict(desc["tree"]["dict"])["strided"]["array"]
        np.testing.assert_array_equal(npz[f"leaves/{i}"], strided)


Point = namedtuple("Point", "x y")


@pytest.mark.parametrize(
    ("tree", "where"),
    [
        ({"a": [1, Point(1, 2)]}, r"tree\['a'\]\[1\] is a Point.*_asdict"),
        ({"a": {(1, 2): 3}}, r"tree\['a'\] has a key of type tuple"),
        ([object()], r"tree\[0\] is a object"),
        ({"a": np.array([object()])}, r"tree\['a'\].*object"),
    ],
    ids=["namedtuple", "tuple-key", "object", "object-array"],
)
def test_save_refuses_what_it_cannot_write_naming_the_path_and_writes_nothing(
    tree: Any, where: str, tmp_path: pathlib.Path
) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"before")
    with pytest.raises(SaveError, match=where):
        ts.save(path, tree)
    assert path.read_bytes() == b"before" and os.listdir(tmp_path) == ["f"]


def test_a_save_failing_midway_leaves_the_old_file_and_no_temporary(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file is written beside the target and renamed into place only when complete."""
    path = tmp_path / "f"
    ts.save(path, {"a": ts.ones(3)})
    before = path.read_bytes()
    calls: list[int] = []

    def failing(fp: Any, a: Any) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk full")
        fp.write(a.tobytes())

    monkeypatch.setattr(ts._save, "_write_leaf", failing)
    with ledger.capture() as rec, pytest.raises(OSError, match="disk full"):
        ts.save(path, {"a": ts.zeros(3), "b": ts.zeros(4)})
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["f"]
    assert rec.copies == Counter()  # nothing was recorded as transferred


def test_save_reads_through_shared_borrows(tmp_path: pathlib.Path) -> None:
    """An owner borrowed mutably elsewhere is refused (BorrowError), nothing is written; a
    saved owner is not consumed and is not borrowed afterwards."""
    t = ts.ones(2)
    m = t.as_view_mut()
    with pytest.raises(BorrowError):
        ts.save(tmp_path / "f", [t])
    m.release()
    assert not (tmp_path / "f").exists()
    ts.save(tmp_path / "f", [t])
    t.as_view_mut().release()  # no borrow left behind


def test_save_and_load_respect_forbid_copies(tmp_path: pathlib.Path) -> None:
    ts.save(tmp_path / "f", [ts.ones(2)])
    with ledger.forbid_copies():
        with pytest.raises(CopyForbiddenError, match="save"):
            ts.save(tmp_path / "g", [ts.ones(2)])
        ts.save(tmp_path / "h", {"only": "scalars"})  # no bytes cross: allowed
    assert not (tmp_path / "g").exists()


def _rewrite(path: pathlib.Path, edit: Any) -> None:
    """Rebuild the zip at ``path`` with ``edit(members)`` applied (members: name -> bytes)."""
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    edit(members)
    with zipfile.ZipFile(path, "w") as zf:
        for n, b in members.items():
            zf.writestr(n, b)


def _set_tree(tree: Any) -> Any:
    def edit(m: dict[str, bytes]) -> None:
        m["tenferro.json"] = json.dumps({"format": "tenferro.save", "version": 1,
                                         "tree": tree}).encode()
    return edit


def _npy(arr: np.ndarray, allow_pickle: bool = False) -> bytes:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=allow_pickle)
    return buf.getvalue()


DAMAGE = {
    "no-header": (lambda m: m.pop("tenferro.json"), "no tenferro.json"),
    "bad-json": (lambda m: m.update({"tenferro.json": b"{"}), "not valid JSON"),
    "other-format": (lambda m: m.update({"tenferro.json": b'{"format": "x"}'}),
                     "not a tenferro save file"),
    "newer-version": (lambda m: m.update({"tenferro.json": json.dumps(
        {"format": "tenferro.save", "version": 2, "tree": None}).encode()}), "version 2"),
    "shape-disagrees": (_set_tree({"array": 0, "dtype": "float64", "shape": [4]}),
                        r"leaves/0.npy holds float64 \(3,\).*says float64 \(4,\)"),
    "dtype-disagrees": (_set_tree({"array": 0, "dtype": "float32", "shape": [3]}),
                        "holds float64"),
    "unknown-dtype": (_set_tree({"array": 0, "dtype": "object", "shape": [3]}),
                      "not one of tenferro's"),
    "missing-member": (_set_tree({"array": 1, "dtype": "float64", "shape": [3]}),
                       "leaves/1.npy is missing"),
    "pickled-member": (lambda m: m.update({"leaves/0.npy": _npy(np.array([{}, 1]), True)}),
                       "holds object"),
    "short-member": (lambda m: m.update({"leaves/0.npy": _npy(np.ones(3))[:-8]}),
                     "has 16 data bytes"),
    "bad-node": (_set_tree({"eval": "print(1)"}), "not a node of this format"),
    "bad-float": (_set_tree({"float": "nope"}), "not a node of this format"),
}


@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
def test_damaged_or_foreign_files_are_refused_before_any_allocation(
    damage: str, tmp_path: pathlib.Path
) -> None:
    path = tmp_path / "f"
    ts.save(path, ts.ones(3))
    edit, message = DAMAGE[damage]
    _rewrite(path, edit)
    with ledger.capture() as rec, pytest.raises(FileFormatError, match=message):
        ts.load(path)
    assert rec.allocations == Counter() and rec.copies == Counter()


@pytest.mark.parametrize("n", [64, 2**16], ids=["small-member", "streamed-member"])
def test_not_a_zip_and_a_corrupted_byte_are_refused(n: int, tmp_path: pathlib.Path) -> None:
    """A flipped bit is caught by the member's CRC: in a small member while its header is
    checked, in a large one while it streams into the owner."""
    (tmp_path / "text").write_text("hello")
    with pytest.raises(FileFormatError, match="not a zip"):
        ts.load(tmp_path / "text")
    path = tmp_path / "f"
    ts.save(path, [ts.ones(n)])
    data = bytearray(path.read_bytes())
    at = bytes(data).index(np.ones(64).tobytes()) + 8 * n - 100
    data[at] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(FileFormatError, match=r"leaves/0.npy is damaged \(CRC\)"):
        ts.load(path)


def test_a_compressed_archive_still_loads(tmp_path: pathlib.Path) -> None:
    """A file re-zipped with compression (by another tool) is read through the zip reader."""
    path = tmp_path / "f"
    tree = {"w": ts.from_numpy(np.arange(1000.0))}
    ts.save(path, tree)
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, b in members.items():
            zf.writestr(n, b)
    _same(tree, ts.load(path))


def test_loading_streams_each_leaf_into_its_owner(tmp_path: pathlib.Path) -> None:
    """Loading an 8 MB leaf needs about 8 MB (the result), not a second buffer."""
    path = tmp_path / "big"
    ts.save(path, [ts.from_numpy(np.arange(2**20, dtype=np.float64))])
    tracemalloc.start()
    try:
        out = ts.load(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    size = 8 * 2**20
    assert peak < size + size // 8, peak
    assert out[0].to_numpy()[-1] == 2**20 - 1
    assert math.isclose(out[0].to_numpy().sum(), (2**20 - 1) * 2**19)


def test_bad_paths_and_os_refusals_name_the_argument(tmp_path: pathlib.Path) -> None:
    """A path that is not a str/PathLike is a SaveError; a missing file or directory is a
    FileAccessError (an OSError keeping errno) naming the operation and 'path'."""
    with pytest.raises(SaveError, match="save: argument 'path'"):
        ts.save(ts.ones(2), [1])  # type: ignore[arg-type]
    with pytest.raises(SaveError, match="load: argument 'path'"):
        ts.load("")
    with pytest.raises(FileAccessError, match="load: argument 'path'") as info:
        ts.load(tmp_path / "missing")
    assert info.value.errno == errno.ENOENT
    with pytest.raises(FileAccessError, match="save: argument 'path'"):
        ts.save(tmp_path / "no-such-dir" / "f", [1])
