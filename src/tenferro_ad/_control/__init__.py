"""Loops and branches as primitives with sub-graph bodies (``tenferro_ad.lax`` is the
public surface): ``_common`` (groups, numpy runner), ``_scan``, ``_while``, ``_cond``."""
