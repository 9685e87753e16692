"""``save(path, tree)`` and ``load(path)``: pytrees of owners in a file that is safe to load.

The file format (version 1)
---------------------------
A zip archive (members stored uncompressed; zip64 where needed) holding

* ``tenferro.json``, first: ``{"format": "tenferro.save", "version": 1, "tree": NODE}``;
* ``leaves/<i>.npy`` for the ``i``-th array leaf: numpy's ``.npy`` format (a small header
  with the dtype, little-endian, ``fortran_order`` false, and the shape; then the raw
  C-order bytes).  ``numpy.load`` reads these members too.

``NODE`` is JSON: ``null`` (``None``); ``{"dict": [[key, NODE], ...]}`` (keys are strings
or ints, in the dict's order); ``{"list": [NODE, ...]}``; ``{"tuple": [NODE, ...]}``;
``{"array": i, "dtype": "float64", "shape": [2, 3]}``; or a scalar: ``{"bool": b}``,
``{"int": n}``, ``{"str": s}``, ``{"float": "0x1.8p+1"}`` (``float.hex``, exact,
NaN and infinities included) and ``{"complex": [re, im]}`` (two such strings).

Loading runs no code from the file: the description is JSON, each ``.npy`` header is
parsed by numpy's literal reader, and the dtype (one of tenferro's), the byte order, the
shape and every member's size are checked before anything is allocated.  A damaged or
foreign file raises :class:`~tenferro_storage.errors.FileFormatError` naming the file and
the member.
"""

from __future__ import annotations

import json
import math
import os
import struct
import tempfile
import zipfile
import zlib
from typing import Any, BinaryIO

import numpy as np

from ._dtypes import dtype as resolve_dtype
from ._dtypes import from_numpy_dtype
from ._ledger import LEDGER, AllocationReason, CopyReason
from ._tensor import Tensor, TensorView, TensorViewMut
from .errors import (
    DTypeError,
    FileAccessError,
    FileFormatError,
    SaveError,
    TenferroError,
    shown,
)
from .kernel import read_array

__all__ = ["load", "save"]

FORMAT = "tenferro.save"
VERSION = 1
HEADER = "tenferro.json"
_CHUNK = 1 << 22  # bytes per write of a strided leaf, and per read of a compressed member
_LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")  # a zip local file header (30 bytes)
_MAX_HEADER = 1 << 26  # a tree description over 64 MiB is not one this module wrote


def _path(operation: str, path: object) -> str:
    """``path`` as a string, or a ``SaveError`` naming the argument."""
    if isinstance(path, str | os.PathLike):
        p = os.fspath(path)
        if isinstance(p, str) and p:
            return p
    raise SaveError(f"{operation}: argument 'path' must be a non-empty str or os.PathLike "
                    f"naming a file, got {shown(path)}")


def _os_error(operation: str, path: str, e: OSError) -> FileAccessError:
    return FileAccessError(e.errno, f"{operation}: argument 'path' {path!r}: "
                                    f"{e.strerror or e}", path)


def _leaf_name(i: int) -> str:
    return f"leaves/{i}.npy"


# --- saving -------------------------------------------------------------------------------


class _Encoder:
    """Walks a tree once: checks every node and leaf, collects the arrays to write."""

    def __init__(self) -> None:
        self.arrays: list[np.ndarray[Any, Any]] = []
        self.views: list[Any] = []

    def node(self, x: Any, path: str) -> Any:
        t = type(x)
        if x is None:
            return None
        if t is dict:
            pairs = []
            for k, v in x.items():
                if type(k) not in (str, int):
                    raise SaveError(f"save: {path} has a key of type {type(k).__name__}; "
                                    "dict keys must be str or int")
                pairs.append([k, self.node(v, f"{path}[{k!r}]")])
            return {"dict": pairs}
        if t is list or t is tuple:
            kids = [self.node(v, f"{path}[{i}]") for i, v in enumerate(x)]
            return {"list" if t is list else "tuple": kids}
        if t is Tensor or t is TensorView or t is TensorViewMut:
            return self.owner(x, path)
        if isinstance(x, np.ndarray):
            return self.array(x, x, path)
        return self.scalar(x, path)

    def owner(self, x: Any, path: str) -> Any:
        view = x.as_view() if type(x) is Tensor else x  # BorrowError names the holder
        if view is not x:
            self.views.append(view)
        return self.array(read_array(view), x, path)

    def array(self, a: np.ndarray[Any, Any], x: Any, path: str) -> Any:
        try:
            native = a.dtype if a.dtype.isnative else a.dtype.newbyteorder("=")  # written '<'
            dt = from_numpy_dtype(native, f"save: {path}")
        except DTypeError as e:
            raise SaveError(str(e)) from None
        self.arrays.append(a)
        return {"array": len(self.arrays) - 1, "dtype": dt.name, "shape": list(a.shape)}

    def scalar(self, x: Any, path: str) -> Any:
        if isinstance(x, bool | np.bool_):
            return {"bool": bool(x)}
        if isinstance(x, int | np.integer):
            return {"int": int(x)}
        if isinstance(x, float | np.floating):
            return {"float": float(x).hex()}
        if isinstance(x, complex | np.complexfloating):
            z = complex(x)
            return {"complex": [z.real.hex(), z.imag.hex()]}
        if isinstance(x, str):
            return {"str": x}
        hint = (
            "; convert it to a dict first (._asdict(), dataclasses.asdict)"
            if isinstance(x, tuple | list | dict) or hasattr(x, "__dataclass_fields__")
            else ""
        )
        raise SaveError(
            f"save: {path} is a {type(x).__name__}; a saved tree holds dict, list, tuple and "
            f"None nodes, owners, views, numpy arrays and bool/int/float/complex/str "
            f"leaves{hint}"
        )


def _write_leaf(fp: BinaryIO, a: np.ndarray[Any, Any]) -> None:
    """One ``.npy`` member: header, then the C-order little-endian bytes, in chunks."""
    little = a.dtype.newbyteorder("<")
    np.lib.format.write_array_header_2_0(
        fp, {"descr": np.lib.format.dtype_to_descr(little), "fortran_order": False,
             "shape": a.shape}
    )
    if a.flags.c_contiguous and a.dtype == little:
        fp.write(memoryview(a.reshape(-1)).cast("B"))  # type: ignore[arg-type]
        return
    rows = max(1, _CHUNK // a.itemsize)
    flags = ["external_loop", "buffered", "zerosize_ok"]
    it = np.nditer(a, flags=flags, buffersize=rows, order="C")  # type: ignore[call-overload]
    for chunk in it:  # bounded temporaries
        fp.write(chunk.astype(little, copy=False).tobytes())


def save(path: str | os.PathLike[str], tree: Any) -> None:
    """Write ``tree`` (a pytree of owners, views, numpy arrays and scalars) to ``path``.

    The format is described in this module's docstring.  The whole tree is checked before
    anything is written, and the file is written to a temporary name beside ``path`` and
    renamed into place, so a failed save leaves no file and an existing one unchanged.
    Owners are read through shared borrows (an owner borrowed mutably elsewhere raises
    ``BorrowError``) and are not consumed.  Records one ``TRANSFER`` copy per array leaf
    (the bytes leave the owners); allocates nothing tenferro owns; O(total bytes).

    Cost: no allocation (streams each leaf to the file); copies each array leaf to the file (a
    recorded TRANSFER); no sync; no dispatch; O(total bytes).
    Raises: SaveError, TypeError, BorrowError."""
    target = _path("save", path)
    enc = _Encoder()
    try:
        desc = {"format": FORMAT, "version": VERSION, "tree": enc.node(tree, "tree")}
        header = json.dumps(desc, separators=(",", ":"), allow_nan=False).encode()
        if enc.arrays:
            LEDGER.check_copy_allowed("save")
        try:
            fd, tmp = tempfile.mkstemp(prefix=".tenferro-save-",
                                       dir=os.path.dirname(target) or ".")
        except OSError as e:
            raise _os_error("save", target, e) from None
        try:
            with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_STORED) as zf:
                zf.writestr(HEADER, header)
                for i, a in enumerate(enc.arrays):
                    with zf.open(_leaf_name(i), "w", force_zip64=True) as fp:
                        _write_leaf(fp, a)  # type: ignore[arg-type]
            os.replace(tmp, target)
        except BaseException as e:
            os.unlink(tmp)
            if isinstance(e, OSError):
                raise _os_error("save", target, e) from None
            raise
        for a in enc.arrays:
            LEDGER.copy(CopyReason.TRANSFER, a.nbytes, "save")
    finally:
        for v in enc.views:
            v.release()


# --- loading ------------------------------------------------------------------------------


class _Leaf:
    __slots__ = ("dtype", "info", "offset", "shape")

    def __init__(self, info: zipfile.ZipInfo, offset: int, shape: tuple[int, ...],
                 dtype: Any) -> None:
        self.info, self.offset, self.shape, self.dtype = info, offset, shape, dtype


class _Decoder:
    """Checks the tree description and every leaf's header before anything is allocated."""

    def __init__(self, where: str, zf: zipfile.ZipFile) -> None:
        self.where, self.zf = where, zf
        self.leaves: dict[int, _Leaf] = {}

    def bad(self, what: str) -> FileFormatError:
        return FileFormatError(f"load: {self.where}: {what}")

    def node(self, n: Any, path: str) -> Any:
        if n is None:
            return None
        if not isinstance(n, dict) or not n:
            raise self.bad(f"{path}: not a node of this format")
        kind = next(iter(n))
        if kind == "dict" and len(n) == 1 and isinstance(n["dict"], list):
            out = {}
            for pair in n["dict"]:
                if not (isinstance(pair, list) and len(pair) == 2
                        and type(pair[0]) in (str, int)):
                    raise self.bad(f"{path}: a dict entry is not a [key, node] pair")
                out[pair[0]] = self.node(pair[1], f"{path}[{pair[0]!r}]")
            return out
        if kind in ("list", "tuple") and len(n) == 1 and isinstance(n[kind], list):
            kids = [self.node(v, f"{path}[{i}]") for i, v in enumerate(n[kind])]
            return kids if kind == "list" else tuple(kids)
        if kind == "array":
            return self.array(n, path)
        return self.scalar(kind, n, path)

    def scalar(self, kind: str, n: dict[str, Any], path: str) -> Any:
        v = n.get(kind)
        ok = len(n) == 1
        try:
            if ok and kind == "bool" and type(v) is bool:
                return v
            if ok and kind == "int" and type(v) is int:
                return v
            if ok and kind == "str" and type(v) is str:
                return v
            if ok and kind == "float" and type(v) is str:
                return float.fromhex(v)
            if ok and kind == "complex" and isinstance(v, list) and len(v) == 2:
                return complex(float.fromhex(v[0]), float.fromhex(v[1]))
        except (TypeError, ValueError, OverflowError):
            pass
        raise self.bad(f"{path}: not a node of this format ({kind!r})")

    def array(self, n: dict[str, Any], path: str) -> Any:
        i, shape_l, name = n.get("array"), n.get("shape"), n.get("dtype")
        if (set(n) != {"array", "dtype", "shape"} or type(i) is not int or i < 0
                or i in self.leaves or not isinstance(shape_l, list)
                or not all(type(d) is int and d >= 0 for d in shape_l)):
            raise self.bad(f"{path}: a malformed array entry")
        try:
            dt = resolve_dtype(name)
        except TenferroError:
            raise self.bad(f"{path}: dtype {name!r} is not one of tenferro's") from None
        shape = tuple(shape_l)
        member = _leaf_name(i)
        try:
            info = self.zf.getinfo(member)
        except KeyError:
            raise self.bad(f"{path}: member {member} is missing") from None
        nd = dt.numpy.newbyteorder("<")
        try:
            with self.zf.open(info) as f:
                version = np.lib.format.read_magic(f)
                reader = {(1, 0): np.lib.format.read_array_header_1_0,
                          (2, 0): np.lib.format.read_array_header_2_0}[version]
                hshape, fortran, hdtype = reader(f)
                offset = f.tell()
        except (zipfile.BadZipFile, zlib.error):  # a small member is read whole: CRC checked
            raise self.bad(f"member {member} is damaged (CRC)") from None
        except (ValueError, KeyError, SyntaxError, TypeError):
            raise self.bad(f"member {member} has no valid .npy header") from None
        if (hdtype != nd or fortran or tuple(hshape) != shape):
            raise self.bad(f"member {member} holds {hdtype} {tuple(hshape)}"
                           f"{' (Fortran order)' if fortran else ''}; the description says "
                           f"{dt.name} {shape} (little-endian, C order)")
        nbytes = math.prod(shape) * nd.itemsize
        if info.file_size != offset + nbytes:
            raise self.bad(f"member {member} has {info.file_size - offset} data bytes, "
                           f"{shape} {dt.name} needs {nbytes}")
        self.leaves[i] = _Leaf(info, offset, shape, dt)
        return _Placeholder(i)


class _Placeholder:
    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


def _fill(where: str, zf: zipfile.ZipFile, raw: BinaryIO, size: int, leaf: _Leaf) -> Any:
    """A new owner holding the leaf's bytes, read straight into its memory."""
    info = leaf.info
    arr = np.empty(leaf.shape, dtype=leaf.dtype.numpy)
    mv = memoryview(arr.reshape(-1)).cast("B")  # type: ignore[arg-type]
    if info.compress_type == zipfile.ZIP_STORED:
        raw.seek(info.header_offset)
        fields = _LOCAL_HEADER.unpack(raw.read(_LOCAL_HEADER.size))
        start = info.header_offset + _LOCAL_HEADER.size + fields[9] + fields[10]
        if fields[0] != 0x04034B50 or start + info.file_size > size:
            raise FileFormatError(f"load: {where}: member {info.filename} is truncated")
        raw.seek(start)
        crc = zlib.crc32(raw.read(leaf.offset))
        got = raw.readinto(mv)  # type: ignore[attr-defined]
        while got < len(mv):  # a short read of a pipe-like file: continue
            more = raw.readinto(mv[got:])  # type: ignore[attr-defined]
            if not more:
                break
            got += more
        if got != len(mv) or zlib.crc32(mv, crc) != info.CRC:
            raise FileFormatError(f"load: {where}: member {info.filename} is damaged (CRC)")
    else:
        try:
            with zf.open(info) as f:
                f.read(leaf.offset)
                got = 0
                while got < len(mv):
                    chunk = f.read(min(_CHUNK, len(mv) - got))
                    if not chunk:
                        break
                    mv[got:got + len(chunk)] = chunk
                    got += len(chunk)
        except (zipfile.BadZipFile, zlib.error):
            got = -1
        if got != len(mv):
            raise FileFormatError(f"load: {where}: member {info.filename} is damaged (CRC)")
    t = Tensor._adopt(arr, leaf.dtype, AllocationReason.TRANSFER_DESTINATION, "load")
    LEDGER.copy(CopyReason.TRANSFER, arr.nbytes, "load")
    return t


def _rebuild(x: Any, owners: dict[int, Any]) -> Any:
    t = type(x)
    if t is _Placeholder:
        return owners[x.index]
    if t is dict:
        return {k: _rebuild(v, owners) for k, v in x.items()}
    if t is list:
        return [_rebuild(v, owners) for v in x]
    if t is tuple:
        return tuple(_rebuild(v, owners) for v in x)
    return x


def load(path: str | os.PathLike[str]) -> Any:
    """Read a tree written by :func:`save`: its dicts, lists, tuples, ``None`` and scalars as
    they were, and every array leaf (owner, view or numpy array when saved) as a new owner.

    Safe on untrusted files: nothing in the file is executed or unpickled, and the whole
    description and every leaf header are checked before the first allocation
    (``FileFormatError`` otherwise).  Streamed: each leaf's bytes are read from the file
    straight into its new owner's memory, so loading needs the memory of the result only.
    Records per array leaf one ``TRANSFER_DESTINATION`` allocation and one ``TRANSFER``
    copy; O(total bytes).

    Cost: allocates one owner per array leaf; copies each from the file (a recorded TRANSFER); no
    sync; no dispatch; O(total bytes).
    Raises: FileFormatError."""
    where = _path("load", path)
    try:
        raw = open(where, "rb")
    except OSError as e:
        raise _os_error("load", where, e) from None
    with raw:
        try:
            zf = zipfile.ZipFile(raw)
        except zipfile.BadZipFile:
            raise FileFormatError(f"load: {where}: not a tenferro save file (not a zip)") from None
        with zf:
            dec = _Decoder(where, zf)
            try:
                info = zf.getinfo(HEADER)
                if info.file_size > _MAX_HEADER:
                    raise dec.bad(f"{HEADER} is {info.file_size} bytes, too large")
                desc = json.loads(zf.read(info))
            except KeyError:
                raise dec.bad(f"not a tenferro save file (no {HEADER})") from None
            except (ValueError, RecursionError, zipfile.BadZipFile) as e:
                raise dec.bad(f"{HEADER} is not valid JSON ({type(e).__name__})") from None
            if not (isinstance(desc, dict) and desc.get("format") == FORMAT
                    and set(desc) == {"format", "version", "tree"}):
                raise dec.bad("not a tenferro save file")
            if desc["version"] != VERSION:
                raise dec.bad(f"format version {desc['version']!r}; this tenferro reads "
                              f"version {VERSION}")
            try:
                skeleton = dec.node(desc["tree"], "tree")
            except RecursionError:
                raise dec.bad("the tree is nested too deeply") from None
            if sorted(dec.leaves) != list(range(len(dec.leaves))):
                raise dec.bad("the array leaves are not numbered 0, 1, ...")
            size = os.fstat(raw.fileno()).st_size
            owners = {i: _fill(where, zf, raw, size, leaf) for i, leaf in dec.leaves.items()}
    return _rebuild(skeleton, owners)
