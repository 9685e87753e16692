"""XLA lowering rules of every op family, one module per family (``deflower`` keyed by
the family's :class:`~tenferro_ad._core._primitive.Primitive` objects; the table and the
lowerer are ``_traced/_lowering.py``).  Importing this package registers them all."""

from . import elementwise, fft, linalg, reduce, shape

__all__ = ["elementwise", "fft", "linalg", "reduce", "shape"]
