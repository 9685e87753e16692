"""``python -m tenferro_ad.demo``: checkpointing whose saving the ledger proves.

Trains a 24-layer tanh MLP (width 64, batch 1024, float64) on synthetic data for a few
SGD steps twice — once plain, once with the layers in 6 checkpointed blocks of 4 — and
prints the losses, each run's ledger for one training step (allocations and copies by
reason, peak live bytes), and the peak-memory saving.  With matplotlib installed
(``pip install 'tenferro[plot]'``) it also draws live bytes over one step, stacked by
reason: into ``--plot PATH`` when given, otherwise into a fresh temporary directory —
never silently into the current directory — and it prints where the picture went
(``--no-plot`` skips it).  No JAX needed.  Runs in a few seconds.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import tenferro_ad as ad
import tenferro_storage as ts
from tenferro_storage.ledger import AllocationReason, LedgerRecord, capture

from .scenarios import PlotUnavailableError, plot_records

__all__ = ["main", "train"]

DEPTH, WIDTH, BATCH, IN, OUT, BLOCKS = 24, 64, 1024, 32, 8, 6


def _init(seed: int) -> list[ts.Tensor[Any, Any]]:
    rng = ts.random.default_rng(seed)
    dims = [IN] + [WIDTH] * DEPTH + [OUT]
    params: list[ts.Tensor[Any, Any]] = []
    for a, b in itertools.pairwise(dims):
        params.append(rng.normal((a, b), scale=1.0 / np.sqrt(a)))
        params.append(rng.normal((b,), scale=0.01))
    return params


def _block(h: Any, *wb: Any) -> Any:
    for w, b in zip(wb[::2], wb[1::2], strict=True):
        h = ad.tanh(h @ w + b)
    return h


def _loss(params: list[Any], x: Any, y: Any, policy: ad.CheckpointPolicy | None) -> Any:
    hidden, (w_out, b_out) = params[:-2], params[-2:]
    per = 2 * DEPTH // BLOCKS
    h = x
    for k in range(BLOCKS):
        wb = hidden[k * per : (k + 1) * per]
        h = _block(h, *wb) if policy is None else ad.checkpoint(_block, policy=policy)(h, *wb)
    d = h @ w_out + b_out - y
    return ad.mean(d * d)


def train(
    policy: ad.CheckpointPolicy | None,
    steps: int = 5,
    lr: float = 0.05,
) -> tuple[list[float], LedgerRecord]:
    """Train for ``steps`` SGD steps; returns the losses and the ledger of the last step.

    The parameters are updated in place (no copy); ``policy=None`` trains without
    checkpointing.  Cost: ``steps`` forward+backward passes (plus one recompute of
    each block per step when checkpointing).
    """
    params = _init(0)
    rng = ts.random.default_rng(1)
    x = rng.normal((BATCH, IN))
    y = rng.normal((BATCH, OUT))
    opt = ad.optim.SGD(lr)
    step = ad.value_and_grad(lambda p, x, y: _loss(p, x, y, policy))
    losses: list[float] = []
    record: LedgerRecord | None = None
    for _ in range(steps):
        with capture() as rec:
            loss, grads = step(params, x, y)
            opt.step(params, grads)
            losses.append(float(ts.kernel.read_array(loss)))
            del loss, grads
        record = rec
    assert record is not None
    del params, x, y
    return losses, record


def _counts(counter: Any) -> str:
    return (
        ", ".join(f"{r.value}={n}" for r, n in sorted(counter.items(), key=lambda p: p[0].value))
        or "none"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m tenferro_ad.demo", description=__doc__)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument(
        "--plot",
        type=Path,
        default=None,
        metavar="PATH.png",
        help="where to write the plot when matplotlib is installed (default: a new "
        "temporary directory; the path is printed)",
    )
    parser.add_argument("--no-plot", action="store_true", help="do not draw the plot")
    args = parser.parse_args(argv)
    if args.plot is not None and not args.plot.parent.is_dir():
        print(f"error: --plot {args.plot}: directory {args.plot.parent} does not exist",
              file=sys.stderr)
        return 2
    print(
        f"tanh MLP: {DEPTH} hidden layers of {WIDTH}, batch {BATCH}, float64; "
        f"{args.steps} SGD steps\n"
    )
    runs = {
        "plain": train(None, args.steps),
        f"checkpointed ({BLOCKS} blocks, save_nothing)": train(ad.save_nothing, args.steps),
    }
    width = max(len(k) for k in runs)
    for label, (losses, _) in runs.items():
        print(f"{label:<{width}}  loss: " + " -> ".join(f"{v:.5f}" for v in losses))
    print("\nledger of one training step (value_and_grad + SGD update):")
    for label, (_, rec) in runs.items():
        print(f"  {label}")
        print(f"    allocations: {_counts(rec.allocations)}")
        print(f"    copies:      {_counts(rec.copies)}")
        print(f"    peak live:   {rec.peak_bytes:,} bytes")
    (plain_losses, plain), (ckpt_losses, ckpt) = runs.values()
    same = np.allclose(plain_losses, ckpt_losses, rtol=1e-12)
    recompute = ckpt.allocation_bytes[AllocationReason.CHECKPOINT_RECOMPUTE_OUTPUT]
    print(
        f"\npeak-memory saving: {plain.peak_bytes:,} -> {ckpt.peak_bytes:,} bytes "
        f"({1 - ckpt.peak_bytes / plain.peak_bytes:.1%} less, "
        f"{plain.peak_bytes / ckpt.peak_bytes:.2f}x), paid for with {recompute:,} bytes "
        f"of recomputed activations; copies in both runs: "
        f"{sum(plain.copies.values()) + sum(ckpt.copies.values())}; "
        f"losses identical: {same}"
    )
    if not args.no_plot:
        _plot(runs, args.plot)
    return 0 if same else 1


def _plot(runs: dict[str, tuple[list[float], LedgerRecord]], path: Path | None) -> None:
    """Draw the live-bytes plot into ``path`` (default: a new temporary directory) and say
    where it went."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("(matplotlib not installed: pip install 'tenferro[plot]' to get the plot)")
        return
    if path is None:
        path = Path(tempfile.mkdtemp(prefix="tenferro-demo-")) / "checkpoint_demo.png"
    try:
        plot_records([(f"{k}: peak {r.peak_bytes:,} B", r) for k, (_, r) in runs.items()], path,
                     share_y=True)  # the panels are compared: one y-scale
    except PlotUnavailableError:
        print("(matplotlib not installed: pip install 'tenferro[plot]' to get the plot)")
        return
    print(f"wrote the live-bytes plot to {path}")


if __name__ == "__main__":
    sys.exit(main())
