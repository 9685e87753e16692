"""XLA lowerings of ``ops/fft.py``: the complex and real transforms and the transposes
their reverse rules use."""

from __future__ import annotations

import math
from typing import Any

from ..._traced._lowering import deflower
from .. import fft as F


def _scale(lengths: tuple[int, ...], norm: str) -> float:
    n = math.prod(lengths)
    return 1.0 / n if norm == "backward" else 1.0 / math.sqrt(n) if norm == "ortho" else 1.0


def _fftn(x: Any, a: Any, *, axes: tuple[int, ...], norm: Any, inverse: bool) -> Any:
    f = x.np.fft.ifftn if inverse else x.np.fft.fftn
    return f(a, axes=axes, norm=norm)


def _rfftn(x: Any, a: Any, *, axes: tuple[int, ...], norm: Any, n: int) -> Any:
    return x.np.fft.rfftn(a, axes=axes, norm=norm)


def _irfftn(x: Any, a: Any, *, axes: tuple[int, ...], lengths: tuple[int, ...], norm: Any) -> Any:
    return x.np.fft.irfftn(a, s=lengths, axes=axes, norm=norm)


def _rfftn_t(x: Any, g: Any, *, axes: tuple[int, ...], norm: Any, n: int) -> Any:
    g = x.np.asarray(g)
    pad = [(0, 0)] * g.ndim
    pad[axes[-1]] = (0, n - g.shape[axes[-1]])
    return x.np.real(x.np.fft.fftn(x.np.pad(g, pad), axes=axes, norm=norm))


def _irfftn_t(x: Any, g: Any, *, axes: tuple[int, ...], lengths: tuple[int, ...], norm: str) -> Any:
    spec = x.np.fft.rfftn(g, axes=axes)
    n = lengths[-1]
    m = spec.shape[axes[-1]]
    mask = [2.0] * m
    mask[0] = 1.0
    if n % 2 == 0:
        mask[-1] = 1.0
    shape = [1] * spec.ndim
    shape[axes[-1]] = m
    weights = x.np.reshape(x.np.asarray(mask, dtype=spec.real.dtype), shape)
    return x.np.conj(spec * weights) * _scale(lengths, norm)


deflower(F.FFTN, _fftn)
deflower(F.RFFTN, _rfftn)
deflower(F.IRFFTN, _irfftn)
deflower(F.RFFTN_T, _rfftn_t)
deflower(F.IRFFTN_T, _irfftn_t)
