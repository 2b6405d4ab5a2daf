"""The batched engine against the reference, step for step.

The reference is ``butifarra_v0.raw_env`` (Game + Observer, its match loop and rewards), plus
``observation.encode`` / ``encode_state`` (the from-scratch definitions) on a sample of steps.
Both are driven through the same deals and the same random legal actions; at every step the
seat to move, observation, mask, full state, rewards and episode ends must be identical.
"""

from __future__ import annotations

import numpy as np
import pytest

from butifarra_env import butifarra_v0
from butifarra_env.core import rules
from butifarra_env.core.actions import DOUBLE, N_ACTIONS
from butifarra_env.core.cards import N_CARDS, cards_of
from butifarra_env.core.observation import OBS_SIZE, OFFSETS, STATE_SIZE, encode, encode_state
from butifarra_env.core.options import Options
from butifarra_env.core.rules import (
    N_SEATS,
    NO_TRUMP,
    PHASE_CHOOSE_TRUMP,
    PHASE_CHOOSE_TRUMP_DELEGATED,
    PHASE_PLAY,
)
from butifarra_env.envs.batched import BatchedEnv
from tests.extras import need
from tests.helpers import choose_batch_actions as _choose
from tests.helpers import random_deals as _random_deals

AGENTS = [f"player_{i}" for i in range(N_SEATS)]


def _ids(masks: tuple[int, ...] | list[int]) -> list[list[int]]:
    return [cards_of(m) for m in masks]


class Coverage:
    """What the random play reached, so a test can insist on every phase and level."""

    def __init__(self) -> None:
        self.hands = 0
        self.episodes = 0
        self.levels: set[int] = set()
        self.trumps: set[int] = set()
        self.delegated = False
        self.phases: set[int] = set()
        self.max_hand_number = 0
        self.max_match_score = 0
        self.trump_levels: set[tuple[int, int]] = set()  # (trump, level) of finished hands
        self.narrowed = 0  # card decisions with fewer legal cards than the default rules give


def _run(
    options: dict,
    *,
    n_envs: int,
    n_steps: int,
    seed: int,
    p_double: float,
    reward_scale: float = 1.0,
    deal_fn: bool = False,
    slow_every: int = 23,
) -> Coverage:
    """Drive BatchedEnv and ``n_envs`` reference envs in lockstep; assert equality throughout.

    With ``deal_fn`` the engine takes every deal from the test (matches: the hand the
    reference's own match loop dealt); otherwise the reference replays the engine's deals.
    """
    rng = np.random.default_rng(seed + 1000)
    eng = BatchedEnv(n_envs, seed=seed, reward_scale=reward_scale, **options)
    refs = [butifarra_v0.raw_env(reward_scale=reward_scale, **options) for _ in range(n_envs)]
    cov = Coverage()

    def ref_deal(env_ids: np.ndarray, dealers: np.ndarray) -> np.ndarray:
        out = []
        for i, d in zip(env_ids, dealers, strict=True):
            ref = refs[i]
            if ref.terminations[AGENTS[0]]:  # episode over: a fresh deal, the ref follows it
                out.append(_random_deals(rng, 1)[0])
            else:  # the match goes on: the reference has dealt the next hand already
                assert ref.game.dealer == d, f"env {i}: dealer {d}, reference {ref.game.dealer}"
                out.append(np.array(_ids(ref.game.initial_hands)))
        return np.stack(out)

    if deal_fn:
        eng.set_deal_fn(ref_deal)
        dealers = rng.integers(0, N_SEATS, n_envs)
        if options.get("first_dealer") is not None:
            dealers[:] = options["first_dealer"]
        obs, mask, seat = eng.reset(dealers=dealers, hands=_random_deals(rng, n_envs))
    else:
        obs, mask, seat = eng.reset()
    dealers, hands = eng.current_deals()
    for i, ref in enumerate(refs):
        ref.reset(options={"dealer": int(dealers[i]), "hands": hands[i].tolist()})
    exp_obs = np.zeros((n_envs, OBS_SIZE), np.uint8)
    exp_mask = np.zeros((n_envs, N_ACTIONS), np.int8)
    exp_state = np.zeros((n_envs, STATE_SIZE), np.uint8)
    exp_seat = np.zeros(n_envs, np.int64)
    exp_rew = np.zeros((n_envs, N_SEATS), np.float32)
    exp_done = np.zeros(n_envs, bool)

    def expect(step: int) -> None:
        for i, ref in enumerate(refs):
            game = ref.game
            agent = ref.agent_selection
            seat_i = AGENTS.index(agent)
            o = ref.observe(agent)
            exp_seat[i] = seat_i
            exp_obs[i] = o["observation"]
            exp_mask[i] = o["action_mask"]
            exp_state[i] = ref.state()
            cov.phases.add(game.phase)
            cov.levels.add(game.level)
            cov.trumps.add(game.trump)
            cov.delegated |= game.delegated
            cov.max_hand_number = max(cov.max_hand_number, game.hand_number)
            cov.max_match_score = max(cov.max_match_score, *game.match_scores)
            if game.phase == PHASE_PLAY and game.options.obligada:
                plain = rules.legal_cards(
                    game.hands[seat_i],
                    game.led_suit,
                    game.win_card,
                    game.partner_winning(seat_i),
                    game.trump,
                )
                cov.narrowed += plain.bit_count() > game.legal.bit_count()
            if (step + i) % slow_every == 0:  # the from-scratch definitions, on a sample
                np.testing.assert_array_equal(encode(game, seat_i), exp_obs[i])
                np.testing.assert_array_equal(encode_state(game), exp_state[i])

    def compare(step: int, got: tuple) -> None:
        names = ("obs", "mask", "seat", "rewards", "done")
        wants = (exp_obs, exp_mask, exp_seat, exp_rew, exp_done)
        for name, g, w in zip(names, got, wants, strict=False):
            assert g.dtype == w.dtype, f"{name} dtype {g.dtype} != {w.dtype}"
            if not np.array_equal(g, w):
                bad = np.flatnonzero((g != w).reshape(len(w), -1).any(axis=1))[0]
                at = np.flatnonzero(g[bad] != w[bad])[:10]
                pytest.fail(
                    f"step {step}, env {bad}: {name} differs at {at}: got "
                    f"{g[bad].ravel()[at]}, want {w[bad].ravel()[at]}; last actions "
                    f"{refs[bad].game.actions[-6:]}"
                )
        state = eng.state()
        if not np.array_equal(state, exp_state):
            bad = np.flatnonzero((state != exp_state).any(axis=1))[0]
            at = np.flatnonzero(state[bad] != exp_state[bad])[:10]
            pytest.fail(f"step {step}, env {bad}: state differs at {at}")

    expect(0)
    compare(0, (obs, mask, seat))
    for step in range(1, n_steps + 1):
        actions = _choose(rng, mask, p_double)
        for i, ref in enumerate(refs):
            played = len(ref.hand_results)
            ref.step(int(actions[i]))
            cov.hands += len(ref.hand_results) - played
            for result in ref.hand_results[played:]:
                cov.trump_levels.add((result["trump"], result["doubling_level"]))
            exp_rew[i] = [ref.rewards[a] for a in AGENTS]
            exp_done[i] = ref.terminations[AGENTS[0]]
        obs, mask, seat, rew, done = eng.step(actions)
        if exp_done.any():
            cov.episodes += int(exp_done.sum())
            dealers, hands = eng.current_deals()
            for i in np.flatnonzero(exp_done):
                refs[i].reset(options={"dealer": int(dealers[i]), "hands": hands[i].tolist()})
        expect(step)
        compare(step, (obs, mask, seat, rew, done))
    return cov


SINGLE = [
    pytest.param({"max_doubling_level": m, "butifarra_base": b}, id=f"single-lvl{m}-base{b}")
    for m in range(5)
    for b in (1, 2)
]


@pytest.mark.parametrize("options", SINGLE)
def test_single_hands_match_reference(options: dict) -> None:
    seed = options["max_doubling_level"] * 2 + options["butifarra_base"]
    cov = _run(options, n_envs=16, n_steps=1000, seed=seed, p_double=0.5)
    assert cov.episodes >= 280
    assert {PHASE_CHOOSE_TRUMP, PHASE_CHOOSE_TRUMP_DELEGATED, PHASE_PLAY} <= cov.phases
    assert cov.levels == set(range(options["max_doubling_level"] + 1))
    assert cov.trumps >= {0, 1, 2, 3, 4}
    assert cov.delegated


@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_forced_doubling_chains(level: int) -> None:
    """Everyone doubles whenever allowed: every chain runs to the top level."""
    cov = _run({"max_doubling_level": level}, n_envs=16, n_steps=400, seed=10 + level, p_double=1)
    assert max(cov.levels) == level


def test_never_double_fixed_dealer_and_reward_scale() -> None:
    cov = _run(
        {"first_dealer": 2}, n_envs=16, n_steps=400, seed=20, p_double=0.0, reward_scale=0.25
    )
    assert cov.levels == {0}


@pytest.mark.parametrize(
    ("options", "p_double"),
    [
        pytest.param({"target_score": 51}, 0.5, id="match51"),
        pytest.param(
            {"target_score": 51, "max_doubling_level": 2, "butifarra_base": 1},
            0.3,
            id="match51-lvl2-base1",
        ),
        pytest.param({"target_score": 300}, 0.3, id="match300"),
        pytest.param({"target_score": 101, "first_dealer": 1}, 0.2, id="match101-dealer1"),
    ],
)
def test_matches_match_reference(options: dict, p_double: float) -> None:
    """Match mode: rewards at every hand end, dealer rotation, match scores and hand
    numbers in the observation, the episode ending when a team reaches the target."""
    cov = _run(options, n_envs=16, n_steps=1200, seed=30, p_double=p_double, deal_fn=True)
    assert cov.episodes >= 6
    assert cov.hands >= 350
    assert cov.max_hand_number >= 3
    if options["target_score"] > 255:
        assert cov.max_match_score > 255  # shown clipped at 255 in the observation


VARIANTS = {"obligada": True, "linear_doubling": True, "butifarra_max_doubling_level": 2}
"""Every regional variant of RULES.md on (butifarra stops at recontrar)."""


def _assert_variants_fired(cov: Coverage, options: dict, p_double: float) -> None:
    """Obligada narrowed the legal cards; a butifarra reached its cap and no further while a
    suit went past it (so the cap, and the linear multipliers beyond it, were compared)."""
    cap = options["butifarra_max_doubling_level"]
    top = options.get("max_doubling_level", 4)
    assert cov.narrowed > 20
    assert (NO_TRUMP, cap) in cov.trump_levels
    assert max(lv for t, lv in cov.trump_levels if t == NO_TRUMP) == cap
    if p_double > 0.5:
        assert max(lv for t, lv in cov.trump_levels if t != NO_TRUMP) == top > cap


@pytest.mark.parametrize("deal_fn", [False, True], ids=["own-deals", "deal-fn"])
def test_variants_match_reference_small(deal_fn: bool) -> None:
    """Unit tier: all the variants on, a few envs for a few hundred steps."""
    cov = _run(VARIANTS, n_envs=8, n_steps=300, seed=70, p_double=0.8, deal_fn=deal_fn)
    assert cov.episodes >= 40
    _assert_variants_fired(cov, VARIANTS, 0.8)


@pytest.mark.parametrize(
    ("options", "p_double"),
    [
        pytest.param(VARIANTS, 0.5, id="all"),
        pytest.param({**VARIANTS, "butifarra_max_doubling_level": 0}, 0.7, id="all-cap0"),
        pytest.param(
            {**VARIANTS, "max_doubling_level": 3, "butifarra_max_doubling_level": 1},
            1.0,
            id="all-lvl3-cap1-always-double",
        ),
        pytest.param({**VARIANTS, "butifarra_base": 1}, 0.6, id="all-base1"),
        pytest.param({"obligada": True}, 0.5, id="obligada"),
        pytest.param({"linear_doubling": True, "max_doubling_level": 4}, 0.6, id="linear"),
    ],
)
def test_variants_single_hands_match_reference(options: dict, p_double: float) -> None:
    cov = _run(options, n_envs=16, n_steps=800, seed=80, p_double=p_double)
    assert cov.episodes >= 200
    assert cov.trumps >= {0, 1, 2, 3, 4}
    if "butifarra_max_doubling_level" in options:
        _assert_variants_fired(cov, options, p_double)
    elif options.get("obligada"):
        assert cov.narrowed > 20
    else:
        assert {lv for _, lv in cov.trump_levels} == {0, 1, 2, 3, 4}


def test_variants_matches_match_reference() -> None:
    """Match mode with every variant: linear scores add up to the target, dealer rotation."""
    options = {**VARIANTS, "target_score": 51}
    cov = _run(options, n_envs=16, n_steps=1000, seed=90, p_double=0.6, deal_fn=True)
    assert cov.episodes >= 6 and cov.hands >= 250 and cov.max_hand_number >= 2
    _assert_variants_fired(cov, options, 0.6)


def test_injected_deals_single_hands() -> None:
    """deal_fn in single-hand mode: every auto-reset hand is the test's deal."""
    cov = _run(
        {"max_doubling_level": 3}, n_envs=8, n_steps=300, seed=40, p_double=0.6, deal_fn=True
    )
    assert cov.episodes >= 30


def test_large_batch_matches_reference() -> None:
    """Many envs at once (subsets of every size: bidding, trick ends, re-deals)."""
    cov = _run(
        {"target_score": 101},
        n_envs=96,
        n_steps=320,
        seed=50,
        p_double=0.4,
        deal_fn=True,
        slow_every=97,
    )
    assert cov.hands >= 400


# --------------------------------------------------------------------------- interface


def _deal_arrays(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, N_SEATS, n), _random_deals(rng, n)


def _legal(mask_row: np.ndarray) -> list[int]:
    return [int(x) for x in np.flatnonzero(mask_row)]


def test_reset_injects_and_reports_deals() -> None:
    dealers, hands = _deal_arrays(0, 5)
    eng = BatchedEnv(5, seed=1)
    obs, mask, seat = eng.reset(dealers=dealers, hands=hands)
    got_dealers, got_hands = eng.current_deals()
    np.testing.assert_array_equal(got_dealers, dealers)
    np.testing.assert_array_equal(got_hands, np.sort(hands, axis=2))
    np.testing.assert_array_equal(seat, dealers)  # the dealer chooses trump first
    for i in range(5):
        assert _legal(mask[i]) == [48, 49, 50, 51, 52, 53]
        assert list(np.flatnonzero(obs[i, :N_CARDS])) == sorted(hands[i, dealers[i]])
    hand_number, scores = eng.match_info()
    assert hand_number.tolist() == [0] * 5 and scores.tolist() == [[0, 0]] * 5


def test_seed_reproduces_deals_and_first_dealer_option() -> None:
    a, b = BatchedEnv(64, seed=7), BatchedEnv(64, seed=7)
    a.reset()
    b.reset()
    np.testing.assert_array_equal(a.current_deals()[1], b.current_deals()[1])
    a.reset(seed=7)
    c = BatchedEnv(64)
    c.reset(seed=7)
    np.testing.assert_array_equal(a.current_deals()[1], c.current_deals()[1])
    other = BatchedEnv(64, seed=8)
    other.reset()
    assert not np.array_equal(a.current_deals()[1], other.current_deals()[1])
    fixed = BatchedEnv(64, seed=3, first_dealer=2)
    _, _, seat = fixed.reset()
    assert set(seat.tolist()) == {2}


def test_random_deals_are_uniform() -> None:
    """Each card goes to each seat relative to the dealer about equally often; dealers too."""
    eng = BatchedEnv(8192, seed=11)
    eng.reset()
    dealers, hands = eng.current_deals()
    assert np.array_equal(
        np.sort(hands.reshape(8192, -1), axis=1),
        np.broadcast_to(np.arange(N_CARDS), (8192, N_CARDS)),
    )
    counts = np.bincount(dealers, minlength=4)
    assert np.all(np.abs(counts - 2048) < 5 * np.sqrt(8192 * 3 / 16))
    holder = np.zeros((8192, N_CARDS), np.int64)
    for s in range(N_SEATS):
        np.put_along_axis(holder, hands[:, s], s, axis=1)
    rel = (holder - dealers[:, None]) % N_SEATS
    for c in (0, 8, 30, 47):
        counts = np.bincount(rel[:, c], minlength=4)
        assert np.all(np.abs(counts - 2048) < 5 * np.sqrt(8192 * 3 / 16)), (c, counts)


def test_constructor_validates() -> None:
    for bad in (0, -2, 2.5, True, "4", None):
        with pytest.raises(ValueError, match="num_envs must be an int >= 1"):
            BatchedEnv(bad)  # type: ignore[arg-type]
    for options in (
        {"max_doubling_level": 5},
        {"butifarra_base": 3},
        {"target_score": 0},
        {"first_dealer": 4},
    ):
        with pytest.raises(ValueError) as ours:
            BatchedEnv(2, **options)
        with pytest.raises(ValueError) as reference:
            Options(**options)
        assert str(ours.value) == str(reference.value)
    with pytest.raises(ValueError, match="unknown option"):
        BatchedEnv(2, max_doubling=3)
    for bad in (0, -1.0, float("nan"), True):
        with pytest.raises(ValueError, match="reward_scale"):
            BatchedEnv(2, reward_scale=bad)
    with pytest.raises(RuntimeError, match="reset"):
        BatchedEnv(2).step(np.array([48, 48]))


def test_bad_deals_are_refused() -> None:
    eng = BatchedEnv(3, seed=0)
    dealers, hands = _deal_arrays(1, 3)
    broken = hands.copy()
    broken[1, 0, 0] = broken[1, 1, 0]  # a card twice, another missing
    with pytest.raises(ValueError, match="hand 1 does not hold the 48 cards"):
        eng.reset(dealers=dealers, hands=broken)
    with pytest.raises(ValueError, match=r"shape \(3, 4, 12\)"):
        eng.reset(dealers=dealers, hands=hands[:, :, :11])
    with pytest.raises(ValueError, match="hand 2 has 4"):
        eng.reset(dealers=np.array([0, 1, 4]), hands=hands)
    eng.set_deal_fn(lambda ids, d: np.zeros((len(ids), 4, 12), np.int64))
    with pytest.raises(ValueError, match="deal_fn: hand 0"):
        eng.reset()
    with pytest.raises(ValueError, match="callable"):
        eng.set_deal_fn(42)  # type: ignore[arg-type]


def test_bad_actions_name_the_hand_and_leave_state_alone() -> None:
    dealers, hands = _deal_arrays(2, 4)
    eng, twin = BatchedEnv(4, seed=0), BatchedEnv(4, seed=0)
    eng.reset(dealers=dealers, hands=hands)
    twin.reset(dealers=dealers, hands=hands)
    good = np.array([48, 52, 53, 49])
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        eng.step(good[:3])
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        eng.step(good[:, None])
    with pytest.raises(ValueError, match="integer"):
        eng.step(good.astype(np.float64))
    bad = good.copy()
    bad[2] = DOUBLE
    with pytest.raises(ValueError) as err:
        eng.step(bad)
    msg = str(err.value)
    assert "hand 2" in msg and "54 (double)" in msg and "phase 'choose_trump'" in msg
    assert "legal actions: [48 (trump oros), 49 (trump copas)" in msg and "53 (delegate)" in msg
    for value in (-1, 56):
        bad[2] = value
        with pytest.raises(ValueError, match=f"illegal action {value} .* in hand 2"):
            eng.step(bad)
    # Nothing moved: the engine carries on exactly as an untouched twin.
    rng = np.random.default_rng(0)
    for _ in range(80):
        out = eng.step(good)
        for x, y in zip(out, twin.step(good), strict=True):
            np.testing.assert_array_equal(x, y)
        good = _choose(rng, out[1], 0.5)


def test_outputs_are_fresh_arrays() -> None:
    eng, twin = BatchedEnv(8, seed=4), BatchedEnv(8, seed=4)
    obs, mask, seat = eng.reset()
    twin.reset()
    action = _choose(np.random.default_rng(0), mask, 0.5)
    obs[:] = 7
    mask[:] = 1
    seat[:] = 9
    for x, y in zip(eng.step(action), twin.step(action), strict=True):
        np.testing.assert_array_equal(x, y)
    state = eng.state()
    state[:] = 0
    np.testing.assert_array_equal(eng.state(), twin.state())


def test_engine_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys, numpy as np; from butifarra_env.envs.batched import BatchedEnv; "
        "e = BatchedEnv(2, seed=0); e.reset(); e.step(np.array([53, 53])); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_torch_hand_over_on_cpu() -> None:
    torch = need("torch")
    eng, twin = BatchedEnv(32, seed=5), BatchedEnv(32, seed=5)
    _, mask, _ = eng.reset()
    twin.reset()
    rng = np.random.default_rng(1)
    dtypes = (torch.uint8, torch.int8, torch.int64, torch.float32, torch.bool)
    for _ in range(120):
        action = _choose(rng, mask, 0.5)
        got = eng.step(torch.from_numpy(action))
        want = twin.step(action)
        for g, w, dt in zip(got, want, dtypes, strict=True):
            assert isinstance(g, torch.Tensor) and g.dtype == dt and g.device.type == "cpu"
            np.testing.assert_array_equal(g.numpy(), w)
        mask = want[1]
    with pytest.raises(ValueError, match="integers"):
        eng.step(torch.zeros(32))
    dev = BatchedEnv(4, seed=0, device="cpu")
    obs, mask, seat = dev.reset()
    assert isinstance(obs, torch.Tensor) and isinstance(dev.state(), torch.Tensor)
    out = dev.step(np.argmax(mask.numpy(), axis=1))
    assert all(isinstance(t, torch.Tensor) for t in out)


def test_hand_number_is_clipped_after_255_hands() -> None:
    """A long match: the hand number in the observation stops at 255 (observation.CLIP)."""
    eng = BatchedEnv(2, seed=0, target_score=10**6, max_doubling_level=0)
    _, mask, _ = eng.reset()
    offset = OFFSETS["hand_number"]
    seen = set()
    while True:
        obs, mask, _, _, done = eng.step(np.argmax(mask, axis=1))
        assert not done.any()
        hand_number, _ = eng.match_info()
        np.testing.assert_array_equal(obs[:, offset], np.minimum(hand_number, 255))
        seen.update(hand_number.tolist())
        if hand_number.min() >= 257:
            break
    assert {254, 255, 256} <= seen
