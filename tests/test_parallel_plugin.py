"""The suite's worker count (tests/_parallel.py): parallel in CI and locally alike."""

from __future__ import annotations

from tests._parallel import workers_for


def test_ci_runs_on_two_workers_and_a_newcomer_on_the_cores() -> None:
    assert workers_for([], {"CI": "true"}, 16) == 2
    assert workers_for([], {}, 2) == 2  # the README's command on a 2-core machine
    assert workers_for(["tests"], {}, 16) == 4
    assert workers_for([], {}, 1) == 0


def test_one_file_runs_serially_and_the_variable_wins() -> None:
    assert workers_for(["tests/test_layers.py"], {}, 8) == 0
    assert workers_for(["tests/a.py::test_x", "-q"], {}, 8) == 0
    assert workers_for(["-p", "no:cacheprovider", "tests/a.py"], {}, 8) == 0
    assert workers_for(["tests/a.py", "-k", "fast", "-m", "slow"], {}, 8) == 0
    assert workers_for(["tests/a.py"], {"CI": "true"}, 8) == 0  # the runner's commands
    assert workers_for(["tests/a.py", "tests/b.py"], {}, 8) == 4
    assert workers_for([], {"TENFERRO_TEST_WORKERS": "0", "CI": "1"}, 8) == 0
    assert workers_for(["tests/a.py"], {"TENFERRO_TEST_WORKERS": "3"}, 8) == 3
