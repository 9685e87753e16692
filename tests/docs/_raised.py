"""The errors a public callable raises are errors its docstring's ``Raises:`` list names.

``_docstrings`` checks that each docstring *has* a ``Raises:`` list of exception classes;
only calling the callable shows whether the list is *complete*.  This checker calls public
callables of ``tenferro_ad`` starting from a valid call (the API fuzzer's,
:func:`tests.reliability._fuzz.valid_call`, found from the parameter names or its
``VALID_CALLS`` table, so a new op is checked without editing this file) and changing one
argument per case (:func:`cases`):

==========================  ===========================================================
case                        the changed argument
==========================  ===========================================================
``axis out of range``       each axis parameter: ``5`` (``axes``: ``(2, 3)``) for a
                            rank-2 value
``axis of a wrong type``    each axis parameter: the string ``'s'``
``value of a wrong type``   the first value argument (an owner, or a list of them):
                            ``object()``
``consumed value``          the first value argument: an owner consumed by
                            ``into_storage()``; a method's ``self``: a handle consumed
                            by ``into_value()``
``non-numeric value``       the first value argument: a numpy array of strings
==========================  ===========================================================

Two sets of callables are called (:func:`axis_callees`, :func:`value_callees`):

* every public callable of ``tenferro_ad`` that takes an axis -- the functions of its
  public modules and the methods of its public classes (``EagerTensor.sum``;
  ``Tracer.sum`` on a tracer, inside ``traced.trace``) with a parameter named in
  :data:`AXIS_PARAMS` -- each of which must have a valid call;
* every other public function of ``tenferro_ad`` and method of ``EagerTensor`` for which
  the fuzzer finds a valid call (``valid_call`` is ``None`` for the rest, which the fuzzer
  suite lists), with the value cases.

A raised class is *documented* when it, or one of its bases, is named in the list -- a
base but ``Exception``, ``BaseException`` and ``TenferroError`` (:data:`TOO_BROAD`), which
tell a reader nothing.  An axis case that raises nothing is a problem too (an out-of-range
axis accepted); a value case may (``tree_util.tree_leaves`` takes any leaf).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

import tenferro_ad as ad
from tenferro_storage.errors import TenferroError
from tests.docs._docstrings import raises_listed
from tests.docs._surface import public_methods, public_names
from tests.reliability import _fuzz

#: the parameters that name an axis of a value
AXIS_PARAMS = ("axis", "axis1", "axis2", "axes", "source", "destination")
#: bases that do not document a raised class: every error is one
TOO_BROAD: tuple[type[BaseException], ...] = (BaseException, Exception, TenferroError)
#: the receiver of a method (a rank-2 handle; the valid calls' values are rank 2 too)
RECEIVER = "handle f64 (2,3)"
#: an out-of-range value of an axis parameter (``axes`` takes a tuple), and a wrong-typed one
OUT_OF_RANGE = "int 5"
OUT_OF_RANGE_BY_PARAM = {"axes": "tuple (2,3)"}
WRONG_TYPE = "str s"
#: the replacements of the first value argument, case -> (label for a value, label for a
#: list of values: its first item replaced)
VALUE_CASES = {
    "value of a wrong type": ("object()", "list [object(), owner]"),
    "consumed value": ("consumed owner", "list [consumed owner, owner]"),
    "non-numeric value": ("numpy str (1,)", "list [numpy str (1,), owner]"),
}


def _list_of(item: str) -> Callable[[_fuzz.Ctx], list[Any]]:
    return lambda c: [_fuzz.POOL[item](c), _fuzz.POOL["owner f64 (2,3)"](c)]


#: the values of the list labels above (the fuzzer's pool holds the rest)
_LISTS = {f"list [{item}, owner]": _list_of(item)
          for item in ("object()", "consumed owner", "numpy str (1,)")}
#: the receivers that are not fuzzer labels: a tracer inside ``traced.trace`` (built from a
#: :data:`RECEIVER` handle), and a handle consumed by ``into_value()``
TRACER = "tracer"
CONSUMED_HANDLE = "consumed handle"


@dataclass(frozen=True)
class Callee:
    """One checked callable: its public ``name``, the function whose docstring is checked,
    and the fuzzer's target that calls it (a method: on a receiver)."""

    name: str
    func: Any
    target: _fuzz.Target


@dataclass(frozen=True)
class Case:
    """One call of a callee: a description and the call (a valid call, one argument changed;
    ``receiver`` overrides the target's); ``must_raise``: returning is a problem."""

    what: str
    call: _fuzz.ValidCall
    receiver: str | None
    must_raise: bool = False


def axis_params(func: Any) -> list[str]:
    """The parameters of ``func`` that name an axis (:data:`AXIS_PARAMS`), in order."""
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return []
    return [p for p in params if p in AXIS_PARAMS]


def callee(name: str, func: Any, cls: type | None = None) -> Callee:
    """The callee of ``func`` published as ``name``; ``cls``: the public class it is a
    method of (``None``: a function)."""
    params = tuple(inspect.signature(func).parameters.values())
    if cls is None:
        return Callee(name, func, _fuzz.Target(name, func, params, None, name.rsplit(".", 1)[-1]))
    attr = name.rsplit(".", 1)[-1]
    # the fuzzer's name of the EagerTensor method (its VALID_CALLS are keyed by it); a
    # Tracer method takes the same arguments
    return Callee(name, func, _fuzz.Target(f"EagerTensor.{attr}", attr, params[1:],
                                           receivers()[cls], attr, cls))


def receivers() -> dict[type, str]:
    """The classes whose methods are called, each with the receiver they are called on."""
    return {ad.EagerTensor: RECEIVER, ad.traced.Tracer: TRACER}


def _public_callees() -> Iterator[Callee]:
    """The functions of ``tenferro_ad``'s public modules and the methods of the classes of
    :func:`receivers` (classes themselves, whose constructors take no value, aside)."""
    objects = dict(public_names())
    for name, obj in objects.items():
        if name.startswith("tenferro_ad.") and inspect.isroutine(obj):
            yield callee(name, obj)
    for name, func in public_methods():
        cls = objects.get(name.rsplit(".", 1)[0])
        if name.startswith("tenferro_ad.") and isinstance(cls, type) and cls in receivers():
            yield callee(name, func, cls)


def axis_callees() -> list[Callee]:
    """Every public callable of ``tenferro_ad`` with an axis parameter."""
    return [c for c in _public_callees() if axis_params(c.func)]


def value_callees() -> list[Callee]:
    """Every other public function of ``tenferro_ad`` and method of ``EagerTensor`` that
    the fuzzer finds a valid call of."""
    return [c for c in _public_callees()
            if not axis_params(c.func) and c.target.receiver in (None, RECEIVER)
            and valid_call(c) is not None]


def valid_call(c: Callee) -> _fuzz.ValidCall | None:
    """The fuzzer's valid call of ``c`` (for a tracer method: found on a handle, whose
    method takes the same arguments)."""
    target = c.target
    if target.receiver == TRACER:
        target = _fuzz.Target(target.name, target.obj, target.params, RECEIVER, target.short,
                              target.cls)
    return _fuzz.valid_call(target)


def cases(c: Callee, call: _fuzz.ValidCall) -> Iterator[Case]:
    """The calls of ``c`` this checker makes, each from ``call`` with one argument
    changed (see the module docstring)."""
    slots = {blame.name: (where, key) for where, key, blame in _fuzz.slots(c.target, call)}
    for param in axis_params(c.func):
        where, key = slots[param]
        bad = OUT_OF_RANGE_BY_PARAM.get(param, OUT_OF_RANGE)
        yield Case(f"{param}={_show(bad)} (axis out of range)",
                   _fuzz.changed(call, where, key, bad), None, must_raise=True)
        yield Case(f"{param}={_show(WRONG_TYPE)} (axis of a wrong type)",
                   _fuzz.changed(call, where, key, WRONG_TYPE), None, must_raise=True)
    first = next((i for i, lab in enumerate(call.labels)
                  if lab.startswith(("owner ", "list [owner"))), None)
    if first is not None:
        param = next(str(b.name) for w, k, b in _fuzz.slots(c.target, call)
                     if (w, k) == ("pos", first))
        listed = call.labels[first].startswith("list")
        for what, labels in VALUE_CASES.items():
            label = labels[listed]
            yield Case(f"{param}={label} ({what})", _fuzz.changed(call, "pos", first, label),
                       None)
    if c.target.receiver == RECEIVER:
        yield Case("self=a consumed handle (consumed value)", call, CONSUMED_HANDLE)


def _show(label: str) -> str:
    return {"int 5": "5", "tuple (2,3)": "(2, 3)", "str s": "'s'"}.get(label, label)


def _value(label: str, ctx: _fuzz.Ctx) -> Any:
    return (_LISTS.get(label) or _fuzz.POOL[label])(ctx)


def _consumed_handle() -> Any:
    h = ad.exp(ad.stop_gradient(np.ones((2, 3))))
    h.into_value()
    return h


def raised(c: Callee, case: Case) -> type[BaseException] | None:
    """The class of the error calling ``c`` as ``case`` raises (``None``: it returned; what
    it returned is released)."""
    ctx = _fuzz.Ctx()
    receiver = case.receiver or c.target.receiver
    result: Any = None
    with np.errstate(all="ignore"):
        args = [_value(lab, ctx) for lab in case.call.labels]
        kwargs = {k: _value(lab, ctx) for k, lab in case.call.kw.items()}
        attr = str(c.target.obj)
        fn: Callable[..., Any]
        if receiver is None:
            fn = c.target.obj
        elif receiver == TRACER:
            inner, inner_kw = args, kwargs
            fn = ad.traced.trace(lambda t: getattr(t, attr)(*inner, **inner_kw))
            args, kwargs = [_fuzz.POOL[RECEIVER](ctx)], {}
        elif receiver == CONSUMED_HANDLE:
            fn = getattr(_consumed_handle(), attr)
        else:
            fn = getattr(_fuzz.POOL[receiver](ctx), attr)
        try:
            result = fn(*args, **kwargs)
        except Exception as e:
            return type(e)
    _fuzz._cleanup(result, [])
    return None


def documented(error: type[BaseException], listed: list[str]) -> bool:
    """Whether ``error`` or one of its bases (:data:`TOO_BROAD` aside) is in ``listed``."""
    names = {n.rsplit(".", 1)[-1] for n in listed}
    return any(k.__name__ in names for k in error.__mro__
               if k is not object and k not in TOO_BROAD)


def problems(c: Callee) -> list[str]:
    """Every error a case of ``c`` raises that its docstring does not list, and every axis
    case that raises nothing; each names the callable, the case and the class."""
    listed = (raises_listed(inspect.getdoc(c.func) or "") or ([], False))[0]
    call = valid_call(c)
    if call is None:
        return [f"{c.name}: no valid call found (add one to tests/reliability/_fuzz.py's "
                "VALID_CALLS)"]
    base = Case("the valid call", call, None)
    if (err := raised(c, base)) is not None:
        return [f"{c.name}: the valid call {call} raised {err.__name__}"]
    out = []
    for case in cases(c, call):
        err = raised(c, case)
        if err is None:
            if case.must_raise:
                out.append(f"{c.name}: {case.what} raised nothing")
        elif not documented(err, listed):
            out.append(f"{c.name}: {case.what} raised {err.__name__}, which its 'Raises:' "
                       f"does not list (it lists: {', '.join(listed) or 'nothing'})")
    return out
