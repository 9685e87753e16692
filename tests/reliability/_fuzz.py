"""The API fuzzer's machinery: the public surface, the argument pool, and one checked call.

:func:`targets` enumerates every public callable of ``tenferro_storage.__all__`` and
``tenferro_ad.__all__`` (functions and classes; exception classes, enums and modules are
skipped) plus the public methods of the owner, view and handle classes, so a new public name
is fuzzed without anyone adding it.  :data:`POOL` maps a readable label to a factory for one
argument value — valid and invalid values of every kind a parameter may take (owners, views,
handles and numpy arrays of every dtype, 0-d, zero-size, NaN/inf; ints including negative
and 2**62; shapes; dtypes; strings; None; wrong types; user functions).  :func:`check_call`
builds fresh values, calls the target, and returns the failures it saw, each a ``(kind,
detail)`` pair:

``foreign-exception``  an exception escaped that is not the project's (``TenferroError``)
``message``            a project error whose message does not name the callable
``argument``           a call with exactly one argument changed from a valid call raised a
                       project error whose message does not name that argument (see
                       :func:`names_the_argument` for the convention)
``consumes-owner``     an input owner was consumed by a call that does not document it
``changes-owner``      an input owner's shape, dtype or values changed
``leaves-borrow``      an input owner is still borrowed after the call's results are gone
``leak``               the ledger's live bytes did not return to the baseline
``leaves-tape``        a tape was left installed as the current one
``hang``               the call ran longer than the time limit
``unraisable``         an exception was raised (and ignored) in a ``__del__`` or finalizer
``release``            releasing a returned view or pullback raised a non-project exception
"""

from __future__ import annotations

import enum
import gc
import inspect
import re
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.exceptions import AxisError as NumpyAxisError

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage import ledger
from tenferro_storage.errors import BorrowError, TenferroError, UseAfterMoveError

TIME_LIMIT_S = 10


class UserError(Exception):
    """Raised by the pool's user functions; it must propagate unchanged (allowed)."""


# -- the public surface -------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """One fuzzed callable: ``call(receiver, *args, **kwargs)``; ``receiver`` builds the
    object a method is called on (``None`` for functions and classes)."""

    name: str
    obj: Any
    params: tuple[inspect.Parameter, ...]
    receiver: str | None = None
    short: str = ""
    cls: Any = None


RECEIVERS = {
    "Tensor": "owner f64 (2,3)",
    "TensorView": "view f64 (2,3)",
    "TensorViewMut": "mutview f64 (2,3)",
    "EagerTensor": "handle f64 (2,3)",
}
METHOD_EXTRAS = ("__getitem__", "__setitem__", "__add__", "__matmul__", "__pow__", "__array__")


def _signature(obj: Any) -> tuple[inspect.Parameter, ...] | None:
    try:
        return tuple(inspect.signature(obj).parameters.values())
    except (TypeError, ValueError):
        return None


def targets() -> list[Target]:
    """Every public callable of both packages, and the public methods of owners/views/handles."""
    out: list[Target] = []
    for mod in (ts, ad):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if not (inspect.isroutine(obj) or inspect.isclass(obj)):
                continue  # modules, constants, typing aliases (PreparedHostRead = A | B)
            if inspect.isclass(obj) and issubclass(obj, BaseException | enum.Enum):
                continue
            params = _signature(obj)
            if params is None:
                params = (inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),)
            out.append(Target(f"{mod.__name__}.{name}", obj, params, None, name))
    classes = {"Tensor": ts.Tensor, "TensorView": ts.TensorView,
               "TensorViewMut": ts.TensorViewMut, "EagerTensor": ad.EagerTensor}
    for cname, cls in classes.items():
        for attr in sorted(set(dir(cls))):
            if attr.startswith("_") and attr not in METHOD_EXTRAS:
                continue
            member = inspect.getattr_static(cls, attr, None)
            if isinstance(member, property) or not callable(getattr(cls, attr, None)):
                continue
            if isinstance(member, classmethod | staticmethod):
                params = _signature(getattr(cls, attr))
                recv = None
            else:
                sig = _signature(getattr(cls, attr))
                params = None if sig is None else sig[1:]
                recv = RECEIVERS[cname]
            if params is None:
                params = (inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL),)
            out.append(Target(f"{cname}.{attr}", attr, params, recv, attr.strip("_"), cls))
    return out


# -- the argument pool ------------------------------------------------------------------------
@dataclass
class Ctx:
    """Values built for one call: the input owners to check afterwards, and their snapshots."""

    owners: list[Any] = field(default_factory=list)
    keep: list[Any] = field(default_factory=list)

    def owner(self, arr: Any) -> Any:
        t = ts.from_numpy(np.asarray(arr))
        self.owners.append(t)
        return t


def _arr(kind: str) -> np.ndarray[Any, Any]:
    arrays: dict[str, np.ndarray[Any, Any]] = {
        "f64 (2,3)": np.arange(6.0).reshape(2, 3) - 2.5,
        "f32 (3,)": np.array([1.0, -2.0, 0.5], np.float32),
        "c128 (2,2)": np.array([[1 + 2j, -1j], [0.5, 3 - 1j]]),
        "c64 (3,)": np.array([1 + 1j, 0, -2j], np.complex64),
        "i64 (4,)": np.array([3, 0, -1, 2], np.int64),
        "i32 (2,2)": np.array([[1, 2], [3, 4]], np.int32),
        "bool (2,)": np.array([True, False]),
        "f64 0-d": np.array(1.5),
        "f64 (0,3)": np.zeros((0, 3)),
        "f64 nan/inf (3,)": np.array([np.nan, np.inf, -np.inf]),
        "f64 (1,1,1)": np.ones((1, 1, 1)),
        "f64 (3,3)": np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]]),
    }
    return arrays[kind]


ARRAYS = ("f64 (2,3)", "f32 (3,)", "c128 (2,2)", "c64 (3,)", "i64 (4,)", "i32 (2,2)",
          "bool (2,)", "f64 0-d", "f64 (0,3)", "f64 nan/inf (3,)", "f64 (1,1,1)", "f64 (3,3)")


def _raise_user(*a: Any, **k: Any) -> Any:
    raise UserError("raised by the user's function")


POOL: dict[str, Callable[[Ctx], Any]] = {}


def _maker(kind: str, k: str) -> Callable[[Ctx], Any]:
    if kind == "owner":
        return lambda c: c.owner(_arr(k))
    if kind == "numpy":
        return lambda c: _arr(k)
    if kind == "view":
        return lambda c: c.owner(_arr(k)).as_view()
    return lambda c: ad.stop_gradient(_arr(k))


for _k in ARRAYS:
    POOL[f"owner {_k}"] = _maker("owner", _k)
    POOL[f"numpy {_k}"] = _maker("numpy", _k)
for _k in ("f64 (2,3)", "f32 (3,)", "c128 (2,2)", "f64 0-d", "f64 (0,3)"):
    POOL[f"view {_k}"] = _maker("view", _k)
    POOL[f"handle {_k}"] = _maker("handle", _k)
POOL["mutview f64 (2,3)"] = lambda c: c.owner(_arr("f64 (2,3)")).as_view_mut()
POOL["view f64 step-2**62"] = lambda c: c.owner(_arr("f64 (2,3)")).as_view()[:, :: 2**62]
POOL["consumed owner"] = lambda c: _consumed()
POOL.update({
    "numpy f16 (2,)": lambda c: np.ones(2, np.float16),
    "numpy u8 (2,)": lambda c: np.ones(2, np.uint8),
    "numpy str (1,)": lambda c: np.array(["a"]),
    "numpy object (2,)": lambda c: np.array([1, None], dtype=object),
    "numpy f64 non-contiguous": lambda c: np.arange(12.0).reshape(3, 4)[:, ::2],
    "int 0": lambda c: 0, "int 1": lambda c: 1, "int 2": lambda c: 2, "int 3": lambda c: 3,
    "int 5": lambda c: 5, "int -1": lambda c: -1, "int -2": lambda c: -2,
    "int 2**62": lambda c: 2**62, "int -2**62": lambda c: -(2**62),
    "np.int64 1": lambda c: np.int64(1), "np.int64 0": lambda c: np.int64(0),
    "bool True": lambda c: True, "bool False": lambda c: False,
    "float 0.5": lambda c: 0.5, "float -1.5": lambda c: -1.5, "float 0.0": lambda c: 0.0,
    "float nan": lambda c: float("nan"), "float inf": lambda c: float("inf"),
    "float -inf": lambda c: float("-inf"), "np.float32 2": lambda c: np.float32(2.0),
    "complex 1+2j": lambda c: 1 + 2j,
    "tuple ()": lambda c: (), "tuple (2,3)": lambda c: (2, 3), "tuple (3,2)": lambda c: (3, 2),
    "tuple (6,)": lambda c: (6,), "tuple (-1,)": lambda c: (-1,), "tuple (0,)": lambda c: (0,),
    "tuple (0,1)": lambda c: (0, 1), "tuple (1,0)": lambda c: (1, 0),
    "tuple (2**62,)": lambda c: (2**62,), "tuple (2,2**62)": lambda c: (2, 2**62),
    "tuple (-5,)": lambda c: (-5,), "tuple 33 ones": lambda c: (1,) * 33,
    "tuple (0.5,)": lambda c: (0.5,), "tuple (None,)": lambda c: (None,),
    "list []": lambda c: [], "list [owner, owner]": lambda c: [
        c.owner(_arr("f64 (2,3)")), c.owner(_arr("f64 (2,3)"))
    ],
    "list [numpy (2,3), numpy (3,)]": lambda c: [_arr("f64 (2,3)"), np.ones(3)],
    "list [handle, numpy]": lambda c: [ad.stop_gradient(_arr("f32 (3,)")), np.ones(3)],
    "dict {'w': owner}": lambda c: {"w": c.owner(_arr("f32 (3,)"))},
    "str float32": lambda c: "float32", "str float64": lambda c: "float64",
    "str int64": lambda c: "int64", "str complex128": lambda c: "complex128",
    "str bogus": lambda c: "bogus", "str empty": lambda c: "",
    "str ij,jk->ik": lambda c: "ij,jk->ik", "str i->": lambda c: "i->",
    "dtype np.float32": lambda c: np.float32, "dtype float": lambda c: float,
    "dtype ts.float64": lambda c: ts.float64, "dtype np.dtype(f2)": lambda c: np.dtype("f2"),
    "None": lambda c: None, "object()": lambda c: object(), "Ellipsis": lambda c: Ellipsis,
    "slice ::2**62": lambda c: slice(None, None, 2**62), "slice 1:": lambda c: slice(1, None),
    "fn sum": lambda c: (lambda *a, **k: ad.sum(a[0]) if a else ad.sum(ad.stop_gradient(1.0))),
    "fn identity": lambda c: (lambda *a, **k: a[0] if a else None),
    "fn returns (sum, 1)": lambda c: (lambda *a, **k: (ad.sum(a[0]), 1) if a else (None, 1)),
    "fn raises": lambda c: _raise_user,
    "reason OPERATION_OUTPUT": lambda c: ts.AllocationReason.OPERATION_OUTPUT,
    "policy save_nothing": lambda c: ad.save_nothing,
})
LABELS = tuple(POOL)


def _consumed() -> Any:
    t = ts.ones(2)
    t.into_storage()
    return t


# -- one checked call -----------------------------------------------------------------------
CONSUMES = {  # documented consuming calls: consuming an input owner is their job
    "Tensor.into_storage", "Tensor.take", "Tensor.into_real", "Tensor.into_complex",
    "tenferro_storage.view_as_complex", "tenferro_storage.view_as_real",
    "tenferro_storage.OwnedStorage", "Tensor.from_storage",
}


MUTATES = {  # documented writes into the receiver: changing it is their job (on success)
    "Tensor.fill", "TensorViewMut.fill", "Tensor.__setitem__", "TensorViewMut.__setitem__",
}


@dataclass
class Outcome:
    failures: list[tuple[str, str]]
    raised: str | None


class _Timeout(BaseException):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout


def _snapshot(t: Any) -> tuple[Any, ...] | None:
    try:
        a = t.to_numpy()
        return (tuple(a.shape), str(a.dtype), a.copy())
    except TenferroError:
        return None


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    nan_ok = a[2].dtype.kind in "fc"
    return a[0] == b[0] and a[1] == b[1] and np.array_equal(a[2], b[2], equal_nan=nan_ok)


def _walk(x: Any, depth: int = 0) -> Iterator[Any]:
    yield x
    if depth < 3 and isinstance(x, list | tuple):
        for y in x:
            yield from _walk(y, depth + 1)
    elif depth < 3 and isinstance(x, dict):
        for y in x.values():
            yield from _walk(y, depth + 1)


def _cleanup(result: Any, failures: list[tuple[str, str]]) -> None:
    for r in _walk(result):
        if isinstance(r, ad.VjpFunction | ts.TensorView | ts.TensorViewMut):
            try:
                r.release()
            except TenferroError:
                pass
            except Exception as e:
                what = f"{type(r).__name__}.release(): {type(e).__name__}: {e}"
                failures.append(("release", what))


def _operation_names(package: Any) -> frozenset[str]:
    names = {n for n in package.__all__ if callable(getattr(package, n, None))}
    classes = (ts.Tensor, ts.TensorView, ts.TensorViewMut) if package is ts else (ad.EagerTensor,)
    names |= {m for c in classes for m in dir(c) if not m.startswith("_")}
    names |= set(METHOD_EXTRAS)
    if package is ad:
        from tenferro_ad._core._primitive import REGISTRY

        names |= set(REGISTRY)
        names |= {"vjp_fn", "grad", "backward"}
    return frozenset(names)


def names_the_callable(target: Target, message: str) -> bool:
    """A project error must say which operation failed: the callable's own name (or method
    name), or — for a composite — the operation of the same package it failed in, as the
    ``"op: ..."`` prefix every project message starts with (``fliplr`` failing in ``flip``).
    Storage names do not count for an AD callable (``add("x")`` must not report
    ``from_numpy: ...``)."""
    if target.short and target.short in message:
        return True
    head = message.split(":", 1)[0].strip()
    head = head.split("(", 1)[0].split("[", 1)[0].rsplit(".", 1)[-1]
    package = ts if target.name.startswith(("tenferro_storage.", "Tensor")) else ad
    return head in _operation_names(package)


@dataclass(frozen=True)
class Blame:
    """The one argument a call changed from a valid call: the parameter's ``name`` (``None``
    for an argument of a function an AD transform returned) and its 0-based ``position``
    among the call's arguments (the receiver of a method is not counted; the item of a
    ``*args`` parameter counts where it stands in the call)."""

    name: str | None
    position: int
    method: bool = False

    def describe(self) -> str:
        if self.name is None:
            return f"argument {self.position} of the returned function"
        return f"argument {self.position} ({self.name!r})"


def names_the_argument(blame: Blame, message: str) -> bool:
    """A project error caused by one argument must say which argument, in one of the forms the
    project uses (checked only when exactly one argument of a valid call was changed):

    * ``"<op>: argument '<name>' ..."`` — by parameter name, the usual form; an item of a
      sequence parameter as ``'<name>'[<i>]`` (``"concatenate: argument 'xs'[1] has shape
      ..."``), several parameters as ``"arguments 'x' and 'y' ..."``;
    * ``"<op>: <name>=<value> ..."`` — the keyword spelling, right after the op
      (``argnums=(3,) names ...``);
    * ``"<op>: argument <i> ..."`` — by 0-based position, for arguments without a useful
      name: the arguments of a function an AD transform returned (``grad(f)(x)``) and the
      items of a ``*args`` parameter; several as ``"arguments 0 and 1 ..."``.  For a
      method, the op it runs counts the receiver as argument 0, so ``t + bad`` may report
      ``"add: argument 1 ..."`` for the method's argument 0.

    A quoted name alone (``'x'``) does not count: einsum labels and dictionary keys are
    quoted too.  For an argument of a function an AD transform returned, an error about what
    the user's function returned, or raised by an op that function called, is not checked.
    One exception, numpy's: an axis that does not fit the value's rank is
    reported on the axis (an ``AxisError``, ``"sum: argument 'axis': axis 2 is out of bounds
    for array of dimension 1"``) even when it was the value that changed."""
    positions = [blame.position] + ([blame.position + 1] if blame.method else [])
    number = "|".join(str(p) for p in positions)
    forms = [
        rf"\bargument #?(?:{number})\b",
        rf"\barguments (?:\d+(?:, | and | or ))*(?:{number})\b",
    ]
    if blame.name is not None:
        name = re.escape(blame.name)
        forms += [
            rf"\barguments? (?:'\w+'(?:\[\d+\])?(?:, | and | or ))*'{name}'",
            rf"'{name}'\[",
            rf"(?:^|: ){name}=",
        ]
    return any(re.search(f, message) for f in forms)


# Parameters whose values a transform hands to the user's ``f`` unchanged (as JAX does):
# ``vjp(f, *primals)``, ``jvp(f, primals, tangents)``, ``linearize``/``hvp``.
_PASSED_TO_F = frozenset({"primals", "tangents"})


def _raised_by_a_builtin_function(args: list[Any], e: BaseException) -> bool:
    """A builtin type or C function passed as a transform's ``f`` (``grad(float)``) raised
    its own ``TypeError``/``ValueError`` when the transform called it: the user's function's
    error, unchanged (as a Python function's ``UserError`` is).  Such a call has no Python
    frame, so the innermost frame of the traceback is the transform's own call of ``f``."""
    if not args or inspect.isfunction(args[0]) or not callable(args[0]):
        return False
    if not isinstance(e, TypeError | ValueError) or isinstance(e, TenferroError):
        return False
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and "/tenferro_ad/" in tb.tb_frame.f_code.co_filename and any(
        v is args[0] for v in tb.tb_frame.f_locals.values()
    )


def _about_the_users_function(target: Target, blame: Blame, message: str) -> bool:
    """An argument of a transformed function (``grad(f)(x)``), or a primal a transform
    passes on (``vjp(f, x)``), reaches the user's ``f``: an error about what ``f``
    returned, or one raised by an op ``f`` called (another op's name heads the message),
    is not the transform's to word."""
    if blame.name is not None and blame.name not in _PASSED_TO_F:
        return False
    if re.search(r"the function returned|must return", message):
        return True
    head = message.split(":", 1)[0].strip()
    return head != target.short and head in _operation_names(ad)


def names_an_argument(message: str) -> bool:
    """Whether ``message`` names some argument in one of the forms above."""
    return re.search(r"\barguments? (?:'\w+'|#?\d)", message) is not None


UNRAISABLE: list[str] = []


def _hook(u: Any) -> None:
    UNRAISABLE.append(
        f"{type(u.exc_value).__name__} in {getattr(u.object, '__qualname__', u.object)!r}: "
        f"{u.exc_value}"
    )


def check_call(
    target: Target,
    labels: list[str],
    kw: dict[str, str],
    follow: list[str] | None = None,
    blame: Blame | None = None,
) -> Outcome:
    """Build the values named by ``labels``/``kw``, call ``target``, and judge the call.

    ``follow``: when the call returns a plain function (an AD entry point's transformed
    function), call it with these values too and judge both calls together.  ``blame``: the
    one argument this call changed from a valid call; a project error must then name it
    (:func:`names_the_argument`).  Every value built here is gone (the inner frame has
    returned) before the ledger is read.
    """
    old_hook = sys.unraisablehook
    sys.unraisablehook = _hook
    UNRAISABLE.clear()
    base_live = ledger.live_bytes()
    tape_before = ad.current_tape()
    try:
        outcome = _call(target, labels, kw, follow, blame)
        failures = outcome.failures
        if ad.current_tape() is not tape_before:
            failures.append(("leaves-tape", f"current_tape() is {ad.current_tape()!r}"))
        if ledger.live_bytes() != base_live:
            gc.collect()
        if ledger.live_bytes() > base_live:
            failures.append(("leak", f"{ledger.live_bytes() - base_live} live bytes left"))
        if UNRAISABLE:
            failures.append(("unraisable", UNRAISABLE[0]))
    finally:
        sys.unraisablehook = old_hook
    return outcome


def _call(
    target: Target,
    labels: list[str],
    kw: dict[str, str],
    follow: list[str] | None,
    blame: Blame | None,
) -> Outcome:
    failures: list[tuple[str, str]] = []
    raised: str | None = None
    ctx = Ctx()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIME_LIMIT_S)
    result: Any = None
    try:
        with np.errstate(all="ignore"):
            args = [POOL[lab](ctx) for lab in labels]
            kwargs = {k: POOL[lab](ctx) for k, lab in kw.items()}
            snaps = [(t, _snapshot(t)) for t in ctx.owners]
            fn: Any = target.obj
            if target.receiver is not None:
                ctx.keep.append(POOL[target.receiver](ctx))
                snaps = [(t, _snapshot(t)) for t in ctx.owners]
                fn = getattr(ctx.keep[-1], target.obj)
            elif isinstance(target.obj, str):  # a classmethod or staticmethod
                fn = getattr(target.cls, target.obj)
            try:
                result = fn(*args, **kwargs)
                if follow is not None and inspect.isfunction(result):
                    inner = [POOL[lab](ctx) for lab in follow]
                    snaps += [(t, _snapshot(t)) for t in ctx.owners[len(snaps):]]
                    result = result(*inner)
            except _Timeout:
                raise
            except np.exceptions.ComplexWarning:
                pass  # a complex-to-real cast's documented warning (numpy's), an error here
            except (TenferroError, UserError) as e:
                raised = f"{type(e).__name__}: {e}"
                if isinstance(e, TenferroError) and not names_the_callable(target, str(e)):
                    failures.append(("message", raised))
                elif (
                    isinstance(e, TenferroError)
                    and blame is not None
                    and not names_the_argument(blame, str(e))
                    and not (isinstance(e, NumpyAxisError) and names_an_argument(str(e)))
                    and not _about_the_users_function(target, blame, str(e))
                ):
                    failures.append(("argument", f"{raised} [changed: {blame.describe()}]"))
            except BaseException as e:
                raised = f"{type(e).__name__}: {e}"
                if not _raised_by_a_builtin_function(args, e):
                    failures.append(("foreign-exception", raised))
            _cleanup(result, failures)
            result = fn = None
            args = kwargs = None  # type: ignore[assignment]
            for v in ctx.keep:
                if isinstance(v, ts.TensorView | ts.TensorViewMut):
                    v.release()
            ctx.keep.clear()
            for t, before in snaps:
                if before is None:
                    continue
                try:
                    try:
                        after = t.to_numpy()
                    except BorrowError:
                        gc.collect()  # a view kept alive by a reference cycle (a traceback)
                        after = t.to_numpy()
                except UseAfterMoveError:
                    if raised is not None or target.name not in CONSUMES:
                        what = raised or "the call succeeded"
                        failures.append(("consumes-owner", f"an input owner was consumed ({what})"))
                    continue
                except BorrowError as e:
                    failures.append(("leaves-borrow", str(e)))
                    continue
                mutating = target.name in MUTATES and raised is None
                now = (tuple(after.shape), str(after.dtype), after)
                if not mutating and not _same(before, now):
                    what = raised or "the call succeeded"
                    failures.append(("changes-owner", f"an input owner changed ({what})"))
    except _Timeout:
        failures.append(("hang", f"no return within {TIME_LIMIT_S} s"))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return Outcome(failures, raised)


# -- one argument at a time ------------------------------------------------------------------
# Values only the valid calls below use.  They are kept out of LABELS so the generated calls
# of the main fuzz test stay the same as before.
POOL.update({
    "view c128 (2,2) (valid)": lambda c: c.owner(_arr("c128 (2,2)")).as_view(),
    "view f64 (3,2)": lambda c: c.owner(np.arange(6.0).reshape(3, 2)).as_view(),
    "owner f64 (3,2)": lambda c: c.owner(np.arange(6.0).reshape(3, 2)),
    "numpy i64 zeros (2,3)": lambda c: np.zeros((2, 3), np.int64),
    "tuple (owner f64 (2,3),)": lambda c: (c.owner(_arr("f64 (2,3)")),),
    "storage 48 bytes": lambda c: ts.allocate_storage(48),
    "str s": lambda c: "s",
    "owner bool (3,)": lambda c: c.owner(np.array([True, False, True])),
})


@dataclass
class ValidCall:
    """A call of a target that succeeds: positional labels, keyword labels, the arguments of
    the function it returns (``None`` when it returns none), and the receiver of a method."""

    labels: list[str]
    kw: dict[str, str] = field(default_factory=dict)
    follow: list[str] | None = None
    receiver: str | None = None


# The valid value tried first for a parameter of this name (anything else: an f64 owner).
VALID_BY_NAME: dict[str, str] = {
    "z": "owner c128 (2,2)", "axis": "int 0", "shape": "tuple (2,3)", "dtype": "str float64",
    "f": "fn sum", "fun": "fn sum", "xs": "list [owner, owner]", "key": "int 0",
    "label": "str s", "n": "int 2", "value": "float 0.5", "fill_value": "float 0.5",
    "reason": "reason OPERATION_OUTPUT", "nbytes": "int 2", "start": "int 0", "stop": "int 3",
    "spec": "str float64", "array": "numpy f64 (2,3)", "tree": "list [owner, owner]",
    "view": "view c128 (2,2) (valid)", "s": "int 1", "source": "int 0", "destination": "int 1",
    "kth": "int 1", "repeats": "int 2", "shift": "int 1", "reps": "int 2", "lo": "float -1.5",
    "hi": "float 0.5", "indices_or_sections": "int 2", "pad_width": "int 1",
    "condlist": "list [owner, owner]", "choicelist": "list [owner, owner]",
    "cond": "owner bool (2,)",
    "re": "owner f64 (2,3)", "im": "owner f64 (2,3)", "subscripts": "str ij,jk->ik",
    "primals": "tuple (owner f64 (2,3),)", "tangents": "tuple (owner f64 (2,3),)",
    "offset": "int 0", "storage": "storage 48 bytes", "name": "str s", "claim": "None",
    "element_range": "None", "plan": "None", "path": "str s",
}
# The items of a ``*args`` parameter of this name in a valid call.
VALID_ITEMS: dict[str, list[str]] = {
    "xs": ["owner f64 (2,3)"], "operands": ["owner f64 (2,3)", "owner f64 (3,3)"],
    "shape": ["int 3", "int 2"], "axes": [], "primals": ["owner f64 (2,3)"],
    "labels": ["str s"], "args": [],
}
# Targets whose valid call the rules above do not find.
VALID_CALLS: dict[str, ValidCall] = {
    "tenferro_storage.CheckedInjectiveStrided": ValidCall(["int 0", "tuple (2,3)", "tuple (3,2)"]),
    "tenferro_storage.CheckedStrided": ValidCall(["int 0", "tuple (2,3)", "tuple (3,2)"]),
    "tenferro_storage.DType": ValidCall(["str float64"]),
    "tenferro_storage.view_as_complex": ValidCall(["view f64 (3,2)"]),
    "tenferro_ad.where": ValidCall(["owner bool (3,)", "owner f64 (2,3)", "owner f64 (2,3)"]),
    "tenferro_ad.Primitive": ValidCall(["str s", "fn identity", "int 1"]),
    "tenferro_ad.array_split": ValidCall(["owner f64 (2,3)", "int 3"], {"axis": "int 1"}),
    "tenferro_ad.dsplit": ValidCall(["owner f64 (1,1,1)", "int 1"]),
    "tenferro_ad.dot": ValidCall(["owner f64 (2,3)", "owner f64 (3,3)"]),
    "tenferro_ad.matmul": ValidCall(["owner f64 (2,3)", "owner f64 (3,3)"]),
    "tenferro_ad.hsplit": ValidCall(["owner f64 (2,3)", "int 3"]),
    "tenferro_ad.name": ValidCall(["handle f64 (2,3)", "str s"]),
    "tenferro_ad.swapaxes": ValidCall(["owner f64 (2,3)", "int 0", "int 1"]),
    "tenferro_ad.take_along_axis": ValidCall(
        ["owner f64 (2,3)", "numpy i64 zeros (2,3)", "int 0"]
    ),
    "tenferro_ad.view_as_complex": ValidCall(["owner f64 (3,2)"]),
    "tenferro_ad.vsplit": ValidCall(["owner f64 (2,3)", "int 2"]),
    "Tensor.__matmul__": ValidCall(["owner f64 (3,3)"]),
    "TensorView.__matmul__": ValidCall(["owner f64 (3,3)"]),
    "TensorViewMut.__matmul__": ValidCall(["owner f64 (3,3)"]),
    "EagerTensor.__matmul__": ValidCall(["owner f64 (3,3)"]),
    "EagerTensor.dot": ValidCall(["owner f64 (3,3)"]),
    "EagerTensor.swapaxes": ValidCall(["int 0", "int 1"]),
    **{f"{c}.{m}": v for c in ("Tensor", "TensorView", "TensorViewMut") for m, v in (
        ("dot", ValidCall(["owner f64 (3,3)"])), ("swapaxes", ValidCall(["int 0", "int 1"])),
    )},
}
# Targets that have no valid call at all: the reason.
NO_VALID_CALL: dict[str, str] = {
    **{f"tenferro_ad.{n}": "made by the library, refused when constructed directly"
       for n in ("AdValueRecord", "ValueGuard", "VjpFunction", "EagerTensor")},
    **{f"tenferro_storage.{n}": "made by the library, refused when constructed directly"
       for n in ("OwnedStorage", "Contiguous", "Strided")},
    "tenferro_storage.load": "needs a file written by save (tests/storage/test_save.py "
                             "covers its refusals)",
    **{f"{c}.__array__": "implicit conversion to numpy is always refused (no implicit copy)"
       for c in ("Tensor", "TensorView", "TensorViewMut", "EagerTensor")},
}


def _valid_guess(target: Target) -> ValidCall:
    call = ValidCall([])
    for p in target.params:
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            call.labels += VALID_ITEMS.get(p.name, ["owner f64 (2,3)"])
        elif p.kind is inspect.Parameter.VAR_KEYWORD or p.default is not inspect.Parameter.empty:
            continue
        elif p.kind is inspect.Parameter.KEYWORD_ONLY:
            call.kw[p.name] = VALID_BY_NAME.get(p.name, "owner f64 (2,3)")
        else:
            call.labels.append(VALID_BY_NAME.get(p.name, "owner f64 (2,3)"))
    return call


def slots(target: Target, call: ValidCall) -> list[tuple[str, str | int, Blame]]:
    """The arguments of ``call`` one may change, each ``(where, key, blame)``: ``where`` is
    ``"pos"`` (key: index into the labels), ``"kw"`` (key: the keyword; an optional
    parameter the valid call left out is added by keyword), ``"append"`` (one more item of
    an empty ``*args``) or ``"follow"`` (key: index into the returned function's
    arguments)."""
    out: list[tuple[str, str | int, Blame]] = []
    method = target.receiver is not None
    i = 0
    for index, p in enumerate(target.params):
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            start = i
            while i < len(call.labels):
                out.append(("pos", i, Blame(p.name, i, method)))
                i += 1
            if i == start:
                out.append(("append", i, Blame(p.name, i, method)))
        elif p.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        elif p.kind is not inspect.Parameter.KEYWORD_ONLY and i < len(call.labels):
            out.append(("pos", i, Blame(p.name, index, method)))
            i += 1
        elif p.kind is not inspect.Parameter.POSITIONAL_ONLY:
            out.append(("kw", p.name, Blame(p.name, index, method)))
    for j in range(len(call.follow or ())):
        out.append(("follow", j, Blame(None, j)))
    return out


def changed(call: ValidCall, where: str, key: str | int, label: str) -> ValidCall:
    """``call`` with the one argument at ``(where, key)`` replaced by (or set to) ``label``."""
    new = ValidCall(list(call.labels), dict(call.kw), None if call.follow is None
                    else list(call.follow), call.receiver)
    if where == "pos":
        new.labels[int(key)] = label
    elif where == "append":
        new.labels.append(label)
    elif where == "kw":
        new.kw[str(key)] = label
    else:
        assert new.follow is not None
        new.follow[int(key)] = label
    return new


# A builtin type passed as the user's function (``grad(float)``) raises its own TypeError
# from inside the call, as any user function may: not drawn for these parameters.
FUNCTION_PARAMS = frozenset({"f", "fun"})


def values_for(blame: Blame) -> tuple[str, ...]:
    """The labels the one-changed-argument test draws for the argument ``blame``."""
    if blame.name in FUNCTION_PARAMS:
        return tuple(lab for lab in LABELS if not lab.startswith("dtype "))
    return LABELS


def _succeeds(target: Target, call: ValidCall) -> bool:
    probe = Target(target.name, target.obj, target.params, call.receiver or target.receiver,
                   target.short, target.cls)
    outcome = check_call(probe, call.labels, call.kw, call.follow)
    return outcome.raised is None and not outcome.failures


_VALID: dict[str, ValidCall | None] = {}


def valid_call(target: Target) -> ValidCall | None:
    """A call of ``target`` that succeeds (cached), or ``None`` when neither the rules above
    nor ``VALID_CALLS`` give one.  For a callable that returns a function (an AD transform)
    ``follow`` holds valid arguments for that function."""
    if target.name in _VALID:
        return _VALID[target.name]
    call = VALID_CALLS.get(target.name) or _valid_guess(target)
    found: ValidCall | None = None
    if _succeeds(target, call):
        found = call
        transform = ValidCall(list(call.labels), dict(call.kw), ["owner f64 (2,3)"], call.receiver)
        if _returns_function(target, call) and _succeeds(target, transform):
            found = transform
    _VALID[target.name] = found
    return found


def _returns_function(target: Target, call: ValidCall) -> bool:
    if target.receiver is not None or not callable(target.obj) or inspect.isclass(target.obj):
        return False
    ctx = Ctx()
    try:
        with np.errstate(all="ignore"):
            args = [POOL[lab](ctx) for lab in call.labels]
            kwargs = {k: POOL[lab](ctx) for k, lab in call.kw.items()}
            return inspect.isfunction(target.obj(*args, **kwargs))
    except Exception:
        return False
