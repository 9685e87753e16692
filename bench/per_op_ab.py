"""Per-op time of two source trees, interleaved: ``per_op.py``'s tenferro case (the 50-op
4x4 chain, fwd+bwd) run in alternating fresh processes, each the best of 9 CPU-time
(``time.process_time``) repeats, so a slow phase of the machine hits both trees alike.

    git archive cfa95f3 src | tar -x -C /tmp/old
    python bench/per_op_ab.py /tmp/old/src src [--pairs 6] [--calls 2700]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

_CHILD = """
import sys, time
sys.path.insert(0, {bench!r})
import per_op
run = per_op.tenferro_case()
n = {calls} // 9
for _ in range(50):
    run()
best = float("inf")
for _ in range(9):
    t0 = time.process_time()
    for _ in range(n):
        run()
    best = min(best, time.process_time() - t0)
print(best / n / 50 * 1e6)
"""


def once(src: str, calls: int) -> float:
    env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()))
    code = _CHILD.format(bench=str(HERE), calls=calls)
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout
    return float(out.strip())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", help="the first tree's src directory (the baseline)")
    ap.add_argument("b", help="the second tree's src directory")
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--calls", type=int, default=2700)
    args = ap.parse_args()
    a, b = [], []
    for _ in range(args.pairs):
        a.append(once(args.a, args.calls))
        b.append(once(args.b, args.calls))
        print(f"  {args.a}: {a[-1]:.3f} us/op    {args.b}: {b[-1]:.3f} us/op", flush=True)
    ma, mb = statistics.median(a), statistics.median(b)
    print(f"medians {ma:.3f} / {mb:.3f} us/op: second/first = {mb / ma:.3f}")


if __name__ == "__main__":
    main()
