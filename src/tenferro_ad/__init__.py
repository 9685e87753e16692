"""tenferro_ad: automatic differentiation on the tenferro ownership kernel."""

__all__: list[str] = []
