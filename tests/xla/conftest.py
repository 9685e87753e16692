"""The XLA engine suites run only where jax is installed (the ``[test]`` extra has it)."""

import jax
import pytest

jax.config.update("jax_enable_x64", True)


@pytest.fixture(scope="session")
def xla_engine():  # type: ignore[no-untyped-def]
    from tenferro_storage import runtime as rt

    return next(e.id for e in rt.engines() if e.id.kind == "xla")
