"""Primitives and their rule tables (the core's only view of ops).

A :class:`Primitive` is a named object holding, side by side:

* ``impl`` — the primal kernel: numpy arrays / Python scalars in, a *fresh* numpy array
  out (or, for ``alias=True`` primitives, a numpy view of input 0 — a metadata-only
  output that the eager layer records as a descriptor alias, with no allocation);
* ``vjps`` — one VJP rule per argument (``None``: no rule registered -> ``MissingRuleError``;
  :data:`NONDIFF`: the argument is never differentiated, e.g. an index or a mask);
* ``jvps`` — one JVP rule per argument (same conventions);
* the residual declaration ``save_in`` / ``save_out``: which inputs / outputs the VJP
  rules receive.  This is the *only* thing the tape retains for the op.

Rule signatures (arrays positional, static parameters keyword-only)::

    vjp_i(ops, g, *residuals, **params) -> cotangent for argument i  (or a Zero)
    jvp_i(ops, t, *residuals, **params) -> tangent contribution to the output

``residuals`` are the saved inputs (in ``save_in`` order) followed by the saved outputs
(``save_out`` order); scalars passed as parameters arrive as Python scalars.  ``ops`` is
the rule namespace: numpy-backed when nothing records the backward (arguments are numpy
arrays), handle-backed under ``create_graph``/nested ``grad`` (arguments are
``EagerTensor`` handles and every call records), so one rule serves both.  Every
primitive also receives ``**params`` in ``impl``.  Primitives are single-output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NoReturn

import numpy as np

from tenferro_storage.errors import shown

from ..errors import ArgumentError, ArgumentTypeError, IndexOutOfBoundsError, MissingRuleError

Rule = Callable[..., Any]


class _NonDiff:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NONDIFF"


NONDIFF: Final = _NonDiff()
"""Rule-table marker: this argument is not differentiable (no cotangent, no tangent)."""


class Zero:
    """A typed symbolic zero (shape, dtype): a cotangent or tangent that is known to be 0.

    Never materialized unless someone asks for the value (``Gradients.grad`` returns
    ``None`` for it; the functional API, like JAX, returns zeros for arguments the output
    does not depend on).  O(1).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    __slots__ = ("dtype", "shape")

    def __init__(self, shape: tuple[int, ...], dtype: Any) -> None:
        self.shape = shape
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"Zero(shape={self.shape}, dtype={self.dtype})"


MAX_NARGS: Final = 1 << 16
"""The most arguments a primitive with a fixed count may declare (its rule tables hold one
entry per argument); a variadic primitive takes any number."""


class Primitive:
    """A named primitive operation and its rule tables.  Create with :func:`defprimitive`.

    ``nargs`` array arguments, one output.  ``alias`` marks metadata-only outputs (a
    view of argument 0).  ``broadcasts``: arguments broadcast numpy-style; the core sums
    each argument's cotangent back to its shape (rules see output-shaped cotangents).
    ``variadic``: any number of arguments; rule 0 serves every argument and receives
    ``argnum=i``.  Rules can be (re)registered later with :meth:`defvjp` /
    :meth:`defjvp`.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) to construct (a plain record).
    Raises: nothing."""

    __slots__ = (
        "abstract", "alias", "broadcasts", "checked", "fast", "forward_saving", "impl",
        "jvp_all", "jvps", "name", "nargs", "nondiff", "save_in", "save_out", "variadic",
        "vjps",
    )

    def __init__(
        self,
        name: str,
        impl: Callable[..., Any],
        nargs: int,
        *,
        save_in: tuple[int, ...] = (),
        save_out: bool = False,
        alias: bool = False,
        broadcasts: bool = False,
        variadic: bool = False,
    ) -> None:
        if not isinstance(name, str):
            raise ArgumentTypeError(
                f"Primitive: argument 'name' must be a str, got {type(name).__name__}"
            )
        if not callable(impl):
            raise ArgumentTypeError(
                f"Primitive({name!r}): argument 'impl' must be callable, got "
                f"{type(impl).__name__}"
            )
        if type(nargs) is not int or nargs < -1:  # -1: variadic
            raise ArgumentTypeError(
                f"Primitive({name!r}): argument 'nargs' must be an int >= 0 (or -1, variadic), "
                f"got {shown(nargs)}"
            )
        if nargs > MAX_NARGS:  # the rule tables hold one entry per argument
            raise ArgumentError(
                f"Primitive({name!r}): argument 'nargs' is {nargs}, more than the {MAX_NARGS} "
                "arguments a primitive may take (use variadic=True for any number)"
            )
        if not isinstance(save_in, tuple) or not all(
            type(i) is int and 0 <= i < max(nargs, 1) for i in save_in
        ):
            raise ArgumentTypeError(
                f"Primitive({name!r}): argument 'save_in' must be a tuple of argument indices, got "
                f"{shown(save_in)}"
            )
        self.name = name
        self.broadcasts = broadcasts
        self.variadic = variadic
        self.impl = impl
        # The bare kernel for a unary ``impl`` that only promotes non-floating arguments
        # first (``impl.inexact_kernel``): eager mode calls it directly on floating input.
        self.fast: Callable[..., Any] | None = getattr(impl, "inexact_kernel", None)
        self.nargs = nargs
        self.save_in = save_in
        self.save_out = save_out
        self.alias = alias
        self.nondiff = False  # True: no argument is differentiable (never recorded)
        # True for user primitives (tenferro_ad.extend): every cotangent their rules return
        # is checked against its argument's shape and dtype before it enters the sweep
        self.checked = False
        self.vjps: list[Rule | _NonDiff | None] = [None] * max(nargs, 1)
        self.jvps: list[Rule | _NonDiff | None] = [None] * max(nargs, 1)
        # One JVP rule for all arguments at once (``jvp_all(ops, tangents, *residuals,
        # **params)``, ``tangents`` one entry per argument, ``None`` where there is none):
        # used instead of ``jvps`` when set, for rules that must see every tangent together
        # (a user's custom_jvp rule is called once per call, as in JAX).
        self.jvp_all: Rule | None = None
        # The output type without running the kernel (``abstract(*avals, **params) ->
        # (shape, dtype)``, each aval a ``(shape, dtype)`` pair or a scalar literal's value):
        # for primitives whose kernel must not run on probes -- a loop whose trip count
        # depends on the values, a custom call whose parameters already know it (nothing
        # is cached for these).  ``None``: abstract evaluation runs ``impl`` on probes.
        self.abstract: Rule | None = None
        # Traced reverse mode only: ``forward_saving(ops, *inputs, **params) -> (output,
        # saved)`` emits the primal output together with extra values its VJP rules then
        # receive as ``saved=`` (a loop's per-step carries, kept from the one forward
        # pass).  ``None``: the rules see only the declared residuals.
        self.forward_saving: Rule | None = None

    def defvjp(self, *rules: Rule | _NonDiff | None) -> Primitive:
        """Register one VJP rule per argument (``None`` leaves it missing). Returns self.

        Each rule must be callable, :data:`NONDIFF` or ``None``; everything is checked
        before anything is stored (a refused call changes nothing); a later call replaces
        the rules it gives.

        Cost: no allocation; no copy; no sync; no dispatch; O(len(rules)).

        Raises:
            ArgumentTypeError: more rules than the primitive has arguments, or a rule that
                is not callable (the message names the primitive and the argument)."""
        self._set(self.vjps, rules, "defvjp")
        return self

    def defjvp(self, *rules: Rule | _NonDiff | None) -> Primitive:
        """Register one JVP rule per argument (``None`` leaves it missing). Returns self.

        Each rule must be callable, :data:`NONDIFF` or ``None``; everything is checked
        before anything is stored (a refused call changes nothing); a later call replaces
        the rules it gives.

        Cost: no allocation; no copy; no sync; no dispatch; O(len(rules)).

        Raises:
            ArgumentTypeError: more rules than the primitive has arguments, or a rule that
                is not callable (the message names the primitive and the argument)."""
        self._set(self.jvps, rules, "defjvp")
        return self

    def _set(self, table: list[Rule | _NonDiff | None], rules: tuple[Any, ...], op: str) -> None:
        if len(rules) > max(self.nargs, 1):
            raise ArgumentTypeError(
                f"{op}({self.name!r}): argument 'rules': {len(rules)} rules for a primitive "
                f"of {max(self.nargs, 1)} argument(s) (one rule per argument)"
            )
        for i, r in enumerate(rules):
            if r is not None and not isinstance(r, _NonDiff) and not callable(r):
                raise ArgumentTypeError(
                    f"{op}({self.name!r}): argument {i} (the rule for argument {i}) must be "
                    f"callable, NONDIFF or None, got {shown(r)}"
                )
        for i, r in enumerate(rules):
            if r is not None:
                table[i] = r

    def vjp_rule(self, i: int) -> Rule | _NonDiff:
        """The VJP rule for argument ``i``; raises :class:`MissingRuleError` when absent.

        A variadic primitive has one rule for all arguments.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).

        Raises:
            MissingRuleError: no rule registered for argument ``i``.
            IndexOutOfBoundsError: ``i`` is negative or at or past the argument count.
            ArgumentTypeError: ``i`` is not an int."""
        if type(i) is not int or not (0 <= i < len(self.vjps) or (self.variadic and i >= 0)):
            self._bad_index("vjp_rule", i)
        r = self.vjps[0 if self.variadic else i]
        if r is None:
            raise MissingRuleError(self.name, "vjp", i)
        return r

    def jvp_rule(self, i: int) -> Rule | _NonDiff:
        """The JVP rule for argument ``i``; raises :class:`MissingRuleError` when absent.

        A variadic primitive has one rule for all arguments.

        Cost: no allocation; no copy; no sync; no dispatch; O(1).

        Raises:
            MissingRuleError: no rule registered for argument ``i``.
            IndexOutOfBoundsError: ``i`` is negative or at or past the argument count.
            ArgumentTypeError: ``i`` is not an int."""
        if type(i) is not int or not (0 <= i < len(self.jvps) or (self.variadic and i >= 0)):
            self._bad_index("jvp_rule", i)
        r = self.jvps[0 if self.variadic else i]
        if r is None:
            raise MissingRuleError(self.name, "jvp", i)
        return r

    def _bad_index(self, op: str, i: object) -> NoReturn:
        if type(i) is not int:
            raise ArgumentTypeError(
                f"{op}({self.name!r}): argument 'i' must be an int, got {shown(i)}"
            )
        raise IndexOutOfBoundsError(
            f"{op}({self.name!r}): argument 'i' is {i}, outside the primitive's "
            f"{max(self.nargs, 1)} argument(s) (0 to {max(self.nargs, 1) - 1})"
        )

    def __repr__(self) -> str:
        return f"Primitive({self.name!r})"


REGISTRY: dict[str, Primitive] = {}


def defprimitive(
    name: str,
    impl: Callable[..., Any],
    nargs: int,
    *,
    save_in: tuple[int, ...] = (),
    save_out: bool = False,
    alias: bool = False,
    broadcasts: bool = False,
    variadic: bool = False,
    vjp: tuple[Rule | _NonDiff | None, ...] = (),
    jvp: tuple[Rule | _NonDiff | None, ...] = (),
) -> Primitive:
    """Create and register a primitive with its residual declaration and rules."""
    if name in REGISTRY:
        raise ValueError(f"defprimitive: a primitive named {name!r} is already registered")
    p = Primitive(
        name, impl, nargs, save_in=save_in, save_out=save_out, alias=alias,
        broadcasts=broadcasts, variadic=variadic,
    )
    p.defvjp(*vjp)
    p.defjvp(*jvp)
    REGISTRY[name] = p
    return p


# -- combinators (JAX ad.deflinear / defbilinear, autograd nograd_functions) -------------


def deflinear(prim: Primitive, transpose: Rule) -> Primitive:
    """Rules for a primitive linear in its single argument: ``jvp(t) = prim(t)`` and
    ``vjp(g) = transpose(ops, g, **params)``.  No residuals are saved.

    Cost: no allocation; no copy; no sync; no dispatch; O(1): registers rules.
    Raises: nothing."""
    def jvp(ops: Any, t: Any, **params: Any) -> Any:
        return ops.apply(prim, t, **params)

    prim.save_in = ()
    prim.save_out = False
    return prim.defvjp(transpose).defjvp(jvp)


def defbilinear(prim: Primitive, vjp_lhs: Rule, vjp_rhs: Rule) -> Primitive:
    """Rules for ``prim(x, y)`` bilinear in ``(x, y)`` (mul, matmul, einsum-like):
    ``jvp = prim(tx, y) + prim(x, ty)``; VJPs are ``vjp_lhs(ops, g, x, y)`` and
    ``vjp_rhs(ops, g, x, y)``.  Saves both inputs.

    Cost: no allocation; no copy; no sync; no dispatch; O(1): registers rules.
    Raises: nothing."""

    def jvp_x(ops: Any, t: Any, x: Any, y: Any, **params: Any) -> Any:
        return ops.apply(prim, t, y, **params)

    def jvp_y(ops: Any, t: Any, x: Any, y: Any, **params: Any) -> Any:
        return ops.apply(prim, x, t, **params)

    prim.save_in = (0, 1)
    prim.save_out = False
    return prim.defvjp(vjp_lhs, vjp_rhs).defjvp(jvp_x, jvp_y)


def defpointwise(
    name: str,
    impl: Callable[..., Any],
    nargs: int,
    partials: tuple[Rule | _NonDiff | None, ...],
    *,
    save_in: tuple[int, ...] | None = None,
    save_out: bool = False,
    **kw: Any,
) -> Primitive:
    """Create a pointwise primitive whose VJP *and* JVP come from one tuple of partial
    derivatives: ``partials[i](ops, *residuals, **params)`` is ``d out / d arg_i``
    (elementwise, output-shaped or broadcastable to it), and the rules are

        vjp_i(ops, g, *residuals, **params) = ops.mul(g, partials[i](...))
        jvp_i(ops, t, *residuals, **params) = ops.mul(t, partials[i](...))

    (the core adds the per-argument JVP contributions, ``sum_i t_i * d_i``, and with
    ``broadcasts=True`` sums each cotangent back to its argument's shape, keeping the real
    part for a real argument).  Complex values follow JAX's convention for holomorphic
    functions, as the hand-written rules do: the cotangent is ``g * d``, *not*
    ``g * conj(d)`` (``jax.vjp(jnp.sin, z)[1](g) == g * cos(z)``).  ``None`` leaves a rule
    missing (:class:`MissingRuleError`), :data:`NONDIFF` marks an argument that is never
    differentiated.  ``save_in`` defaults to every argument (``()`` with ``save_out=True``
    for partials written in the output, as ``exp``'s); other keywords go to
    :func:`defprimitive`.  O(nargs) at definition; each rule costs the partial and one
    ``mul``."""
    rules = tuple(_times_partial(d) for d in partials)
    if save_in is None:
        save_in = () if save_out else tuple(range(nargs))
    return defprimitive(
        name, impl, nargs, save_in=save_in, save_out=save_out, vjp=rules, jvp=rules, **kw
    )


def _times_partial(d: Rule | _NonDiff | None) -> Rule | _NonDiff | None:
    """The rule ``(ops, g, *res, **params) -> g * d(ops, *res, **params)`` (one function
    serves as VJP and JVP: both multiply by the partial)."""
    if d is None or isinstance(d, _NonDiff):
        return d
    partial: Rule = d

    def rule(ops: Any, g: Any, *res: Any, **params: Any) -> Any:
        return ops.mul(g, partial(ops, *res, **params))

    rule.__name__ = rule.__qualname__ = f"times_{getattr(partial, '__name__', 'partial')}"
    return rule


def nondifferentiable(prim: Primitive) -> Primitive:
    """Mark every argument of ``prim`` non-differentiable (comparisons, sign, argmax...):
    its outputs carry no gradient; nothing is saved.

    Cost: no allocation; no copy; no sync; no dispatch; O(1): registers rules.
    Raises: nothing."""
    prim.save_in = ()
    prim.save_out = False
    prim.vjps = [NONDIFF] * max(prim.nargs, 1)
    prim.jvps = [NONDIFF] * max(prim.nargs, 1)
    prim.nondiff = True
    return prim


class RealTarget(tuple):  # type: ignore[type-arg]
    """An argument shape whose argument was real while the op's output is complex.

    ``unbroadcast`` to such a target also keeps only the real part of the cotangent, as
    JAX does for a real input that meets a complex value.
    """

    __slots__ = ()


class CastTarget(tuple):  # type: ignore[type-arg]
    """An argument shape whose argument's dtype differs from the op's output dtype.

    ``unbroadcast`` to such a target reduces as usual, keeps only the real part when the
    argument was real and the cotangent is complex, and casts to the argument's dtype —
    a float32 argument that met a float64 value gets a float32 cotangent, as in JAX.
    """

    dtype: Any

    def __new__(cls, shape: tuple[int, ...], dtype: Any) -> CastTarget:
        t = super().__new__(cls, shape)
        t.dtype = dtype
        return t


# the identity as a recorded op: an alias of its argument (a handle into the tape, a
# jit output that is an input); its rules pass the cotangent / tangent through
IDENTITY: Primitive = defprimitive(
    "identity",
    lambda a: np.asarray(a).view(),
    1,
    alias=True,
    vjp=(lambda ops, g: g,),
    jvp=(lambda ops, t: t,),
)
