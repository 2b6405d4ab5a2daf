"""Golden playthroughs (after OpenSpiel): a few seeded games written as text — every
observation, legal set, action and reward — and replayed by ``tests/test_playthroughs.py``.
A change in rules or encoding shows up as a readable diff of these files.

Regenerate after an intended change (and bump the env version if observations, actions or
rewards changed):  ``python -m tests.playthrough``
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from butifarra_env import butifarra_v0
from butifarra_env.core.actions import action_name

DIR = Path(__file__).resolve().parent / "playthroughs"
CASES = {
    "default_seed0": ({}, 0),
    "default_seed7": ({}, 7),
    "no_doubling_seed3": ({"max_doubling_level": 0}, 3),
    "match51_butifarra_base1_seed5": ({"target_score": 51, "butifarra_base": 1}, 5),
    # the regional variants of docs/RULES.md, one each (tests/test_variants.py checks that
    # each one changes something in its playthrough)
    "obligada_seed0": ({"obligada": True}, 0),
    "linear_doubling_seed5": ({"linear_doubling": True}, 5),
    "butifarra_cap2_seed3": ({"butifarra_max_doubling_level": 2}, 3),
}


def _vector(v: np.ndarray) -> str:
    nz = np.flatnonzero(v)
    return " ".join(f"{i}" if v[i] == 1 else f"{i}:{v[i]}" for i in nz)


def playthrough(options: dict, seed: int) -> str:
    """Text of one episode, the actions chosen by a seeded generator among the legal ones."""
    env = butifarra_v0.env(**options)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    lines = [f"options {options} seed {seed}"]
    step = 0
    for agent in env.agent_iter():
        obs, reward, term, trunc, _info = env.last()
        if term or trunc:
            lines.append(f"end {agent} reward {reward:g}")
            env.step(None)
            continue
        legal = np.flatnonzero(obs["action_mask"])
        action = int(legal[rng.integers(len(legal))])
        lines.append(f"step {step} {agent} reward {reward:g}")
        lines.append(f"  obs {_vector(obs['observation'])}")
        lines.append(f"  legal {' '.join(map(str, legal))}")
        lines.append(f"  action {action} ({action_name(action)})")
        env.step(action)
        step += 1
    return "\n".join(lines) + "\n"


def main() -> None:
    DIR.mkdir(exist_ok=True)
    for name, (options, seed) in CASES.items():
        (DIR / f"{name}.txt").write_text(playthrough(options, seed), encoding="utf-8")
        print(f"wrote {DIR / name}.txt")


if __name__ == "__main__":
    main()
