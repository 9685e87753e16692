"""``tenferro_storage.random``: an explicit generator, reproducible streams, no fixed default
seed, each draw one recorded allocation, and the distributions right (fixed-seed
statistical tests against scipy.stats, so they are deterministic)."""

from __future__ import annotations

import math
import pathlib
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from scipy import stats

import tenferro_storage as ts
from tenferro_storage import ledger
from tenferro_storage.errors import BorrowError, DTypeError, LayoutError

A = ledger.AllocationReason
Draw = Callable[[ts.random.Generator], ts.Tensor]

DRAWS: dict[str, Draw] = {
    "normal": lambda r: r.normal((3, 4)),
    "normal-f32": lambda r: r.normal(5, loc=1.0, scale=2.0, dtype="float32"),
    "normal-c64": lambda r: r.normal(5, dtype="complex64"),
    "normal-c128": lambda r: r.normal((2, 2), scale=3.0, dtype="complex128"),
    "uniform": lambda r: r.uniform((4,), low=-1.0, high=2.0),
    "uniform-f32": lambda r: r.uniform(6, dtype="float32"),
    "truncated_normal": lambda r: r.truncated_normal(-0.5, 1.5, (7,)),
    "integers": lambda r: r.integers(3, 9, (5,), dtype="int32"),
    "bernoulli": lambda r: r.bernoulli(0.3, (8,)),
    "bernoulli-array": lambda r: r.bernoulli(np.array([0.1, 0.9]), dtype="float32"),
    "categorical": lambda r: r.categorical(np.log(np.full((3, 4), 0.25))),
    "permutation": lambda r: r.permutation(10),
    "permutation-array": lambda r: r.permutation(np.arange(12.0).reshape(6, 2)),
}


@pytest.mark.parametrize("name", list(DRAWS), ids=list(DRAWS))
def test_each_draw_is_one_recorded_allocation_and_the_same_seed_repeats_it(name: str) -> None:
    """Same seed, same draws (bit for bit); one OPERATION_OUTPUT allocation named
    random.<method>, no copy; the next draw of a stream differs from the first."""
    draw = DRAWS[name]
    with ledger.capture() as rec:
        a = draw(ts.random.default_rng(42))
    assert rec.allocations == Counter({A.OPERATION_OUTPUT: 1}) and rec.copies == Counter()
    method = name.split("-")[0]
    assert [e.operation for e in rec.events] == [f"random.{method}"]
    r = ts.random.default_rng(42)
    b, c = draw(r), draw(r)
    assert a.to_numpy().tobytes() == b.to_numpy().tobytes()
    if a.to_numpy().size > 4:
        assert a.to_numpy().tobytes() != c.to_numpy().tobytes()


def test_there_is_no_fixed_default_seed() -> None:
    """default_rng() takes fresh entropy: two generators made without a seed differ (the
    old module functions drew the same values on every call)."""
    a = ts.random.default_rng().normal(16).to_numpy()
    b = ts.random.default_rng().normal(16).to_numpy()
    assert not np.array_equal(a, b)
    with pytest.raises(TypeError, match="seed"):
        ts.random.default_rng(1.5)  # type: ignore[arg-type]


def test_the_stream_state_saves_and_resumes(tmp_path: pathlib.Path) -> None:
    """A generator's state is plain data: saved with ts.save, restored into a new generator,
    the stream continues exactly where it was."""
    r = ts.random.default_rng(7)
    r.normal(10)
    ts.save(tmp_path / "rng", {"rng": r.state})
    expected = r.normal(5).to_numpy()
    fresh = ts.random.default_rng(0)
    fresh.state = ts.load(tmp_path / "rng")["rng"]
    np.testing.assert_array_equal(fresh.normal(5).to_numpy(), expected)
    with pytest.raises(ValueError, match=r"Generator\.state"):
        fresh.state = {"bit_generator": "MT19937"}


def test_spawned_streams_are_independent_and_reproducible() -> None:
    kids = ts.random.default_rng(3).spawn(2)
    again = ts.random.default_rng(3).spawn(2)
    x, y = (k.normal(1000).to_numpy() for k in kids)
    assert abs(np.corrcoef(x, y)[0, 1]) < 0.1
    np.testing.assert_array_equal(again[0].normal(1000).to_numpy(), x)


def test_floating_draws_are_made_in_the_requested_dtype() -> None:
    """float32 draws come from numpy's float32 generators (not rounded float64 draws); the
    float64 ones are numpy's own normal/uniform for the same seed."""
    got = ts.random.default_rng(5).normal(8, dtype="float32").to_numpy()
    ref = np.random.default_rng(5).standard_normal(8, dtype=np.float32)
    assert got.dtype == np.float32 and np.array_equal(got, ref)
    got64 = ts.random.default_rng(5).normal(8, loc=1.0, scale=3.0).to_numpy()
    np.testing.assert_array_equal(got64, np.random.default_rng(5).normal(1.0, 3.0, 8))
    u = ts.random.default_rng(5).uniform(8, low=2.0, high=3.0, dtype="float32").to_numpy()
    assert u.dtype == np.float32 and np.all((u >= 2.0) & (u <= 3.0))


N = 20_000


def _ks(sample: np.ndarray, cdf: Any) -> None:
    assert stats.kstest(sample, cdf).pvalue > 1e-3


def test_normal_and_uniform_follow_their_distributions() -> None:
    r = ts.random.default_rng(11)
    _ks(r.normal(N, loc=2.0, scale=0.5).to_numpy(), stats.norm(2.0, 0.5).cdf)
    _ks(r.normal(N, dtype="float32").to_numpy().astype(float), stats.norm().cdf)
    _ks(r.uniform(N, low=-3.0, high=1.0).to_numpy(), stats.uniform(-3.0, 4.0).cdf)
    z = r.normal(N, scale=2.0, loc=1.0, dtype="complex128").to_numpy()
    _ks(z.real, stats.norm(1.0, 2.0 / math.sqrt(2)).cdf)
    _ks(z.imag, stats.norm(0.0, 2.0 / math.sqrt(2)).cdf)
    assert abs(np.corrcoef(z.real, z.imag)[0, 1]) < 0.05


@pytest.mark.parametrize(
    ("lower", "upper"),
    [(-0.5, 1.5), (-3.0, 3.0), (-math.inf, math.inf), (0.0, 0.3), (0.5, 4.0), (2.0, math.inf),
     (8.0, 8.5), (8.0, math.inf), (-math.inf, -6.0), (-2.0, -1.9), (30.0, 31.0)],
)
def test_truncated_normal_follows_scipy_truncnorm_in_every_regime(
    lower: float, upper: float
) -> None:
    """Straddling zero (narrow and wide), one-sided tails near and far (8 and 30 standard
    deviations out), left tails: KS test against scipy.stats.truncnorm; all draws in bounds."""
    x = ts.random.default_rng(13).truncated_normal(lower, upper, N, loc=1.0, scale=2.0)
    s = x.to_numpy()
    assert np.all((s >= 1.0 + 2.0 * lower) & (s <= 1.0 + 2.0 * upper))
    _ks(s, stats.truncnorm(lower, upper, loc=1.0, scale=2.0).cdf)


def test_truncated_normal_in_float32_stays_in_bounds() -> None:
    s = ts.random.default_rng(1).truncated_normal(-1.0, 1.0, 1000, dtype="float32").to_numpy()
    assert s.dtype == np.float32 and np.all(np.abs(s) <= 1.0)


def test_integers_cover_their_range_with_and_without_endpoint() -> None:
    r = ts.random.default_rng(2)
    a = r.integers(-2, 3, N).to_numpy()
    assert a.dtype == np.int64 and set(np.unique(a)) == {-2, -1, 0, 1, 2}
    b = r.integers(-2, 3, N, endpoint=True, dtype="int32").to_numpy()
    assert b.dtype == np.int32 and set(np.unique(b)) == {-2, -1, 0, 1, 2, 3}
    assert stats.chisquare(np.bincount(a + 2)).pvalue > 1e-3
    assert set(np.unique(r.integers(4, shape=100).to_numpy())) == {0, 1, 2, 3}


def test_bernoulli_frequencies_and_broadcast_probabilities() -> None:
    r = ts.random.default_rng(3)
    x = r.bernoulli(0.3, N).to_numpy()
    assert x.dtype == np.bool_ and abs(x.mean() - 0.3) < 4 * math.sqrt(0.21 / N)
    p = ts.from_numpy(np.array([0.0, 0.5, 1.0]))
    y = r.bernoulli(p, (N, 3), dtype="float64").to_numpy()
    assert y[:, 0].sum() == 0 and y[:, 2].sum() == N and abs(y[:, 1].mean() - 0.5) < 0.02


def test_categorical_draws_softmax_frequencies_along_the_axis() -> None:
    """Frequencies match softmax(logits) (chi-square); -inf is never drawn; ``axis`` and
    ``shape`` follow JAX (batch shape without the axis; a shape that broadcasts from it)."""
    r = ts.random.default_rng(4)
    logits = np.log(np.array([0.1, 0.2, 0.7]))
    x = r.categorical(logits, shape=(N,)).to_numpy()
    assert x.dtype == np.int64
    assert stats.chisquare(np.bincount(x, minlength=3), N * np.exp(logits)).pvalue > 1e-3
    masked = r.categorical(np.array([0.0, -np.inf, 0.0]), shape=(1000,)).to_numpy()
    assert 1 not in masked
    lg = np.zeros((3, 2, 5))
    lg[:, 1, :] = -np.inf
    lg[:, 1, 4] = 0.0
    out = r.categorical(lg, axis=-1).to_numpy()
    assert out.shape == (3, 2) and np.all(out[:, 1] == 4)
    assert r.categorical(lg, axis=1).shape == (3, 5)
    assert r.categorical(lg, shape=(7, 3, 2)).shape == (7, 3, 2)
    with pytest.raises(LayoutError, match="batch shape"):
        r.categorical(lg, shape=(2, 3))


def test_permutation_and_shuffle() -> None:
    """permutation(n) permutes range(n); permutation(owner) permutes its rows into a new
    owner (the input unchanged); shuffle permutes an owner in place, through an exclusive
    borrow, with no allocation event, and refuses a borrowed owner."""
    r = ts.random.default_rng(5)
    p = r.permutation(50).to_numpy()
    assert sorted(p) == list(range(50)) and not np.array_equal(p, np.arange(50))
    x = ts.from_numpy(np.arange(20.0).reshape(10, 2))
    y = r.permutation(x).to_numpy()
    assert sorted(map(tuple, y)) == sorted(map(tuple, x.to_numpy()))
    np.testing.assert_array_equal(x.to_numpy(), np.arange(20.0).reshape(10, 2))
    cols = r.permutation(x, axis=1).to_numpy()
    assert sorted(cols[0]) == [0.0, 1.0]
    span = x.span
    with ledger.capture() as rec:
        r.shuffle(x)
    assert rec.allocations == Counter() and rec.copies == Counter() and x.span == span
    assert sorted(map(tuple, x.to_numpy())) == [(2.0 * i, 2.0 * i + 1) for i in range(10)]
    before = x.to_numpy().copy()
    v = x.as_view()
    with pytest.raises(BorrowError):
        r.shuffle(x)
    v.release()
    np.testing.assert_array_equal(x.to_numpy(), before)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda r: r.normal(2, dtype="int64"), DTypeError, "float or complex dtype"),
        (lambda r: r.uniform(2, dtype="complex64"), DTypeError, "float dtype"),
        (lambda r: r.uniform(2, low=2.0, high=1.0), ValueError, "'low'"),
        (lambda r: r.normal(2, scale=math.nan), ValueError, "'scale' must be finite"),
        (lambda r: r.normal(-1), LayoutError, "shape"),
        (lambda r: r.truncated_normal(1.0, 1.0), ValueError, "lower < upper"),
        (lambda r: r.integers(5, 2), ValueError, "random.integers"),
        (lambda r: r.integers(5, dtype="float64"), DTypeError, "integer dtype"),
        (lambda r: r.bernoulli(1.5), ValueError, r"\[0, 1\]"),
        (lambda r: r.bernoulli(np.ones(3) / 2, (2,)), LayoutError, "broadcast"),
        (lambda r: r.categorical(np.zeros(3), axis=1), LayoutError, "axis"),
        (lambda r: r.permutation(-1), ValueError, ">= 0"),
        (lambda r: r.shuffle(np.zeros(3)), TypeError, "permutation"),
    ],
)
def test_bad_arguments_name_the_operation_and_argument(
    call: Callable[[Any], Any], error: type[Exception], message: str
) -> None:
    with ledger.capture() as rec, pytest.raises(error, match=message):
        call(ts.random.default_rng(0))
    assert rec.allocations == Counter()


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda r: r.spawn(-1), ValueError, r"random\.spawn: argument 'n' must be >= 0"),
        (lambda r: r.spawn("a"), TypeError, r"random\.spawn: argument 'n' must be an integer"),
        (lambda r: r.spawn(1.5), TypeError, r"random\.spawn: argument 'n' .* got float"),
        (lambda r: r.spawn(True), TypeError, r"random\.spawn: argument 'n' .* got bool"),
        (lambda r: r.integers(1.5, 3), TypeError, r"random\.integers: argument 'low'"),
        (lambda r: r.integers(1, 3.0), TypeError, r"random\.integers: argument 'high'"),
        (lambda r: r.normal(loc="a"), TypeError, r"random\.normal: argument 'loc' must be a real"),
        (lambda r: r.normal(loc=None), TypeError, r"random\.normal: argument 'loc'"),
        (lambda r: r.normal(2, scale=-1.0), ValueError, r"random\.normal: argument 'scale' .*>= 0"),
        (lambda r: r.normal(2, scale=-1.0, dtype="float32"), ValueError, r"'scale' .*>= 0"),
        (lambda r: r.uniform(low=None), TypeError, r"random\.uniform: argument 'low'"),
        (lambda r: r.truncated_normal("a", 1.0), TypeError, r"truncated_normal: argument 'lower'"),
        (lambda r: r.normal(2, dtype="int8"), DTypeError, r"random\.normal: argument 'dtype': "
                                                          r"unknown or unsupported dtype 'int8'"),
        (lambda r: r.integers(3, dtype="foo"), DTypeError, r"random\.integers: argument 'dtype'"),
        (lambda r: r.categorical(np.zeros((2, 3)), axis=1.5), TypeError,
         r"random\.categorical: argument 'axis' must be an integer, got float"),
        (lambda r: r.permutation(np.zeros((2, 3)), axis=1.5), TypeError,
         r"random\.permutation: argument 'axis'"),
        (lambda r: r.permutation(np.arange(3, dtype=np.int8)), DTypeError,
         r"random\.permutation: argument 'x' has numpy dtype int8"),
    ],
)
def test_arguments_numpy_refuses_are_refused_naming_the_method_and_argument(
    call: Callable[[Any], Any], error: type[Exception], message: str
) -> None:
    r = ts.random.default_rng(0)
    state = r.state
    with ledger.capture() as rec, pytest.raises(error, match=message):
        call(r)
    assert rec.allocations == Counter() and r.state == state  # nothing drawn, nothing made


def test_numpy_integers_and_reals_are_accepted_where_numpy_accepts_them() -> None:
    r, n = ts.random.default_rng(0), np.random.default_rng(0)
    assert len(r.spawn(np.int64(2))) == 2 and r.spawn(0) == []
    r, n = ts.random.default_rng(0), np.random.default_rng(0)
    assert r.integers(np.int32(1), np.int64(9)).item() == n.integers(1, 9)
    assert r.normal(loc=np.float32(1.0), scale=2).item() == n.normal(np.float32(1.0), 2)
    got = r.categorical(np.zeros((2, 3)), axis=np.int64(0)).to_numpy()
    assert got.shape == (3,) and set(got) <= {0, 1}
    x = ts.from_numpy(np.arange(6.0).reshape(2, 3))
    with pytest.raises(TypeError, match=r"random\.shuffle: argument 'axis' .* got float"):
        r.shuffle(x, axis=1.5)  # type: ignore[arg-type]
    r.shuffle(x, axis=np.int64(1))
    assert sorted(x.to_numpy()[0]) == [0.0, 1.0, 2.0]
