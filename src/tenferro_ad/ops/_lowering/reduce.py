"""XLA lowerings of the reductions and scans: ``ops/reduce.py`` (sum, max, min, prod,
log_softmax, the product of the others) and ``ops/scan.py`` (cumulative ops, sorts and
partitions as index results, argmax/argmin, any/all)."""

from __future__ import annotations

from typing import Any

from ..._traced._lowering import deflower
from .. import reduce as R
from .. import scan as SC


def _sum(x: Any, a: Any, *, axes: tuple[int, ...], keepdims: bool, shape: Any) -> Any:
    return x.np.sum(a, axis=axes, keepdims=keepdims)


def _reduction(name: str) -> Any:
    def rule(x: Any, a: Any, *, axes: tuple[int, ...], keepdims: bool) -> Any:
        return getattr(x.np, name)(a, axis=axes, keepdims=keepdims)

    rule.__name__ = f"lower_{name}"
    return rule


def _log_softmax(x: Any, a: Any, *, axes: tuple[int, ...] = (0,)) -> Any:
    return x.nn.log_softmax(a, axis=axes)


def _prod_others(x: Any, a: Any, *, axes: tuple[int, ...]) -> Any:
    """For every entry the product of the other entries of its group: prefix times suffix
    products (no division), as the eager kernel."""
    a = x.np.asarray(a)
    rest = [i for i in range(a.ndim) if i not in axes]
    perm = (*rest, *axes)
    moved = x.np.transpose(a, perm)
    flat = x.np.reshape(moved, (*moved.shape[: len(rest)], -1))
    if flat.shape[-1] == 0 or flat.size == 0:
        return x.np.ones(a.shape, a.dtype)
    one = x.np.ones((*flat.shape[:-1], 1), flat.dtype)
    pre = x.np.cumprod(x.np.concatenate([one, flat[..., :-1]], axis=-1), axis=-1)
    suf = x.np.cumprod(x.np.concatenate([one, flat[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    inv = [0] * a.ndim
    for k, p in enumerate(perm):
        inv[p] = k
    return x.np.transpose(x.np.reshape(pre * suf, moved.shape), inv)


def _cumsum(x: Any, a: Any, *, axis: int, reverse: bool) -> Any:
    if reverse:
        return x.np.flip(x.np.cumsum(x.np.flip(a, axis), axis=axis), axis)
    return x.np.cumsum(a, axis=axis)


def _cumprod(x: Any, a: Any, *, axis: int) -> Any:
    return x.np.cumprod(a, axis=axis)


def _argsort(x: Any, a: Any, *, axis: int, descending: bool) -> Any:
    return x.np.argsort(a, axis=axis, stable=True, descending=descending)


def _argpartition(x: Any, a: Any, *, kth: int, axis: int) -> Any:
    # a stable full sort is one valid partition: every entry before kth is <= the kth
    return x.np.argsort(a, axis=axis, stable=True)


def _arg(name: str) -> Any:
    def rule(x: Any, a: Any, *, axis: int | None, keepdims: bool) -> Any:
        return getattr(x.np, name)(a, axis=axis, keepdims=keepdims)

    rule.__name__ = f"lower_{name}"
    return rule


deflower(R.SUM, _sum)
deflower(R.MAX, _reduction("max"))
deflower(R.MIN, _reduction("min"))
deflower(R.PROD, _reduction("prod"))
deflower(R.LOG_SOFTMAX, _log_softmax)
deflower(R.PROD_OTHERS, _prod_others)
deflower(SC.CUMSUM, _cumsum)
deflower(SC.CUMPROD, _cumprod)
deflower(SC.ARGSORT, _argsort)
deflower(SC.ARGPARTITION, _argpartition)
deflower(SC.ARGMAX, _arg("argmax"))
deflower(SC.ARGMIN, _arg("argmin"))
deflower(SC.ANY, _arg("any"))
deflower(SC.ALL, _arg("all"))
