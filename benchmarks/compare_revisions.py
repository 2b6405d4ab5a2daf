"""Throughput of this tree against an earlier git revision, timed in alternation in one run.

    python benchmarks/compare_revisions.py REV [--repeats 7] [--hands 200] [--batch 4096]

Checks out ``REV`` into a temporary git worktree, then times both trees in alternating fresh
processes (so a busy machine slows both alike): random legal play through
``butifarra_v0.env()`` (observation + mask at every decision), the bare ``Game`` engine, and
``BatchedEnv.step`` at one batch size. Only the API both revisions share is used. Prints the
medians and the median of the per-repeat ratios (this tree / REV).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, random, sys, time
import numpy as np
from butifarra_env import BatchedEnv, butifarra_v0

hands, batch, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
env = butifarra_v0.env()
pick = random.Random(0).randrange
decisions = 0
start = time.perf_counter()
for h in range(hands):
    env.reset(seed=h)
    for agent in env.agent_iter():
        obs, reward, term, trunc, info = env.last()
        if term or trunc:
            env.step(None)
            continue
        legal = np.flatnonzero(obs["action_mask"])
        env.step(int(legal[pick(len(legal))]))
        decisions += 1
env_rate = decisions / (time.perf_counter() - start)

try:  # the flat layout first: in an old tree, an editable install would serve core/ anew
    from butifarra_env.game import Game
    from butifarra_env.options import Options
    try:
        from butifarra_env.rules import random_deal
    except ImportError:  # before the rules core existed
        from butifarra_env.game import random_deal
except ImportError:  # the folders of the import layers (butifarra_env/core/)
    from butifarra_env.core.game import Game
    from butifarra_env.core.options import Options
    from butifarra_env.core.rules import random_deal
rng = np.random.default_rng(0)
options = Options()
decisions = 0
start = time.perf_counter()
for h in range(hands * 5):
    game = Game(options, h % 4, random_deal(rng, h % 4))
    while not game.is_over:
        legal = game.legal
        choices = [a for a in range(56) if legal >> a & 1]
        game.step(choices[pick(len(choices))])
        decisions += 1
engine_rate = decisions / (time.perf_counter() - start)

eng = BatchedEnv(batch, seed=0)
obs, mask, seat = eng.reset()
rng = np.random.default_rng(0)
keys = rng.random((64, batch, 56))
steps, busy, k = 0, 0.0, 0
while busy < seconds:
    actions = np.where(mask > 0, keys[k % 64], -1.0).argmax(axis=1)
    t = time.perf_counter()
    obs, mask, seat, rewards, done = eng.step(actions)
    busy += time.perf_counter() - t
    steps += 1
    k += 1
print(json.dumps({"env": env_rate, "engine": engine_rate, "batched": steps * batch / busy}))
"""


def measure(tree: Path, hands: int, batch: int, seconds: float) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(hands), str(batch), str(seconds)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("rev", help="the earlier revision, e.g. a commit id or HEAD~3")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--hands", type=int, default=200, help="hands through env() per repeat")
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--seconds", type=float, default=2.0, help="BatchedEnv time per repeat")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(old), args.rev], cwd=ROOT)
        try:
            runs: dict[str, list[dict[str, float]]] = {"this tree": [], args.rev: []}
            for _ in range(args.repeats):
                for name, tree in (("this tree", ROOT), (args.rev, old)):
                    runs[name].append(measure(tree, args.hands, args.batch, args.seconds))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT)
    print(f"medians of {args.repeats} alternating runs (decisions/s):")
    for key, label in (
        ("env", "butifarra_v0.env()"),
        ("engine", "Game (bare engine)"),
        ("batched", f"BatchedEnv@{args.batch}"),
    ):
        new = [r[key] for r in runs["this tree"]]
        ref = [r[key] for r in runs[args.rev]]
        ratio = statistics.median(a / b for a, b in zip(new, ref, strict=True))
        print(
            f"  {label:<22} this tree {statistics.median(new):>12,.0f}   "
            f"{args.rev} {statistics.median(ref):>12,.0f}   ratio {ratio:.3f}"
        )


if __name__ == "__main__":
    main()
