"""The machinery every optimizer shares: structure checks, borrows, state, scratch, the
all-or-nothing step, and ``state_dict`` / ``load_state_dict``.  The update rules live in
``_rules.py``; the contract is stated in the package docstring."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

import tenferro_storage as ts
from tenferro_storage._pytree import PyTreeDef, keystr, tree_flatten_with_path, tree_structure

from .._core._gradients import Gradients
from .._core._handle import EagerTensor
from ..errors import ArgumentError, ArgumentTypeError
from ._sharded import is_sharded, step_sharded

Schedule = Callable[[int], float]
LearningRate = float | Schedule
Array = np.ndarray[Any, Any]

STATE_DICT_FORMAT = "tenferro.optim/1"


def _structure(params: Any, grads: Any) -> tuple[list[tuple[str, Any, Any]], PyTreeDef]:
    """``(path, parameter, gradient)`` triples and the parameters' structure; refuses a
    ``grads`` structure that differs, showing both."""
    if isinstance(grads, Gradients):
        raise ArgumentTypeError(
            "step: argument 'grads' is a Gradients bundle, which maps handles (not parameter "
            "owners) to gradients; pass the gradients in the parameters' structure, e.g. "
            "[bundle.grad(h) for h in handles]"
        )
    pairs, tree = tree_flatten_with_path(params)
    try:
        g = tree.flatten_up_to(grads)  # a None gradient at a parameter's position: skipped
    except ValueError as e:
        raise ArgumentError(
            f"step: the structure of 'grads' differs from the structure of 'params' (every "
            f"node type, length and dict key must match; None stands for a skipped "
            f"parameter): {e}\n  params: {tree!r}\n  grads:  {tree_structure(grads)!r}"
        ) from None
    return [(f"params{keystr(path)}", a, b) for (path, a), b in zip(pairs, g, strict=True)], tree


def _grad_array(path: str, g: Any) -> Array | None:
    """The read-only array a gradient reads as (no copy), or an error naming ``path``."""
    if g is None:
        return None
    if isinstance(g, ts.Tensor | ts.TensorView | ts.TensorViewMut):
        return ts.kernel.read_array(g)  # BorrowError / UseAfterMoveError name the problem
    if isinstance(g, EagerTensor):
        return g._r("step").a  # type: ignore[no-any-return]
    if isinstance(g, np.ndarray):
        return g
    raise ArgumentTypeError(
        f"step: the gradient for {path} is a {type(g).__name__}; expected a Tensor owner, a "
        "TensorView, an EagerTensor, a numpy array or None"
    )


class _Param:
    """One checked parameter of a step."""

    __slots__ = ("dtype", "grad", "owner", "path", "shape")

    def __init__(self, path: str, owner: Any, grad: Array | None, shape: tuple[int, ...],
                 dtype: ts.DType) -> None:
        self.path, self.owner, self.grad, self.shape, self.dtype = path, owner, grad, shape, dtype


def _check(triples: list[tuple[str, Any, Any]]) -> list[_Param]:
    """Validate every parameter and gradient before anything is borrowed or written."""
    seen: dict[str, str] = {}
    out = []
    for path, p, g in triples:
        if not isinstance(p, ts.Tensor):  # type narrowing stops here: p stays Any
            raise ArgumentTypeError(
                f"step: {path} is a {type(p).__name__}; optimizers update owners (Tensor) in "
                "place"
            )
        owner: Any = p
        shape, dt = tuple(owner.shape), owner.dtype  # UseAfterMoveError for a consumed owner
        if not dt.is_floating:
            raise ArgumentTypeError(
                f"step: {path} has dtype {dt.name}; only floating-point and complex parameters "
                "can be updated"
            )
        key = owner.span
        if key in seen:
            raise ArgumentError(f"step: {path} is the same parameter as {seen[key]}")
        seen[key] = path
        ga = _grad_array(path, g)
        if ga is not None:
            if tuple(ga.shape) != shape:
                raise ArgumentError(
                    f"step: the gradient for {path} has shape {tuple(ga.shape)}, the parameter "
                    f"{shape}"
                )
            if ga.dtype.kind not in "fc" or (ga.dtype.kind == "c" and dt.kind != "c"):
                raise ArgumentTypeError(
                    f"step: the gradient for {path} has dtype {ga.dtype}, which cannot update "
                    f"a {dt.name} parameter (it must be floating, and complex only for a "
                    "complex parameter)"
                )
        out.append(_Param(path, p, ga, shape, dt))
    return out


def _borrow_all(params: list[Any]) -> list[Any]:
    """Exclusive borrows of every parameter, all or nothing (BorrowError changes nothing)."""
    views: list[Any] = []
    try:
        for t in params:
            views.append(t.as_view_mut())
    except BaseException:
        for v in views:
            v.release()
        raise
    return views


def _real(dt: ts.DType) -> ts.DType:
    """The real dtype of ``dt``'s components (``dt`` itself when it is real)."""
    return dt.partner if dt.is_complex and dt.partner is not None else dt


def abs_sq(x: Array, out: Array, tmp: Array) -> Array:
    """``out = |x|**2`` elementwise with no temporary (``tmp``: real scratch, x's shape)."""
    if x.dtype.kind == "c":
        np.multiply(x.real, x.real, out=out)
        np.multiply(x.imag, x.imag, out=tmp)
        out += tmp
    else:
        np.multiply(x, x, out=out)
    return out


class _State:
    """One parameter's optimizer state: named buffers (owners) and its update count."""

    __slots__ = ("buffers", "count", "dtype", "shape")

    def __init__(self, buffers: dict[str, ts.Tensor[Any, Any]], shape: tuple[int, ...],
                 dtype: ts.DType, count: int = 0) -> None:
        self.buffers, self.shape, self.dtype, self.count = buffers, shape, dtype, count


class Scratch:
    """The arrays one parameter's update may overwrite: ``g`` and ``w`` in the parameter's
    dtype, ``r`` in its real dtype (all of its shape), valid for that update only."""

    __slots__ = ("g", "r", "w")

    def __init__(self, g: Array, w: Array, r: Array) -> None:
        self.g, self.w, self.r = g, w, r


# (gradient, state, parameter array, state arrays, scratch) of one parameter to update
_Mapped = tuple[Array, _State, Array, dict[str, Array], Scratch]


class Optimizer:
    """The shared optimizer machinery (see the package docstring for the contract).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct.
    Raises: nothing."""

    # (name, "param" | "real") of each state buffer, set per instance by the rule
    _buffer_specs: tuple[tuple[str, str], ...] = ()
    _coupled_weight_decay: float = 0.0
    _hyper_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, lr: LearningRate, clip_norm: float | None) -> None:
        if not callable(lr):
            lr = float(lr)
            if not math.isfinite(lr):
                raise ArgumentError(f"{type(self).__name__}: argument 'lr' must be finite, "
                                    f"got {lr!r}")
        if clip_norm is not None and not (clip_norm > 0 and math.isfinite(clip_norm)):
            raise ArgumentError(f"{type(self).__name__}: argument 'clip_norm' must be a positive "
                                f"finite number or None, got {clip_norm!r}")
        self.lr: LearningRate = lr
        self.clip_norm = None if clip_norm is None else float(clip_norm)
        self._state: dict[str, _State] = {}
        self._structure: PyTreeDef | None = None
        self._loaded_structure: str | None = None  # from load_state_dict, until the next step
        self._scratch: dict[tuple[str, str], ts.Tensor[Any, Any]] = {}
        self.steps = 0

    def __repr__(self) -> str:
        hyper = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._hyper_names)
        return f"{type(self).__name__}({hyper}, steps={self.steps})"

    def __reduce_ex__(self, protocol: object) -> Any:
        raise TypeError(
            f"{type(self).__name__} cannot be pickled or copied: its state is owners, which are "
            "never copied implicitly; save opt.state_dict() with tenferro_storage.save(path, "
            "...) and restore it with opt.load_state_dict(tenferro_storage.load(path))"
        )

    def learning_rate(self, count: int | None = None) -> float:
        """The learning rate of the update after ``count`` updates (default: the next one).

        A constant rate ignores ``count``; a schedule is called with it.

        Cost: no allocation; no copy; no sync; no dispatch; O(1) plus the schedule's call.

        Raises:
            Exception: whatever a schedule raises, unchanged (a constant rate raises
                nothing); ``TypeError``/``ValueError`` when its result is not a number."""
        lr = self.lr
        c = self.steps if count is None else count
        return float(lr(c)) if callable(lr) else lr

    # --- the step -------------------------------------------------------------------------

    def step(self, params: Any, grads: Any) -> None:
        """Update ``params`` in place from ``grads``, atomically (see the package docstring).

        O(size) kernel work, all of it numpy ufuncs writing in place (``out=``) into the
        parameters, their state and the optimizer's scratch: no temporaries, no copy events;
        allocation events only for a new parameter's state or a larger scratch.  Everything
        is checked before anything is written: a refused step changes nothing.

        Cost: allocates only a new parameter's state and a larger scratch; no copy of host
        parameters (``ShardedTensor`` parameters: two recorded ``TRANSFER`` copies per
        shard); synchronizes through each buffer's host map (counted, O(1) on the host;
        with the devices for shards); no dispatch for host owners (numpy ufuncs; shards
        upload through their engines); O(size of the parameters).

        Raises:
            ArgumentError: the structures or shapes differ, a parameter appears twice, a
                non-finite learning rate, or state for another structure.
            ArgumentTypeError: a parameter is not an owner or not floating, a gradient is
                not a value, or ``grads`` is a ``Gradients`` bundle.
            BorrowError: a parameter is borrowed elsewhere.
            UseAfterMoveError: a parameter or gradient owner was consumed.
            AccessError: a provider could not map a buffer for writing; every buffer is
                mapped before any is written, so this too changes nothing (no parameter,
                state or ``steps``).
        """
        triples, structure = _structure(params, grads)
        if is_sharded(triples):  # tenferro_storage.sharding values: see _sharded.py
            step_sharded(self, triples, structure)
            return
        checked = _check(triples)
        self._check_state(checked, structure)
        lr = self.learning_rate()  # a schedule that raises changes nothing
        if not math.isfinite(lr):
            raise ArgumentError(f"step: the learning rate at step {self.steps} is {lr!r}")
        scale = self._clip_scale([p.grad for p in checked if p.grad is not None])
        views = _borrow_all([p.owner for p in checked])
        try:
            fresh = {
                p.path: _State(self._new_buffers(p.shape, p.dtype), p.shape, p.dtype)
                for p in checked
                if p.grad is not None and p.path not in self._state
            }
            self._grow_scratch(checked)
            opened: list[Any] = []
            try:
                # map every buffer (scratch, state, parameter) before writing any: a provider
                # that fails to map one leaves parameters, state and ``steps`` untouched
                mapped = self._map_all(checked, views, fresh, opened)
                # nothing can fail past this point: every array is mapped, and numpy's
                # floating-point error settings are suspended so that no ufunc can raise
                # halfway through
                self._state.update(fresh)
                self._structure, self._loaded_structure = structure, None
                self.steps += 1
                self._write(mapped, lr, scale)
            finally:
                for o in reversed(opened):
                    o.release()
        finally:
            for v in views:
                v.release()

    def _map_all(self, checked: list[_Param], views: list[Any], fresh: dict[str, _State],
                 opened: list[Any]) -> list[_Mapped]:
        """Host arrays for every parameter with a gradient, its state and its scratch;
        every borrow and mapping taken goes into ``opened`` (released by the caller)."""
        scratch_arrays: dict[tuple[str, str], Array] = {}
        for key, t in self._scratch.items():
            m = t.as_view_mut()
            opened.append(m)
            acc = m.prepare_host_mut()
            opened.append(acc)
            scratch_arrays[key] = acc.as_array()
        mapped: list[_Mapped] = []
        for p, v in zip(checked, views, strict=True):
            if p.grad is None:
                continue
            grad = p.grad
            st = fresh.get(p.path) or self._state[p.path]
            names = list(st.buffers)
            muts = [st.buffers[n].as_view_mut() for n in names]
            opened.extend(muts)
            accs = [m.prepare_host_mut() for m in muts]
            opened.extend(accs)
            w = v.prepare_host_mut()
            opened.append(w)
            state = {n: a.as_array() for n, a in zip(names, accs, strict=True)}
            n = int(np.prod(p.shape, dtype=np.int64))
            dt, rt = p.dtype.name, _real(p.dtype).name
            s = Scratch(*(scratch_arrays[k][:n].reshape(p.shape)
                          for k in (("g", dt), ("w", dt), ("r", rt))))
            mapped.append((grad, st, w.as_array(), state, s))
        return mapped

    def _write(self, mapped: list[_Mapped], lr: float, scale: float) -> None:
        with np.errstate(all="ignore"):
            for grad, st, arr, state, s in mapped:
                st.count += 1
                g = self._effective_gradient(arr, grad, scale, s)
                self._update(arr, g, state, st.count, lr, s)

    def _effective_gradient(self, p: Array, g: Array, scale: float, s: Scratch) -> Array:
        """The descent direction's gradient: ``conj(g)`` (tenferro's gradient of a real loss
        with respect to a complex parameter is JAX's, the conjugate of the ascent direction),
        scaled by the clipping factor, plus the coupled weight decay ``wd * p``."""
        wd = self._coupled_weight_decay
        if scale == 1.0 and not wd and g.dtype.kind != "c":
            return g
        out = s.g
        if g.dtype.kind == "c":
            np.conjugate(g, out=out)
            if scale != 1.0:
                out *= scale
            if wd:
                np.multiply(p, wd, out=s.w)
                out += s.w
        elif wd:
            np.multiply(p, wd, out=out)
            if scale == 1.0:
                out += g
            else:
                np.multiply(g, scale, out=s.w)
                out += s.w
        else:
            np.multiply(g, scale, out=out)
        return out

    def _update(self, p: Array, g: Array, state: dict[str, Array], t: int, lr: float,
                s: Scratch) -> None:
        raise NotImplementedError

    def _clip_scale(self, grads: list[Array]) -> float:
        """``clip_norm / ||grads||`` when the global norm exceeds ``clip_norm``, else 1."""
        if self.clip_norm is None:
            return 1.0
        with np.errstate(all="ignore"):
            total = math.fsum(float(np.vdot(g, g).real) for g in grads)
        norm = math.sqrt(total)
        return 1.0 if norm <= self.clip_norm else self.clip_norm / norm

    # --- state and scratch ----------------------------------------------------------------

    def _new_buffers(self, shape: tuple[int, ...], dt: ts.DType) -> dict[str, ts.Tensor[Any, Any]]:
        return {name: ts.zeros(shape, dt if kind == "param" else _real(dt))
                for name, kind in self._buffer_specs}

    def _grow_scratch(self, checked: list[_Param]) -> None:
        need: dict[tuple[str, str], int] = {}
        for p in checked:
            if p.grad is None:
                continue
            n = int(np.prod(p.shape, dtype=np.int64))
            for key in (("g", p.dtype.name), ("w", p.dtype.name), ("r", _real(p.dtype).name)):
                need[key] = max(need.get(key, 0), n)
        have: dict[tuple[str, str], Any] = self._scratch  # (Tensor.shape: see issue 27 item 5)
        grown = {key: ts.zeros((n,), key[1]) for key, n in need.items()
                 if key not in have or have[key].shape[0] < n}
        self._scratch.update(grown)

    def _check_state(self, checked: list[_Param], structure: PyTreeDef) -> None:
        if self._structure is not None and structure != self._structure:
            raise ArgumentError(
                "step: 'params' has a different structure from the one this optimizer's state "
                "follows (state is kept per tree path, as optax keeps it); use one optimizer "
                f"per parameter structure\n  state:  {self._structure!r}\n  params: {structure!r}"
            )
        paths = {p.path: p for p in checked}
        stray = sorted(set(self._state) - set(paths))
        if stray:
            was = self._loaded_structure or repr(self._structure)
            raise ArgumentError(
                f"step: the optimizer holds state for {', '.join(stray)}, which 'params' does "
                f"not have\n  state:  {was}\n  params: {structure!r}"
            )
        for path, st in self._state.items():
            p = paths[path]
            if (p.shape, p.dtype) != (st.shape, st.dtype):
                raise ArgumentError(
                    f"step: {path} is a {p.dtype.name} parameter of shape {p.shape}, but the "
                    f"optimizer's state for that path is {st.dtype.name} of shape {st.shape}"
                )

    # --- saving and restoring ---------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state as a pytree that :func:`tenferro_storage.save` can write.

        ``{"format", "optimizer", "steps", "structure", "state": {path: {"count": int,
        "dtype": str, "shape": list, <buffer name>: owner, ...}}}``, keyed by tree path
        (``"params['w']"``), not by the parameters' identity.  The buffers are copies (one
        ``EXPLICIT_DUPLICATE`` per buffer); hyperparameters and schedules are not included:
        they are the constructor's arguments.

        Cost: allocates one owner per state buffer; copies each buffer once (recorded
        ``EXPLICIT_DUPLICATE``); synchronizes once per buffer (the provider's host map;
        counted, O(1) on the host); no dispatch (host copies); O(size of the state).
        Raises: CopyForbiddenError (inside ``ledger.forbid_copies()``)."""
        return {
            "format": STATE_DICT_FORMAT,
            "optimizer": type(self).__name__,
            "steps": self.steps,
            "structure": self._loaded_structure or (
                None if self._structure is None else repr(self._structure)),
            "state": {
                path: {"count": st.count, "dtype": st.dtype.name, "shape": list(st.shape),
                       **{n: b.duplicate() for n, b in st.buffers.items()}}
                for path, st in self._state.items()
            },
        }

    def load_state_dict(self, state_dict: Any) -> None:
        """Replace this optimizer's state with ``state_dict`` (from :meth:`state_dict`,
        usually through ``save``/``load``), all or nothing.

        The buffers are copied into new owners (one ``EXPLICIT_DUPLICATE`` each), so the
        dict stays the caller's.  Shapes and dtypes are checked against the parameters at
        the next :meth:`step`, which must have the paths the dict names.

        Cost: allocates one owner per state buffer; copies each buffer once (recorded
        ``EXPLICIT_DUPLICATE``); synchronizes once per buffer (the provider's host map;
        counted, O(1) on the host); no dispatch (host copies); O(size of the state).

        Raises:
            ArgumentError: not a state dict of this optimizer, or an entry's keys, count,
                dtype, shape or buffer shapes do not fit (nothing changes).
            ArgumentTypeError: a buffer is not an owner or view.
            UseAfterMoveError: a buffer owner was consumed.
            CopyForbiddenError: inside ``ledger.forbid_copies()`` (nothing changes).
        """
        name = type(self).__name__
        sd = state_dict
        if not isinstance(sd, dict) or sd.get("format") != STATE_DICT_FORMAT:
            raise ArgumentError(
                f"load_state_dict: argument 'state_dict' is not an optimizer state dict "
                f"(expected a dict with format {STATE_DICT_FORMAT!r}, from state_dict())"
            )
        if sd.get("optimizer") != name:
            raise ArgumentError(f"load_state_dict: the state dict is for {sd.get('optimizer')!r}, "
                                f"this optimizer is {name!r}")
        steps, entries = sd.get("steps"), sd.get("state")
        if not _is_count(steps) or not isinstance(entries, dict):
            raise ArgumentError("load_state_dict: 'steps' must be an int >= 0 and 'state' a dict")
        kinds = dict(self._buffer_specs)
        want = sorted(kinds)
        new: dict[str, _State] = {}
        for path, entry in entries.items():
            got = sorted(set(entry) - _ENTRY_KEYS) if isinstance(entry, dict) else None
            if got != want or not _ENTRY_KEYS <= set(entry) or not _is_count(entry["count"]):
                raise ArgumentError(
                    f"load_state_dict: the state for {path} has entries {got}, this {name} "
                    f"keeps {sorted(_ENTRY_KEYS)} and {want} (same optimizer, same options?)"
                )
            try:
                dt = ts.dtype(entry["dtype"])
                shape = tuple(int(n) for n in entry["shape"])
            except (TypeError, ValueError):
                raise ArgumentError(f"load_state_dict: the state for {path} has no valid "
                                    "'dtype' and 'shape'") from None
            bufs: dict[str, Any] = {}
            for b in want:
                buf: Any = entry[b]
                expect = dt if kinds[b] == "param" else _real(dt)
                if type(buf) not in (ts.Tensor, ts.TensorView):  # (no narrowing: see _check)
                    raise ArgumentTypeError(f"load_state_dict: state[{path!r}][{b!r}] is a "
                                            f"{type(buf).__name__}, expected an owner")
                if (tuple(buf.shape), buf.dtype) != (shape, expect):
                    raise ArgumentError(
                        f"load_state_dict: state[{path!r}][{b!r}] is {buf.dtype.name} of shape "
                        f"{tuple(buf.shape)}, expected {expect.name} of shape {shape}"
                    )
                bufs[b] = buf
            new[path] = _State(bufs, shape, dt, int(entry["count"]))  # checked by _is_count
        # all checked: copy and commit
        for st in new.values():
            st.buffers = {b: t.duplicate() for b, t in st.buffers.items()}
        self._state = new
        self.steps = int(steps)  # type: ignore[arg-type]  # checked by _is_count
        self._structure = None
        structure = sd.get("structure")
        self._loaded_structure = structure if isinstance(structure, str) else None


_ENTRY_KEYS = frozenset({"count", "dtype", "shape"})


def _is_count(x: object) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool) and int(x) >= 0
