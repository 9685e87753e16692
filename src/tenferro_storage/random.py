"""Random numbers from an explicit generator, in the spirit of ``numpy.random.Generator``.

    rng = ts.random.default_rng(0)       # reproducible: the same seed, the same draws
    w = rng.normal((3, 4), scale=0.1, dtype="float32")
    batch = rng.permutation(1000)

**Why a generator and not JAX's keys.**  tenferro is eager and numpy-backed: a draw is a
creation, made outside any traced program, like ``ts.zeros``.  A stateful generator is what
numpy and PyTorch users write, and what a loop of minibatches needs (each call continues
the stream).  What keys buy JAX, pure functions inside ``jit`` and ``vmap``, does not apply
to draws made before the program runs.  What keys guard against, a hidden global state and
a fixed default seed, is avoided here by design: there is no global generator, every draw
names its generator, ``default_rng()`` without a seed takes fresh entropy from the operating
system (as numpy does), independent streams come from :meth:`Generator.spawn`, and a
generator's :attr:`Generator.state` is plain data that ``ts.save`` writes, so a resumed run
continues the same stream.

Every draw returns a fresh owner: one ``OPERATION_OUTPUT`` allocation event named
``random.<method>``, no copy event (values are computed, not copied).  Floating draws are
made in the requested dtype (``float32`` draws come from numpy's float32 generators, not
rounded float64 ones), so a float32 stream differs from a float64 one with the same seed.

The module-level ``normal`` and ``uniform`` of earlier versions still work but are
deprecated (``DeprecationWarning``): their default ``seed=0`` made every call return the
same draws.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ._creation import _shape
from ._dtypes import _BY_NUMPY, SUPPORTED, DType
from ._dtypes import dtype as resolve_dtype
from ._ledger import AllocationReason
from ._rank import DynRank
from ._root import ALIGNMENT, aligned_copy, aligned_empty
from ._tensor import Tensor, TensorView, TensorViewMut
from .errors import DTypeError, LayoutError
from .kernel import read_array

__all__ = ["Generator", "default_rng", "normal", "uniform"]

_OUT = AllocationReason.OPERATION_OUTPUT
Owner = Tensor[Any, DynRank]
Shape = int | tuple[int, ...]


def _own(arr: Any, dt: DType, operation: str) -> Owner:
    """The fresh draw ``arr`` (a numpy result, or the scalar numpy returns for shape ``()``)
    as a new owner: one allocation event; no copy when it already starts at
    :data:`ALIGNMENT` bytes (else one aligned copy, so the XLA engine reads it in place)."""
    if not isinstance(arr, np.ndarray) or arr.ctypes.data % ALIGNMENT:
        arr = aligned_copy(arr, dt.numpy)
    return Tensor._adopt(arr, dt, _OUT, operation)  # type: ignore[no-any-return]


def _dtype(operation: str, dtype: object) -> DType:
    """``dtype`` resolved, or a ``DTypeError`` naming ``operation`` and the argument."""
    try:
        return resolve_dtype(dtype)
    except DTypeError as e:
        why = str(e).removeprefix("dtype: argument 'spec': ")
        raise DTypeError(f"{operation}: argument 'dtype': {why}") from None


def _float_dtype(operation: str, dtype: object, complex_ok: bool = False) -> DType:
    dt = _dtype(operation, dtype)
    if not dt.is_floating or (dt.is_complex and not complex_ok):
        kinds = "a float or complex" if complex_ok else "a float"
        raise DTypeError(f"{operation}: argument 'dtype' must be {kinds} dtype, got {dt.name}")
    return dt


def _real(operation: str, name: str, value: object) -> float:
    """A real number argument (Python or numpy int/float; not bool, str, None, complex)."""
    if isinstance(value, bool | np.bool_) or not isinstance(
            value, int | float | np.integer | np.floating):
        raise TypeError(f"{operation}: argument {name!r} must be a real number, got "
                        f"{type(value).__name__}")
    return float(value)


def _finite(operation: str, name: str, value: object, *, nonnegative: bool = False) -> float:
    v = _real(operation, name, value)
    if not math.isfinite(v):
        raise ValueError(f"{operation}: argument {name!r} must be finite, got {value!r}")
    if nonnegative and v < 0:
        raise ValueError(f"{operation}: argument {name!r} must be >= 0, got {value!r}")
    return v


def _integer(operation: str, name: str, value: object, minimum: int | None = None) -> int:
    """An integer argument (Python or numpy integer; not bool or float), ``>= minimum``."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise TypeError(f"{operation}: argument {name!r} must be an integer, got "
                        f"{type(value).__name__}")
    v = int(value)
    if minimum is not None and v < minimum:
        raise ValueError(f"{operation}: argument {name!r} must be >= {minimum}, got {v}")
    return v


def _axis(operation: str, axis: object, ndim: int) -> int:
    """An axis of a rank-``ndim`` array: an integer (``TypeError``) in range (``LayoutError``)."""
    a = _integer(operation, "axis", axis)
    if ndim == 0 or not -ndim <= a < ndim:
        raise LayoutError(operation, f"argument 'axis' {a} is out of range for rank {ndim}")
    return a


def _values(operation: str, name: str, x: Any) -> np.ndarray[Any, Any]:
    """The read-only array of an owner, view or numpy array (no copy, no event)."""
    if isinstance(x, Tensor | TensorView | TensorViewMut):
        return read_array(x)
    if isinstance(x, np.ndarray):
        return x
    raise TypeError(f"{operation}: argument {name!r} must be an owner, a view or a numpy array, "
                    f"got {type(x).__name__}")


class Generator:
    """An explicit random stream (numpy's PCG64 generator inside).

    Build one with :func:`default_rng`.  Each method draws a new owner (one
    ``OPERATION_OUTPUT`` allocation named ``random.<method>``) except :meth:`shuffle`,
    which permutes an owner in place.  Costs are O(size) with no copy events.  Not
    thread-safe: give each thread its own (:meth:`spawn`).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct; each draw allocates one
    owner.
    Raises: nothing."""

    __slots__ = ("_rng",)

    def __init__(self, bit_generator: np.random.BitGenerator) -> None:
        self._rng = np.random.Generator(bit_generator)

    def __repr__(self) -> str:
        return f"Generator({type(self._rng.bit_generator).__name__})"

    @property
    def state(self) -> dict[str, Any]:
        """The stream's position as plain data (ints and strings), for ``ts.save``.  O(1)."""
        return dict(self._rng.bit_generator.state)

    @state.setter
    def state(self, value: dict[str, Any]) -> None:
        try:
            self._rng.bit_generator.state = value
        except (TypeError, ValueError, KeyError) as e:
            raise ValueError(f"Generator.state: not a state of this generator ({e})") from None

    def spawn(self, n: int) -> list[Generator]:
        """``n`` new generators with independent streams (numpy's ``SeedSequence.spawn``).

        Cost: allocates ``n`` generators (no ledger event); no copy; no sync; no dispatch; O(n).

        Raises:
            TypeError: ``n`` is not an integer (a bool or float included).
            ValueError: ``n`` is negative."""
        n = _integer("random.spawn", "n", n, 0)
        return [Generator(g.bit_generator) for g in self._rng.spawn(n)]

    # --- continuous ---------------------------------------------------------------------

    def normal(self, shape: Shape = (), *, loc: float = 0.0, scale: float = 1.0,
               dtype: object = "float64") -> Owner:
        """Normal draws ``loc + scale * z``.  For a complex dtype ``z`` is standard complex
        normal (real and imaginary parts independent with variance 1/2, so E|z|^2 = 1).

        Cost: allocates one owner (one ``OPERATION_OUTPUT`` event); no copy event (an unaligned
        draw is moved once into an aligned buffer, unrecorded); no sync; no dispatch; O(size).
        Raises: DTypeError, LayoutError, ValueError, TypeError."""
        op = "random.normal"
        dt = _float_dtype(op, dtype, complex_ok=True)
        size = _shape(op, shape, dt)
        loc_, scale_ = _finite(op, "loc", loc), _finite(op, "scale", scale, nonnegative=True)
        if dt.is_complex:
            real: Any = np.float32 if dt.itemsize == 8 else np.float64
            arr = aligned_empty(size, dt.numpy)
            parts: Any = arr.reshape(-1).view(real)  # the real and imaginary parts, in place
            self._rng.standard_normal(out=parts, dtype=real)
            parts *= math.sqrt(0.5)
        elif dt.itemsize == 8:
            arr = self._rng.normal(loc_, scale_, size)  # numpy's own float64 arithmetic
            return _own(arr, dt, op)
        else:
            arr = self._rng.standard_normal(size, dtype=dt.numpy)
        if scale_ != 1.0:
            arr *= scale_
        if loc_ != 0.0:
            arr += loc_
        return _own(arr, dt, op)

    def uniform(self, shape: Shape = (), *, low: float = 0.0, high: float = 1.0,
                dtype: object = "float64") -> Owner:
        """Uniform draws in ``[low, high)`` (up to the dtype's rounding at ``high``).

        Cost: allocates one owner (one ``OPERATION_OUTPUT`` event); no copy event (an unaligned
        draw is moved once into an aligned buffer, unrecorded); no sync; no dispatch; O(size).
        Raises: DTypeError, LayoutError, ValueError, TypeError."""
        op = "random.uniform"
        dt = _float_dtype(op, dtype)
        size = _shape(op, shape, dt)
        lo, hi = _finite(op, "low", low), _finite(op, "high", high)
        if not lo <= hi:
            raise ValueError(f"{op}: argument 'low' ({lo}) must not exceed 'high' ({hi})")
        if dt.itemsize == 8:
            return _own(self._rng.uniform(lo, hi, size), dt, op)
        arr = self._rng.random(size, dtype=dt.numpy)
        arr *= hi - lo
        arr += lo
        return _own(arr, dt, op)

    def truncated_normal(self, lower: float, upper: float, shape: Shape = (), *,
                         loc: float = 0.0, scale: float = 1.0,
                         dtype: object = "float64") -> Owner:
        """``loc + scale * z`` with ``z`` standard normal conditioned on ``lower <= z <=
        upper`` (bounds in standard deviations, as JAX's ``truncated_normal`` and scipy's
        ``truncnorm``; either may be infinite).  Exact rejection sampling (Robert 1995),
        accepting at least about half the proposals in every regime, far tails included.

        Cost: allocates one owner (one ``OPERATION_OUTPUT`` event); no copy event (an unaligned
        draw is moved once into an aligned buffer, unrecorded); no sync; no dispatch;
        O(size) expected (about two proposals per element at most).
        Raises: DTypeError, LayoutError, ValueError, TypeError."""
        op = "random.truncated_normal"
        dt = _float_dtype(op, dtype)
        size = _shape(op, shape, dt)
        a, b = _real(op, "lower", lower), _real(op, "upper", upper)
        if math.isnan(a) or math.isnan(b) or not a < b:
            raise ValueError(f"{op}: arguments 'lower' ({lower!r}) and 'upper' ({upper!r}) "
                             "must satisfy lower < upper")
        loc_, scale_ = _finite(op, "loc", loc), _finite(op, "scale", scale, nonnegative=True)
        if a >= 0.0:
            z = self._tail(a, b, size)
        elif b <= 0.0:
            z = self._tail(-b, -a, size)
            np.negative(z, out=z)
        else:
            z = self._straddle(a, b, size)
        z *= scale_
        z += loc_
        return _own(z.astype(dt.numpy, copy=False), dt, op)

    def _fill(self, size: tuple[int, ...], propose: Any) -> np.ndarray[Any, Any]:
        """Accepted draws of ``size``: ``propose(m)`` returns ``m`` candidates and a mask."""
        result = np.empty(size)
        out = result.reshape(-1)  # the same memory
        n, done = out.size, 0
        while done < n:
            x, ok = propose(n - done)
            got = x[ok]
            out[done:done + got.size] = got
            done += got.size
        return result

    def _straddle(self, a: float, b: float, n: tuple[int, ...]) -> np.ndarray[Any, Any]:
        rng = self._rng
        if b - a >= math.sqrt(2.0 * math.pi):  # wide: plain normal proposals
            def propose(m: int) -> tuple[Any, Any]:
                z = rng.standard_normal(m)
                return z, (z >= a) & (z <= b)
        else:  # narrow: uniform proposals, accepted with probability exp(-x^2/2)
            def propose(m: int) -> tuple[Any, Any]:
                x = rng.uniform(a, b, m)
                return x, rng.standard_exponential(m) > 0.5 * x * x
        return self._fill(n, propose)

    def _tail(self, a: float, b: float, n: tuple[int, ...]) -> np.ndarray[Any, Any]:
        """Draws on ``[a, b]`` with ``0 <= a``."""
        rng = self._rng
        alpha = 0.5 * (a + math.sqrt(a * a + 4.0))
        narrow = b - a < 2.0 * math.sqrt(math.e) / (a + math.sqrt(a * a + 4.0)) * math.exp(
            0.25 * (a * a - a * math.sqrt(a * a + 4.0)))
        if narrow:  # uniform proposals, accepted with probability exp((a^2 - x^2)/2)
            def propose(m: int) -> tuple[Any, Any]:
                x = rng.uniform(a, b, m)
                return x, rng.standard_exponential(m) > 0.5 * (x - a) * (x + a)
        else:  # shifted exponential proposals (rate alpha), accepted w.p. exp(-(x-alpha)^2/2)
            def propose(m: int) -> tuple[Any, Any]:
                x = a + rng.standard_exponential(m) / alpha
                d = x - alpha
                return x, (rng.standard_exponential(m) > 0.5 * d * d) & (x <= b)
        return self._fill(n, propose)

    # --- discrete -----------------------------------------------------------------------

    def integers(self, low: int, high: int | None = None, shape: Shape = (), *,
                 dtype: object = "int64", endpoint: bool = False) -> Owner:
        """Integers in ``[low, high)`` (``[low, high]`` with ``endpoint=True``; ``[0, low)``
        when ``high`` is omitted), as numpy's ``Generator.integers``; int32 or int64.

        Cost: allocates one owner (one ``OPERATION_OUTPUT`` event); no copy event (an unaligned
        draw is moved once into an aligned buffer, unrecorded); no sync; no dispatch; O(size).
        Raises: DTypeError, LayoutError, ValueError, TypeError (a bound that is not an integer)."""
        op = "random.integers"
        dt = _dtype(op, dtype)
        if dt.kind != "i":
            raise DTypeError(f"{op}: argument 'dtype' must be an integer dtype, got {dt.name}")
        low = _integer(op, "low", low)
        if high is not None:
            high = _integer(op, "high", high)
        size = _shape(op, shape, dt)
        try:
            arr = self._rng.integers(low, high, size, dtype=dt.numpy, endpoint=endpoint)
        except ValueError as e:
            raise ValueError(f"{op}: {e}") from None
        return _own(np.asarray(arr, dtype=dt.numpy), dt, op)

    def bernoulli(self, p: float | Any = 0.5, shape: Shape | None = None, *,
                  dtype: object = "bool") -> Owner:
        """``True`` with probability ``p`` (a number, or an owner/array of probabilities
        broadcast to ``shape``; default shape: ``p``'s).  ``dtype``: bool, or a float dtype
        for 0/1 values.

        Cost: allocates one owner (one ``OPERATION_OUTPUT`` event); no copy event (an unaligned
        draw is moved once into an aligned buffer, unrecorded); no sync; no dispatch; O(size).
        Raises: DTypeError, LayoutError, ValueError, TypeError, BorrowError, UseAfterMoveError."""
        op = "random.bernoulli"
        dt = _dtype(op, dtype)
        if dt.kind not in "bf":
            raise DTypeError(f"{op}: argument 'dtype' must be bool or a float dtype, "
                             f"got {dt.name}")
        probs = (np.float64(p) if isinstance(p, int | float | np.floating | np.integer)
                 else _values(op, "p", p))
        if np.any(~((probs >= 0) & (probs <= 1))):
            raise ValueError(f"{op}: argument 'p' must lie in [0, 1]")
        size = _shape(op, probs.shape if shape is None else shape, dt)
        try:
            np.broadcast_shapes(probs.shape, size)
        except ValueError:
            raise LayoutError(op, f"'p' of shape {probs.shape} does not broadcast to "
                                  f"{size}") from None
        arr = self._rng.random(size) < probs
        return _own(arr if dt.kind == "b" else arr.astype(dt.numpy), dt, op)

    def categorical(self, logits: Any, *, axis: int = -1,
                    shape: Shape | None = None) -> Owner:
        """Indices drawn with probabilities ``softmax(logits)`` along ``axis`` (int64).

        The result has ``logits``' shape without ``axis``, or ``shape`` when given, which
        must end with (broadcast from) that batch shape, as JAX's ``categorical``.  A
        ``-inf`` logit is never drawn.  Gumbel-max: O(size of the result * categories).

        Cost: allocates one owner (one ``OPERATION_OUTPUT`` event); no copy event (an unaligned
        draw is moved once into an aligned buffer, unrecorded); no sync; no dispatch;
        O(size of the result * categories).
        Raises: TypeError, LayoutError, BorrowError, UseAfterMoveError.
        """
        op = "random.categorical"
        lg = _values(op, "logits", logits)
        if lg.dtype.kind not in "fi" or lg.ndim == 0:
            raise TypeError(f"{op}: argument 'logits' must be a real array with at least one "
                            f"axis, got {lg.dtype} of shape {lg.shape}")
        moved = np.moveaxis(lg, _axis(op, axis, lg.ndim), -1)
        batch = moved.shape[:-1]
        out_shape = batch if shape is None else _shape(op, shape)
        try:
            ok = np.broadcast_shapes(out_shape, batch) == out_shape
        except ValueError:
            ok = False
        if not ok:
            raise LayoutError(op, f"argument 'shape' {out_shape} is not a broadcast of the "
                                  f"batch shape {batch}")
        noise = self._rng.gumbel(size=(*out_shape, moved.shape[-1]))
        noise += moved
        arr = np.argmax(noise, axis=-1).astype(np.int64, copy=False)
        return _own(arr, resolve_dtype("int64"), op)

    def permutation(self, x: int | Any, *, axis: int = 0) -> Owner:
        """A permutation of ``range(x)`` (int64) for an int ``x``; for an owner, view or numpy
        array, a new owner with its entries permuted along ``axis`` (a gather, not a copy of
        the input's layout).  O(size).

        Cost: allocates one owner (one ``OPERATION_OUTPUT`` event); no copy event (an unaligned
        draw is moved once into an aligned buffer, unrecorded); no sync; no dispatch; O(size).
        Raises: ValueError, LayoutError, DTypeError, TypeError, BorrowError, UseAfterMoveError."""
        op = "random.permutation"
        if isinstance(x, int | np.integer) and not isinstance(x, bool):
            if x < 0:
                raise ValueError(f"{op}: argument 'x' must be >= 0, got {x}")
            return _own(self._rng.permutation(int(x)), resolve_dtype("int64"), op)
        a = _values(op, "x", x)
        dt = _BY_NUMPY.get(a.dtype)
        if dt is None:
            raise DTypeError(f"{op}: argument 'x' has numpy dtype {a.dtype}, which tenferro does "
                             f"not support (supported: {', '.join(SUPPORTED)})")
        axis = _axis(op, axis, a.ndim)
        idx = self._rng.permutation(a.shape[axis])
        return _own(np.take(a, idx, axis=axis), dt, op)

    def shuffle(self, x: Tensor[Any, Any], *, axis: int = 0) -> None:
        """Permute ``x``'s entries along ``axis`` in place, through an exclusive borrow (a
        borrowed owner raises ``BorrowError`` and is unchanged).  No allocation event.

        Cost: no allocation; no copy event (permutes in place); synchronizes (one provider
        map); no dispatch; O(size).
        Raises: TypeError, LayoutError, BorrowError, UseAfterMoveError, AccessError."""
        if type(x) is not Tensor:
            raise TypeError(f"random.shuffle: argument 'x' must be an owner (Tensor), got "
                            f"{type(x).__name__}; use permutation() for a shuffled copy")
        owner: Any = x
        axis = _axis("random.shuffle", axis, owner.ndim)
        view = owner.as_view_mut()
        try:
            access = view.prepare_host_mut()
            try:
                self._rng.shuffle(access.as_array(), axis=axis)
            finally:
                access.release()
        finally:
            view.release()


def default_rng(seed: int | np.random.SeedSequence | None = None) -> Generator:
    """A new :class:`Generator` (PCG64), as ``numpy.random.default_rng``.

    The same ``seed`` gives the same stream; ``None`` draws a fresh seed from the operating
    system (a different stream every time: pass a seed for reproducible runs).  O(1).

    Cost: no allocation; no copy; no sync; no dispatch; O(1).
    Raises: TypeError, ValueError."""
    if isinstance(seed, bool) or not (seed is None or isinstance(
            seed, int | np.integer | np.random.SeedSequence)):
        raise TypeError(f"random.default_rng: argument 'seed' must be an int, a SeedSequence "
                        f"or None, got {type(seed).__name__}")
    return Generator(np.random.PCG64(seed))


_DEPRECATED = (
    "tenferro_storage.random.{name}(shape, seed=...) is deprecated: draw from an explicit "
    "generator, rng = tenferro_storage.random.default_rng(seed); rng.{name}(shape, {args}). "
    "Its default seed=0 gave the same draws on every call."
)


def _legacy_rng(seed: int | np.random.Generator | Generator) -> np.random.Generator:
    if isinstance(seed, Generator):
        return seed._rng
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def normal(shape: Shape, *, seed: int | np.random.Generator | Generator = 0,
           mean: float = 0.0, std: float = 1.0, dtype: object = "float64") -> Owner:
    """Deprecated: use ``default_rng(seed).normal(shape, loc=mean, scale=std)``.  Draws as
    before (float64 draws rounded to ``dtype``) after a ``DeprecationWarning``.

    Cost: allocates one owner; no copy; no sync; no dispatch; O(n) per-element.
    Raises: DTypeError, LayoutError, TypeError, ValueError."""
    warnings.warn(_DEPRECATED.format(name="normal", args="loc=mean, scale=std"),
                  DeprecationWarning, stacklevel=2)
    dt = _float_dtype("random.normal", dtype)
    draws = _legacy_rng(seed).normal(mean, std, _shape("random.normal", shape))
    return _own(draws.astype(dt.numpy, copy=False), dt, "random.normal")


def uniform(shape: Shape, *, seed: int | np.random.Generator | Generator = 0,
            low: float = 0.0, high: float = 1.0, dtype: object = "float64") -> Owner:
    """Deprecated: use ``default_rng(seed).uniform(shape, low=low, high=high)``.  Draws as
    before after a ``DeprecationWarning``.

    Cost: allocates one owner; no copy; no sync; no dispatch; O(n) per-element.
    Raises: DTypeError, LayoutError, TypeError, ValueError."""
    warnings.warn(_DEPRECATED.format(name="uniform", args="low=low, high=high"),
                  DeprecationWarning, stacklevel=2)
    dt = _float_dtype("random.uniform", dtype)
    draws = _legacy_rng(seed).uniform(low, high, _shape("random.uniform", shape))
    return _own(draws.astype(dt.numpy, copy=False), dt, "random.uniform")
