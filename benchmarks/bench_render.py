"""Cost of the ``rgb_array`` pictures: milliseconds per frame, medians of repeated runs.

    python benchmarks/bench_render.py [--hands 4] [--repeats 7] [--seed 0]

The positions are every decision of ``--hands`` seeded random hands (bidding, play, the
finished hand; match mode, so the match panel is drawn too). Each repeat renders all of them
once per view: the spectator's table (``butifarra_v0`` ``render()``), a player's view with
the other hands face down (``SingleAgentEnv`` ``render()``), and the same view through
``SingleAgentEnv.render()`` itself, conversion to the returned array included. The first
frame of a process also builds the cached card faces, backs and background: reported apart.
A video frame per step must stay cheap next to the env step itself (tens of microseconds).
"""

from __future__ import annotations

import argparse
import copy
import platform
import statistics
import time

import numpy as np

from butifarra_env import butifarra_v0
from butifarra_env.core.game import Game
from butifarra_env.envs.gym_env import SingleAgentEnv

TARGET = 101


def positions(hands: int, seed: int) -> list[Game]:
    """A copy of the game at every decision of ``hands`` random hands, and at each end."""
    env = butifarra_v0.raw_env(target_score=TARGET)
    rng = np.random.default_rng(seed)
    out = []
    for h in range(hands):
        env.reset(seed=seed + h, options={"one_hand": True})
        while True:
            out.append(copy.deepcopy(env.game))
            if all(env.terminations.values()):
                break
            legal = env.legal_actions()
            env.step(legal[rng.integers(len(legal))])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hands", type=int, default=4, help="hands whose positions are drawn")
    parser.add_argument("--repeats", type=int, default=7, help="timed runs (median reported)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.hands < 1 or args.repeats < 1:
        parser.error("--hands and --repeats must be >= 1")
    print(
        f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}"
    )
    games = positions(args.hands, args.seed)

    start = time.perf_counter()
    from butifarra_env.envs.render_image import render_table  # Pillow and the caches load here

    render_table(games[0], None, target_score=TARGET)
    first = 1e3 * (time.perf_counter() - start)
    print(f"first frame (imports Pillow, builds the caches): {first:.1f} ms")

    env = SingleAgentEnv(seat=0, render_mode="rgb_array", target_score=TARGET)
    env.reset(seed=args.seed)
    views = {
        "table, all hands face up": lambda g: render_table(g, None, target_score=TARGET),
        "player's view, others face down": lambda g: render_table(g, 0, target_score=TARGET),
    }
    for name, draw in views.items():
        per_frame = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            for g in games:
                draw(g)
            per_frame.append((time.perf_counter() - t) / len(games))
        ms = 1e3 * statistics.median(per_frame)
        print(f"{name:<34} {ms:6.2f} ms/frame  ({len(games)} positions, {args.repeats} repeats)")

    per_frame = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        for _ in range(len(games)):
            frame = env.render()
        per_frame.append((time.perf_counter() - t) / len(games))
    assert isinstance(frame, np.ndarray) and frame.dtype == np.uint8
    ms = 1e3 * statistics.median(per_frame)
    print(f"{'SingleAgentEnv.render()':<34} {ms:6.2f} ms/frame  shape {frame.shape}")


if __name__ == "__main__":
    main()
