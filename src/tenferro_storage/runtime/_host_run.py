"""The host interpreter of a program, generated once per program: straight-line code.

:func:`host_runner` turns a :class:`~._program.CompiledGraph` into one generated Python
function (built on first use, cached on the program) that does exactly what
:func:`~._program.run_program` does for host memory without donation, per instruction:

* the kernel call, its static parameters passed as keywords bound at generation time
  (no per-call ``dict(params)``, no argument list built per call);
* its result adopted as an unclaimed host root (``adopt_fresh_root``: the same
  ``OPERATION_OUTPUT``/recompute allocation event and refusals as ``adopt_output``, without
  an owner, claim or descriptor object for a value the program drops again); later kernels
  read the root's own array, as eager ops read their operands' (the input bindings stay
  the read-only arrays the provider handed in);
* at a value's last use its root is dropped (its one release event); a buffer that an
  ``into`` instruction reuses is kept until that instruction writes into it and takes it over;
* the FRESH outputs are claimed at the end (``claim_deferred``: one owner each).

So every allocation event of the interpreter is still there (one per kernel result, one
release at the last use); what goes is the per-instruction Python around it.  Values live
in two lists the caller owns, so a kernel that raises leaves nothing alive once they are
cleared.  The code is this module's own (``exec`` of text built from slot numbers only).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np

from .._root import adopt_fresh_root
from .._tensor import Tensor, adopt_output, claim_deferred

_ND: Final = np.ndarray


class KernelOutputError(RuntimeError):
    """A kernel returned the wrong number of results, or not the ``out=`` array it was
    asked to write into."""


def _general(result: Any, reason: Any, name: str) -> tuple[Any, np.ndarray[Any, Any]]:
    """A kernel result ``adopt_fresh_root`` declined: ``adopt_output`` raises the precise
    refusal (an input or a live value's memory handed back, a view, an unsupported dtype)
    or owns it another way; (its owner, its writable array)."""
    if type(result) is tuple:  # several results where the program declares one
        _split(result, 1, name)
    if type(result) is not _ND:
        result = np.asarray(result)  # a numpy scalar from a rank-0 kernel: a fresh 0-d array
        root = adopt_fresh_root(result, reason, name)
        if root is not None:
            return root, result
    owner = adopt_output(result, reason, name)
    array: np.ndarray[Any, Any] = owner._meta(name).array()
    return owner, array


def _split(result: Any, n: int, name: str) -> tuple[Any, ...]:
    results = result if type(result) is tuple else (result,)
    if len(results) != n:
        raise KernelOutputError(
            f"{name}: the kernel returned {len(results)} result(s), the program declares {n}"
        )
    return results


def _not_written(name: str, into: int) -> KernelOutputError:
    return KernelOutputError(
        f"{name}: the kernel was asked to write into v{into}'s buffer (out=) and returned "
        "another array"
    )


def _own(held: Any, name: str) -> Tensor[Any, Any]:
    """The owner of a held output value (a root's one claim, minted now)."""
    return held if type(held) is Tensor else claim_deferred(held, name)


Runner = Callable[[list[Any], list[Any]], dict[int, Tensor[Any, Any]]]


def host_runner(program: Any) -> Runner:
    """The generated interpreter of ``program`` (a ``CompiledGraph`` without donated
    inputs), called as ``run(values, held)``: ``values`` holds the input arrays then
    ``None`` up to ``n_values``; ``held`` is ``[None] * n_values``.  Returns the owners of
    the FRESH output values by slot.  O(instructions) to build, once."""
    n_in = program.n_inputs
    ns: dict[str, Any] = {
        "_ND": _ND, "_root": adopt_fresh_root, "_general": _general, "_split": _split,
        "_not_written": _not_written, "_own": _own,
    }
    lines = ["def run(V, H):"]
    for c in program.constants:
        ns[f"C{c.slot}"] = c.value
        lines.append(f"    V[{c.slot}] = C{c.slot}")
    kept = program._kept  # released intermediates whose buffer a later instruction reuses

    def hold(s: int, value: str, i: int) -> None:  # adopt_fresh_root, its refusals aside
        lines.append(f"    T = {value}")
        lines.append(f"    H[{s}] = _root(T, R{i}, N{i}) if type(T) is _ND else None")
        lines.append(f"    if H[{s}] is None: H[{s}], T = _general(T, R{i}, N{i})")
        lines.append(f"    V[{s}] = T")

    for i, ins in enumerate(program.instructions):
        ns[f"K{i}"], ns[f"R{i}"], ns[f"N{i}"] = ins.kernel, ins.reason, ins.name
        args = [f"V[{s}]" for s in ins.inputs]
        for j, (key, value) in enumerate(ins.params):
            ns[f"P{i}_{j}"] = value
            args.append(f"{key}=P{i}_{j}")
        if ins.into is None:
            call = f"K{i}({', '.join(args)})"
            if len(ins.outputs) == 1:
                hold(ins.outputs[0], call, i)
            else:
                lines.append(f"    U = _split({call}, {len(ins.outputs)}, N{i})")
                for k, s in enumerate(ins.outputs):
                    hold(s, f"U[{k}]", i)
                lines.append("    U = None")
            lines.append("    T = None")
        else:
            s, into = ins.outputs[0], ins.into
            lines.append(f"    T = V[{into}]")
            lines.append(f"    if K{i}({', '.join([*args, 'out=T'])}) is not T: "
                         f"raise _not_written(N{i}, {into})")
            lines.append(f"    H[{s}], V[{s}], H[{into}], V[{into}], T = "
                         f"H[{into}], T, None, None, None")
        for r in ins.release_after:
            if r not in kept:  # (a kept buffer moves on with the instruction that reuses it)
                lines.append(f"    H[{r}] = V[{r}] = None")
    fresh = sorted({o.value for o in program.outputs
                    if o.value is not None and o.value >= n_in
                    and program.backing_input(o.value) is None})
    ns["N_out"] = program.name or "program"
    lines.append(f"    return {{{', '.join(f'{s}: _own(H[{s}], N_out)' for s in fresh)}}}")
    code = "\n".join(lines)
    exec(compile(code, f"<host run {program.name or 'program'}>", "exec"), ns)  # our own code
    run: Runner = ns["run"]
    return run


def run_on_host(
    program: Any, arrays: Sequence[np.ndarray[Any, Any]]
) -> dict[int, Tensor[Any, Any]]:
    """Run ``program`` over read-only host ``arrays`` with its generated interpreter
    (built once); every value is dropped if a kernel raises. See :func:`host_runner`."""
    run: Runner | None = program._host_run
    if run is None:
        run = host_runner(program)
        object.__setattr__(program, "_host_run", run)
    n = program.n_values
    values: list[Any] = [*arrays, *([None] * (n - len(arrays)))]
    held: list[Any] = [None] * n
    try:
        return run(values, held)
    except BaseException:
        values.clear()  # the traceback keeps the frame: drop every root it could keep alive
        held.clear()
        raise
