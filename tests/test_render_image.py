"""The ``rgb_array`` pictures: their format in every phase, what a player's view hides, and
that an env without ``render_mode`` never loads Pillow."""

from __future__ import annotations

import subprocess
import sys

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import butifarra_env  # noqa: F401 - registers the Gymnasium id
from butifarra_env import butifarra_v0
from butifarra_env.envs.gym_env import SingleAgentEnv
from butifarra_env.envs.render_image import HEIGHT, WIDTH, render_table

SHAPE = (HEIGHT, WIDTH, 3)


def _hands(order: tuple[int, int, int]) -> list[list[int]]:
    """Seat 0 holds oros; seats 1-3 hold copas, espadas, bastos in the given order."""
    return [list(range(12)), *[list(range(12 * s, 12 * s + 12)) for s in order]]


def test_every_frame_of_a_match_is_an_rgb_image() -> None:
    env = butifarra_v0.raw_env(render_mode="rgb_array", target_score=31, butifarra_base=1)
    env.reset(seed=2)
    rng = np.random.default_rng(0)
    frames = []
    phases = set()
    while not all(env.terminations.values()):
        frame = env.render()
        assert isinstance(frame, np.ndarray) and frame.shape == SHAPE and frame.dtype == np.uint8
        frames.append(frame)
        phases.add(env.game.phase)
        legal = env.legal_actions()
        env.step(legal[rng.integers(len(legal))])
    frames.append(env.render())  # the finished hand, with its result
    assert {0, 3} <= phases  # bidding and card play were both drawn
    changed = [not np.array_equal(a, b) for a, b in zip(frames, frames[1:], strict=False)]
    assert all(changed)  # every move shows
    assert env.hand_results  # a whole match was drawn


def test_a_players_view_hides_the_other_hands() -> None:
    def frame(order: tuple[int, int, int], seat: int | None, reveal: bool) -> np.ndarray:
        env = butifarra_v0.raw_env()
        env.reset(options={"dealer": 0, "hands": _hands(order)})
        env.step(48)  # seat 0 chooses oros; seat 1 is asked to double
        return render_table(env.game, seat, reveal=reveal)

    a, b = (1, 2, 3), (3, 1, 2)  # the same hand for seat 0; the others' hands permuted
    np.testing.assert_array_equal(frame(a, 0, False), frame(b, 0, False))
    assert not np.array_equal(frame(a, 0, True), frame(b, 0, True))
    assert not np.array_equal(frame(a, None, False), frame(b, None, False))
    # Seat 1 sees its own hand, which differs between the deals.
    assert not np.array_equal(frame(a, 1, False), frame(b, 1, False))


def test_gymnasium_check_env_accepts_every_render_mode() -> None:
    # check_env renders in "rgb_array" and rebuilds the env through its spec in the others
    check_env(gymnasium.make("butifarra_env/Butifarra-v0", render_mode="rgb_array", seat=1))


def test_single_agent_env_renders_the_learners_view_or_all_hands() -> None:
    mine = SingleAgentEnv(seat=2, render_mode="rgb_array")
    everything = SingleAgentEnv(seat=2, render_mode="rgb_array", render_all_hands=True)
    with pytest.raises(RuntimeError, match=r"reset\(\) before render"):
        mine.render()
    mine.reset(seed=4)
    everything.reset(seed=4)
    a, b = mine.render(), everything.render()
    assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
    assert a.shape == b.shape == SHAPE and not np.array_equal(a, b)
    text = SingleAgentEnv(seat=2, render_mode="ansi", render_all_hands=True)
    text.reset(seed=4)
    rendered = text.render()
    assert isinstance(rendered, str)
    assert all(f"Hand of player_{s}" in rendered for s in range(4))
    with pytest.raises(ValueError, match="render_all_hands"):
        SingleAgentEnv(render_all_hands="yes")


def test_without_render_mode_pillow_is_never_imported() -> None:
    code = """
import sys
import gymnasium
import numpy as np
import butifarra_env
from butifarra_env import BatchedEnv, butifarra_v0
env = butifarra_v0.env()
env.reset(seed=0)
for agent in env.agent_iter():
    obs, _, term, trunc, _ = env.last()
    env.step(None if term or trunc else int(np.flatnonzero(obs["action_mask"])[0]))
single = gymnasium.make("butifarra_env/Butifarra-v0")
single.reset(seed=0)
vec = gymnasium.make_vec("butifarra_env/Butifarra-v0", num_envs=2)
vec.reset(seed=0)
assert not [m for m in sys.modules if m == "PIL" or m.startswith("PIL.")], "Pillow loaded"
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
