"""Observation version 1 in both batched engines.

``BatchedEnv(obs_version=1)`` is held to the reference definition, ``observation.encode(game,
seat, 1)`` of a ``Game`` (its match a ``rules.Match``) replayed with the engine's deals and the
same actions, at every step and at every episode's end; to its own v0 rows (v1 starts with
them); and to its uint8 bytes in float32. The torch engine's v1 is held to the numpy engine's
by the lockstep driver of tests/test_batched_torch.py.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np
import pytest

from butifarra_env.core import rules
from butifarra_env.core.cards import mask_of
from butifarra_env.core.game import Game
from butifarra_env.core.observation import (
    OBS_SIZE,
    OBS_SIZE_V1,
    STATE_SIZE,
    encode,
    layout,
    state_scale_vector,
)
from butifarra_env.core.rules import N_SEATS
from butifarra_env.envs.batched import BatchedEnv
from tests.extras import need
from tests.helpers import choose_batch_actions

VARIANTS = {"obligada": True, "linear_doubling": True, "butifarra_max_doubling_level": 2}


def _first_difference(what: str, step: int, got: np.ndarray, want: np.ndarray) -> str:
    bad = int(np.flatnonzero((got != want).reshape(len(want), -1).any(axis=1))[0])
    at = np.flatnonzero((got[bad] != want[bad]).ravel())[:10]
    return (
        f"step {step}, env {bad}: {what} differs at {at}: got {got[bad].ravel()[at]}, "
        f"want {want[bad].ravel()[at]}"
    )


def _replay(options: dict[str, Any], *, n_envs: int, n_steps: int, seed: int) -> int:
    """Drive ``BatchedEnv(obs_version=1)`` and one reference Game per env (its match by
    ``rules.Match``, its deals the engine's) through the same random legal actions, a tenth of
    the envs held still each step; assert every observation, seat, episode end and final
    observation equal the reference's. Returns the number of hands finished."""
    eng = BatchedEnv(n_envs, seed=seed, obs_version=1, keep_final_obs=True, **options)
    opts = eng.options
    rng = np.random.default_rng(seed + 1000)
    matches: dict[int, rules.Match] = {}
    games: dict[int, Game] = {}
    hands_done = 0

    def deal(ids: np.ndarray, fresh: bool) -> None:
        """The reference takes up the engine's deals of envs ``ids`` (new episodes: new
        matches; otherwise the match's next hand, whose dealer must be the rotation's)."""
        dealers, hands = eng.current_deals()
        for i in ids.tolist():
            if fresh:
                matches[i] = rules.Match(opts.target_score, int(dealers[i]))
            m = matches[i]
            assert m.dealer == dealers[i], f"env {i}: dealer {dealers[i]}, match says {m.dealer}"
            cards = [mask_of(h.tolist()) for h in hands[i]]
            games[i] = Game(opts, m.dealer, cards, m.hand_number, m.scores)

    obs, mask, seat = eng.reset()
    deal(np.arange(n_envs), fresh=True)
    for step in range(n_steps + 1):
        want_seat = np.array([games[i].to_move for i in range(n_envs)])
        np.testing.assert_array_equal(seat, want_seat, err_msg=f"step {step}: seat to move")
        want = np.stack([encode(games[i], games[i].to_move, 1) for i in range(n_envs)])
        assert obs.dtype == np.uint8 and obs.shape == (n_envs, OBS_SIZE_V1)
        if not np.array_equal(obs, want):
            pytest.fail(_first_difference("v1 observation", step, obs, want))
        if step == n_steps:
            return hands_done
        actions = choose_batch_actions(rng, mask, 0.5)
        active = rng.random(n_envs) >= 0.1
        next_hand: list[int] = []  # envs whose match goes on to another hand
        over: list[int] = []  # envs whose episode ended
        for i in np.flatnonzero(active).tolist():
            game = games[i]
            game.step(int(actions[i]))
            if game.is_over:
                hands_done += 1
                assert game.scores is not None
                (next_hand if matches[i].add_hand(game.scores) else over).append(i)
        obs, mask, seat, _, done = eng.step(actions, active)
        np.testing.assert_array_equal(np.flatnonzero(done), over, err_msg=f"step {step}: done")
        ids, views = eng.final_observations()
        np.testing.assert_array_equal(ids, over)
        for i, four in zip(ids.tolist(), views, strict=True):
            want_final = np.stack([encode(games[i], s, 1) for s in range(N_SEATS)])
            if not np.array_equal(four, want_final):
                pytest.fail(_first_difference(f"env {i} final view", step, four, want_final))
        deal(np.array(next_hand, dtype=np.int64), fresh=False)
        deal(np.array(over, dtype=np.int64), fresh=True)
    raise AssertionError("unreachable")


REPLAYS = [
    pytest.param({"obligada": True}, 1, id="obligada"),
    pytest.param({"linear_doubling": True}, 2, id="linear-doubling"),
    pytest.param({"butifarra_max_doubling_level": 1}, 3, id="butifarra-cap1"),
    pytest.param(
        {**VARIANTS, "target_score": 51, "max_doubling_level": 3}, 4, id="match51-variants"
    ),
]


@pytest.mark.parametrize(("options", "seed"), REPLAYS)
def test_v1_rows_equal_the_reference_encoding(options: dict[str, Any], seed: int) -> None:
    hands = _replay(options, n_envs=48, n_steps=1100, seed=seed)
    assert hands >= 800, hands  # over 3,000 in the four option sets


@pytest.mark.parametrize(
    ("options", "obs_format"),
    [
        pytest.param(VARIANTS, "float32", id="single-variants-float32"),
        pytest.param({"target_score": 101, "first_dealer": 1}, "uint8", id="match101"),
    ],
)
def test_v1_starts_with_the_v0_row(options: dict[str, Any], obs_format: str) -> None:
    """Same deals, same actions (some envs held): the first 491 values of every v1 row, final
    rows included, are the v0 engine's row; everything else, ``state()`` included, is the same."""
    kw: dict[str, Any] = dict(seed=5, obs_format=obs_format, keep_final_obs=True, **options)
    v0, v1 = BatchedEnv(48, **kw), BatchedEnv(48, obs_version=1, **kw)
    assert (v0.obs_version, v0.observation_size) == (0, OBS_SIZE)
    assert (v1.obs_version, v1.observation_size) == (1, OBS_SIZE_V1)
    out0: tuple[Any, ...] = v0.reset()
    out1: tuple[Any, ...] = v1.reset()
    rng = np.random.default_rng(6)
    finals = 0
    for step in range(500):
        assert out1[0].shape == (48, OBS_SIZE_V1) and out1[0].dtype == out0[0].dtype
        if not np.array_equal(out1[0][:, :OBS_SIZE], out0[0]):
            pytest.fail(_first_difference("v0 prefix", step, out1[0][:, :OBS_SIZE], out0[0]))
        for x, y in zip(out0[1:], out1[1:], strict=True):
            np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(v1.state(), v0.state())
        (ids0, final0), (ids1, final1) = v0.final_observations(), v1.final_observations()
        np.testing.assert_array_equal(ids1, ids0)
        np.testing.assert_array_equal(final1[..., :OBS_SIZE], final0)
        finals += len(ids0)
        active = rng.random(48) >= 0.1
        actions = choose_batch_actions(rng, out0[1], 0.5)
        out0, out1 = v0.step(actions, active), v1.step(actions, active)
    assert finals >= 20


def test_float32_is_the_bytes_times_the_v1_scale() -> None:
    """float32 observations, final observations and state are the uint8 ones times
    ``layout(1).scale_vector()`` (``state_scale_vector()``: the state is v0's)."""
    kw: dict[str, Any] = dict(seed=9, obs_version=1, keep_final_obs=True, **VARIANTS)
    raw, flo = BatchedEnv(32, **kw), BatchedEnv(32, obs_format="float32", **kw)
    scale = layout(1).scale_vector()
    assert scale.shape == (OBS_SIZE_V1,) and scale.min() < 1  # card_trick: 1/12, the cap: 1/4
    (obs_u, mask, _), (obs_f, _, _) = raw.reset(), flo.reset()
    rng = np.random.default_rng(10)
    seen_history = False
    for _ in range(300):
        assert obs_f.dtype == np.float32
        np.testing.assert_array_equal(obs_f, obs_u * scale)
        np.testing.assert_array_equal(flo.state(), raw.state() * state_scale_vector())
        (_, fin_u), (_, fin_f) = raw.final_observations(), flo.final_observations()
        np.testing.assert_array_equal(fin_f, fin_u * scale)
        seen_history |= bool((obs_u[:, OBS_SIZE:] > 1).any())  # card_trick beyond trick 1
        actions = choose_batch_actions(rng, mask, 0.5)
        obs_u, mask, *_ = raw.step(actions)
        obs_f, *_ = flo.step(actions)
    assert seen_history


def test_torch_engine_v1_matches_numpy_engine_v1() -> None:
    """tests/test_batched_torch.py's quick lockstep cases (every variant, float32, held envs,
    final observations; a match on the device's own deals) with ``obs_version=1``."""
    torch = need("torch")
    from tests.test_batched_torch import QUICK, _check_coverage, _drive

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small batches: see test_batched_torch's _one_thread
    try:
        for quick in QUICK:
            case = dataclasses.replace(quick, options={**quick.options, "obs_version": 1})
            seen = _drive(case, "cpu", seed=17)
            _check_coverage(case, seen)
    finally:
        torch.set_num_threads(threads)


def test_torch_engine_reports_the_v1_size() -> None:
    need("torch")
    from butifarra_env.envs.batched_torch import TorchBatchedEnv

    eng = TorchBatchedEnv(4, seed=0, obs_version=1)
    assert (eng.obs_version, eng.observation_size) == (1, OBS_SIZE_V1)
    obs, _, _ = eng.reset()
    assert tuple(obs.shape) == (4, OBS_SIZE_V1)
    assert tuple(eng.state().shape) == (4, STATE_SIZE)  # the state stays v0's


@pytest.mark.parametrize("engine", ["numpy", "torch"])
@pytest.mark.parametrize("bad", [2, -1, "1", True])
def test_bad_obs_version_is_refused_before_anything_is_built(engine: str, bad: Any) -> None:
    """A trillion envs: had the engine allocated anything first, it would fail for memory."""
    make: Any = BatchedEnv
    if engine == "torch":
        need("torch")
        from butifarra_env.envs.batched_torch import TorchBatchedEnv as make
    message = re.escape(f"obs_version must be one of [0, 1], got {bad!r}")
    with pytest.raises(ValueError, match=message):
        make(2**40, obs_version=bad)
