"""Tensor networks on tenferro: the autoray backend, quimb's autodiff backend.

Needs the optional extra ``pip install 'tenferro[tn]'`` (autoray, quimb, cotengra); nothing
else in tenferro imports this package.  Registration is explicit::

    import tenferro_ad.tn as tn
    tn.register_autoray()          # autoray.do(...) on tenferro values runs tenferro's ops
    tn.register_quimb()            # TNOptimizer(..., autodiff_backend="tenferro")

``einsum(..., optimize=)`` takes cotengra optimizers and contraction trees (with slicing
under a memory bound) without this package: see :func:`tenferro_ad.einsum`.
"""

from ._autoray import BACKEND, TRANSLATED, register_autoray
from ._quimb import QUIMB_BACKEND, TenferroHandler, register_quimb

__all__ = [
    "BACKEND",
    "QUIMB_BACKEND",
    "TRANSLATED",
    "TenferroHandler",
    "register_autoray",
    "register_quimb",
]
