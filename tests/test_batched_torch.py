"""The torch engine against the numpy engine, step for step, on CPU (and CUDA when present).

``BatchedEnv`` is held to ``butifarra_v0`` by tests/test_batched.py; here ``TorchBatchedEnv``
is held to ``BatchedEnv``: both are driven through the same deals and the same random legal
actions (chosen from the numpy engine's masks with a seeded generator), and at every step the
observations (uint8 or float32, as the case says), masks, seats to move, rewards, episode ends,
full states and (with ``keep_final_obs``) final observations must be identical, dtypes included.

Deals: either the torch engine follows the numpy engine's deals (a host deal function that
also sets the dealers of new episodes), or, with ``first_dealer`` fixed so the dealers agree,
the numpy engine follows the torch engine's own device deals.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from butifarra_env.core import rules
from butifarra_env.core.actions import DOUBLE, N_ACTIONS
from butifarra_env.core.cards import N_CARDS
from butifarra_env.core.observation import OBS_SIZE, OFFSETS, SIZES, STATE_SIZE
from butifarra_env.core.options import Options
from butifarra_env.core.rules import (
    N_SEATS,
    NO_TRUMP,
    PHASE_CHOOSE_TRUMP_DELEGATED,
    PHASE_DOUBLING,
)
from butifarra_env.envs.batched import BatchedEnv
from tests.extras import need
from tests.helpers import choose_batch_actions as _choose
from tests.helpers import random_deals as _random_deals

torch = need("torch")

from butifarra_env.envs import batched_torch  # noqa: E402
from butifarra_env.envs.batched_torch import TorchBatchedEnv  # noqa: E402

DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]
DTYPES = {
    "obs": None,  # uint8 or float32, as obs_format
    "mask": torch.int8,
    "seat": torch.int64,
    "rewards": torch.float32,
    "done": torch.bool,
}


@pytest.fixture(autouse=True)
def _one_thread() -> Any:
    """torch's CPU kernels on one thread: these batches are small, and on a busy machine its
    multi-threaded kernels can wait on each other for far longer than they compute."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@dataclasses.dataclass
class Case:
    name: str
    options: dict[str, Any]
    n_envs: int = 64
    n_steps: int = 200
    obs_format: str = "uint8"
    p_double: float = 0.5
    p_hold: float = 0.0  # share of envs held still (step(active=...)) each step
    keep_final: bool = False
    reward_scale: float = 1.0
    torch_deals: bool = False  # the numpy engine follows the device deals (needs first_dealer)
    compile: bool = False  # TorchBatchedEnv(compile=True) (takes effect with torch_deals only)


@dataclasses.dataclass
class Seen:
    decisions: int = 0
    episodes: int = 0
    finals: int = 0
    levels: set[int] = dataclasses.field(default_factory=set)
    trumps: set[int] = dataclasses.field(default_factory=set)
    phases: set[int] = dataclasses.field(default_factory=set)
    max_hand_number: int = 0
    top_level: dict[str, int] = dataclasses.field(default_factory=dict)  # "suit", "butifarra"
    narrowed: int = 0  # obligada: card decisions with fewer legal cards than lliure gives
    compiled: bool = False  # the torch engine still had compile on at the end (no fallback)


def _field(obs: np.ndarray, name: str) -> np.ndarray:
    return obs[:, OFFSETS[name] : OFFSETS[name] + SIZES[name]]


def _host(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy()


def _same(what: str, step: int, want: np.ndarray, got: Any, device: str) -> None:
    assert isinstance(got, torch.Tensor), f"{what}: not a tensor but {type(got).__name__}"
    assert got.device.type == device, f"{what} on {got.device}, want {device}"
    g = _host(got)
    assert g.dtype == want.dtype, f"{what} dtype {g.dtype} != {want.dtype}"
    assert g.shape == want.shape, f"{what} shape {g.shape} != {want.shape}"
    if not np.array_equal(g, want):
        bad = int(np.flatnonzero((g != want).reshape(len(want), -1).any(axis=1))[0])
        at = np.flatnonzero((g[bad] != want[bad]).ravel())[:10]
        pytest.fail(
            f"step {step}, env {bad}: {what} differs at {at}: torch {g[bad].ravel()[at]}, "
            f"numpy {want[bad].ravel()[at]}"
        )


def _drive(case: Case, device: str, seed: int) -> Seen:
    """Run ``case`` through both engines in lockstep; assert equality throughout."""
    n = case.n_envs
    common = dict(
        reward_scale=case.reward_scale,
        obs_format=case.obs_format,
        keep_final_obs=case.keep_final,
        **case.options,
    )
    ref = BatchedEnv(n, seed=seed, **common)
    eng = TorchBatchedEnv(n, seed=seed, device=device, compile=case.compile, **common)
    rng = np.random.default_rng(seed + 1000)
    seen = Seen()
    # The deals of the leading engine after its latest step or reset.
    lead: dict[str, np.ndarray] = {}
    got: tuple[Any, ...]
    want: tuple[Any, ...]

    def follow(ids: np.ndarray, dealers: np.ndarray) -> Any:
        if case.torch_deals:  # the numpy engine follows; the dealers must agree already
            np.testing.assert_array_equal(dealers, lead["dealers"][ids])
            return lead["hands"][ids]
        return lead["dealers"][ids], lead["hands"][ids]

    if case.torch_deals:
        assert case.options.get("first_dealer") is not None, "dealers would not agree"
        ref.set_deal_fn(follow)
        got = eng.reset()
        lead["dealers"], lead["hands"] = (_host(x) for x in eng.current_deals())
        want = ref.reset(dealers=lead["dealers"], hands=lead["hands"])
    else:
        eng.set_deal_fn(follow, with_dealers=True)
        want = ref.reset()
        lead["dealers"], lead["hands"] = ref.current_deals()
        got = eng.reset(dealers=lead["dealers"], hands=lead["hands"])

    def compare(step: int, want: tuple, got: tuple) -> None:
        for (name, dtype), w, g in zip(DTYPES.items(), want, got, strict=False):
            if dtype is not None:
                assert g.dtype == dtype, f"{name} torch dtype {g.dtype}, want {dtype}"
            _same(name, step, w, g, device)
        _same("state", step, ref.state(), eng.state(), device)
        if case.keep_final:
            ids, views = ref.final_observations()
            got_ids, got_views = eng.final_observations()
            _same("final env ids", step, ids, got_ids, device)
            _same("final observations", step, views, got_views, device)
            seen.finals += len(ids)
        obs = want[0] > 0  # 0/1 fields; float32 scaling keeps zeros zero
        seen.levels.update(_field(obs, "doubling_level").argmax(axis=1).tolist())
        seen.trumps.update(_field(obs, "trump").argmax(axis=1).tolist())
        seen.phases.update(_field(obs, "phase").argmax(axis=1).tolist())
        seen.max_hand_number = max(seen.max_hand_number, int(_host(eng.match_info()[0]).max()))
        trump = _field(obs, "trump").argmax(axis=1)
        level = _field(obs, "doubling_level").argmax(axis=1)
        for kind, rows in (("suit", trump < NO_TRUMP), ("butifarra", trump == NO_TRUMP)):
            if rows.any():
                seen.top_level[kind] = max(seen.top_level.get(kind, 0), int(level[rows].max()))
        if case.options.get("obligada"):
            seen.narrowed += _narrowed(ref, want[1])

    compare(0, want, got)
    mask = want[1]
    for step in range(1, case.n_steps + 1):
        actions = _choose(rng, mask, case.p_double)
        active = rng.random(n) >= case.p_hold if case.p_hold else None
        t_actions = torch.from_numpy(actions).to(device)
        t_active = None if active is None else torch.from_numpy(active).to(device)
        if case.torch_deals:
            got = eng.step(t_actions, t_active)
            lead["dealers"], lead["hands"] = (_host(x) for x in eng.current_deals())
            want = ref.step(actions, active)
        else:
            want = ref.step(actions, active)
            lead["dealers"], lead["hands"] = ref.current_deals()
            got = eng.step(t_actions, t_active)
        compare(step, want, got)
        mask = want[1]
        seen.decisions += n if active is None else int(active.sum())
        seen.episodes += int(want[4].sum())
    seen.compiled = eng.compile
    return seen


def _narrowed(ref: BatchedEnv, mask: np.ndarray) -> int:
    """How many envs in play have fewer legal cards than the default (lliure) rules give:
    obligada fired there. Reads the numpy engine's registers, as the reference's are read in
    tests/test_batched.py."""
    count = 0
    for i in np.flatnonzero(ref._in_play):
        seat = int(ref._to_move[i])
        plain = rules.legal_cards(
            int(ref._hands[i, seat]),
            int(ref._led_suit[i]),
            int(ref._win_card[i]),
            (int(ref._win_seat[i]) ^ seat) & 1 == 0,
            int(ref._trump[i]),
        )
        count += plain.bit_count() > int(mask[i].sum())
    return count


def _check_coverage(case: Case, seen: Seen) -> None:
    """The random play reached what the case is there to test."""
    top = case.options.get("max_doubling_level", 4)
    cap = case.options.get("butifarra_max_doubling_level")
    if cap is not None:  # butifarras stop at the cap, suits go on to the top
        assert seen.top_level["butifarra"] == min(cap, top), (case.name, seen.top_level)
        assert seen.top_level["suit"] == top, (case.name, seen.top_level)
    if case.options.get("obligada"):
        assert seen.narrowed > 20, (case.name, seen.narrowed)
    assert seen.levels == set(range(top + 1)), (case.name, seen.levels)
    assert seen.trumps >= {0, 1, 2, 3, 4, 5}, (case.name, seen.trumps)  # 5: not chosen yet
    assert {PHASE_CHOOSE_TRUMP_DELEGATED} <= seen.phases, case.name
    assert (PHASE_DOUBLING in seen.phases) == (top > 0), case.name
    if case.options.get("target_score") is not None:
        assert seen.max_hand_number >= 2, case.name
    assert seen.episodes > 0, case.name
    if case.keep_final:
        assert seen.finals == seen.episodes, case.name


QUICK = [
    Case(
        "single-variants-float32-held-final",
        {"obligada": True, "linear_doubling": True, "butifarra_max_doubling_level": 2},
        n_envs=32,
        n_steps=260,
        obs_format="float32",
        p_hold=0.2,
        keep_final=True,
    ),
    Case(
        "match51-lvl1-base1-dealer2-device-deals",
        {"target_score": 51, "max_doubling_level": 1, "butifarra_base": 1, "first_dealer": 2},
        n_envs=32,
        n_steps=260,
        torch_deals=True,
        reward_scale=0.1,
    ),
]


@pytest.mark.parametrize("case", QUICK, ids=[c.name for c in QUICK])
@pytest.mark.parametrize("device", DEVICES)
def test_torch_engine_matches_numpy_engine(case: Case, device: str) -> None:
    seen = _drive(case, device, seed=7)
    _check_coverage(case, seen)


VARIANTS = {"obligada": True, "linear_doubling": True, "butifarra_max_doubling_level": 2}
"""Every regional variant of RULES.md on (butifarra stops at recontrar)."""

SLOW_CASES = [
    *(
        Case(
            f"single-lvl{lvl}-base{base}",
            {"max_doubling_level": lvl, "butifarra_base": base},
            n_envs=128,
            n_steps=170,
            obs_format="float32" if (lvl + base) % 2 else "uint8",
            p_double=0.6,
            p_hold=0.1 if lvl == 3 else 0.0,
            keep_final=lvl == 2,
            reward_scale=0.37 if base == 1 and lvl == 1 else 1.0,
        )
        for lvl in range(5)
        for base in (1, 2)
    ),
    Case("single-variants", VARIANTS, n_envs=128, n_steps=170, p_double=0.7),
    Case(
        "single-variants-cap0-base1-float32",
        {**VARIANTS, "butifarra_max_doubling_level": 0, "butifarra_base": 1},
        n_envs=128,
        n_steps=170,
        obs_format="float32",
        p_double=0.7,
    ),
    Case(
        "single-obligada-lvl2-held",
        {"obligada": True, "max_doubling_level": 2},
        n_envs=128,
        n_steps=170,
        p_hold=0.1,
    ),
    Case(
        "single-linear-lvl4-scale",
        {"linear_doubling": True},
        n_envs=128,
        n_steps=170,
        p_double=0.7,
        reward_scale=0.01,
    ),
    Case(
        "single-variants-lvl3-cap1-dealer2-device-deals",
        {**VARIANTS, "max_doubling_level": 3, "butifarra_max_doubling_level": 1, "first_dealer": 2},
        n_envs=128,
        n_steps=170,
        p_double=0.9,
        torch_deals=True,
    ),
    Case(
        "match51-variants-final",
        {**VARIANTS, "target_score": 51},
        n_envs=128,
        n_steps=300,
        p_double=0.6,
        keep_final=True,
    ),
    Case(
        "single-lvl3-dealer0-device-deals",
        {"max_doubling_level": 3, "first_dealer": 0},
        n_envs=128,
        n_steps=170,
        torch_deals=True,
    ),
    Case(
        "match51-lvl2-base1",
        {"target_score": 51, "max_doubling_level": 2, "butifarra_base": 1},
        128,
        300,
    ),
    Case(
        "match101-dealer1-device-deals-final",
        {"target_score": 101, "first_dealer": 1},
        n_envs=128,
        n_steps=300,
        p_double=0.3,
        keep_final=True,
        torch_deals=True,
    ),
    Case(
        "match300-float32-held",
        {"target_score": 300},
        n_envs=128,
        n_steps=300,
        obs_format="float32",
        p_double=0.3,
        p_hold=0.15,
    ),
    Case(
        "match51-lvl0-dealer3-device-deals",
        {"target_score": 51, "max_doubling_level": 0, "first_dealer": 3},
        n_envs=128,
        n_steps=300,
        torch_deals=True,
    ),
]


@pytest.mark.parametrize("device", DEVICES)
def test_torch_engine_matches_numpy_engine_200k_decisions(device: str) -> None:
    """Every option (doubling levels 0-4, butifarra base 1 and 2, matches to 51, 101 and 300,
    fixed first dealers, obligada, linear doubling, a doubling cap in butifarra), both
    observation formats, held envs, final observations, reward scales and both deal sources:
    over 200,000 decisions in all."""
    total = 0
    for i, case in enumerate(SLOW_CASES):
        seen = _drive(case, device, seed=100 + i)
        _check_coverage(case, seen)
        total += seen.decisions
    assert total >= 200_000, total


# --------------------------------------------------------------------------- interface


def _deal_arrays(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, N_SEATS, n), _random_deals(rng, n)


def _equal(x: Any, y: Any) -> None:
    assert x.dtype == y.dtype and x.device == y.device and torch.equal(x, y), (x, y)


def _first_legal(mask: Any) -> Any:
    return mask.argmax(dim=1)


def test_constructor_validates_like_the_numpy_engine() -> None:
    cases: tuple[tuple[tuple[Any, ...], dict[str, Any]], ...] = (
        ((0,), {}),
        ((2.5,), {}),
        ((True,), {}),
        ((2,), {"max_doubling_level": 5}),
        ((2,), {"butifarra_base": 3}),
        ((2,), {"target_score": 0}),
        ((2,), {"first_dealer": 4}),
        ((2,), {"reward_scale": 0}),
        ((2,), {"obs_format": "int8"}),
        ((2,), {"keep_final_obs": 1}),
        ((2,), {"max_doubling": 3}),
        ((2,), {"obligada": 1}),
        ((2,), {"max_doubling_level": 2, "butifarra_max_doubling_level": 3}),
    )
    for args, kwargs in cases:
        with pytest.raises(ValueError) as ours:
            TorchBatchedEnv(*args, **kwargs)
        with pytest.raises(ValueError) as reference:
            BatchedEnv(*args, **kwargs)
        assert str(ours.value) == str(reference.value)
    with pytest.raises(ValueError, match="seed must be an int >= 0"):
        TorchBatchedEnv(2, seed=-1)
    with pytest.raises(ValueError, match="check must be True or False"):
        TorchBatchedEnv(2, check=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="compile must be True or False"):
        TorchBatchedEnv(2, compile="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="device 'nowhere' is not usable"):
        TorchBatchedEnv(2, device="nowhere")
    with pytest.raises(RuntimeError, match="reset"):
        TorchBatchedEnv(2).step(torch.tensor([48, 48]))


def test_options_it_does_not_play_are_refused_not_ignored(monkeypatch: Any) -> None:
    """Every option is played today; one that Options gains before this engine does must be
    refused by name, never run as the default rules (shown by taking obligada off the list)."""
    played = set(batched_torch._IMPLEMENTED_OPTIONS)
    assert played == {f.name for f in dataclasses.fields(Options)}
    monkeypatch.setattr(batched_torch, "_IMPLEMENTED_OPTIONS", tuple(played - {"obligada"}))
    with pytest.raises(ValueError, match="does not implement option 'obligada' yet"):
        TorchBatchedEnv(2, obligada=True)
    TorchBatchedEnv(2, obligada=False)  # the default is the rule it plays


@pytest.mark.parametrize("device", DEVICES)
def test_bad_actions_are_refused_and_change_nothing(device: str) -> None:
    dealers, hands = _deal_arrays(2, 4)
    eng = TorchBatchedEnv(4, seed=0, device=device)
    twin = TorchBatchedEnv(4, seed=0, device=device)
    eng.reset(dealers=dealers, hands=hands)
    twin.reset(dealers=dealers, hands=hands)
    good = torch.tensor([48, 52, 53, 49], device=device)
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        eng.step(good[:3])
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        eng.step(good[:, None])
    with pytest.raises(ValueError, match="integers"):
        eng.step(good.float())
    with pytest.raises(ValueError, match="integers"):
        eng.step(good > 50)
    with pytest.raises(ValueError, match="integer array"):
        eng.step(np.array([48.0, 52, 53, 49]))
    with pytest.raises(ValueError, match="active must be a bool array"):
        eng.step(good, active=torch.ones(4, device=device))
    bad = good.clone()
    bad[2] = DOUBLE
    with pytest.raises(ValueError) as err:
        eng.step(bad)
    msg = str(err.value)
    assert "hand 2" in msg and "54 (double)" in msg and "phase 'choose_trump'" in msg
    assert "legal actions: [48 (trump oros), 49 (trump copas)" in msg and "53 (delegate)" in msg
    for value in (-1, 56, 2**40):
        bad[2] = value
        with pytest.raises(ValueError, match=f"illegal action {value} .* in hand 2"):
            eng.step(bad)
    # An illegal action in a held env is not looked at.
    held = torch.tensor([True, True, False, True], device=device)
    out = eng.step(bad, active=held)
    ref = twin.step(good, active=held)
    for x, y in zip(out, ref, strict=True):
        _equal(x, y)
    for _ in range(60):  # nothing else moved: the engine carries on exactly as its twin
        action = _first_legal(out[1])
        out = eng.step(action)
        for x, y in zip(out, twin.step(action), strict=True):
            _equal(x, y)


@pytest.mark.parametrize("device", DEVICES)
def test_unchecked_steps_play_the_lowest_legal_action_and_count(device: str) -> None:
    """check=False never reads the device: an illegal action becomes its env's lowest legal
    action id, and the count is kept on the device."""
    n = 16
    eng = TorchBatchedEnv(n, seed=3, device=device, check=False, max_doubling_level=2)
    twin = TorchBatchedEnv(n, seed=3, device=device, max_doubling_level=2)
    _, mask, _ = eng.reset()
    twin.reset()
    gen = torch.Generator(device=device).manual_seed(0)
    expected = 0
    for _ in range(150):
        noise = torch.rand(mask.shape, generator=gen, device=device)
        legal_pick = torch.where(mask == 1, noise, -1.0).argmax(dim=1)
        wild = torch.randint(-3, 70, (n,), generator=gen, device=device)
        use_wild = torch.rand(n, generator=gen, device=device) < 0.25
        actions = torch.where(use_wild, wild, legal_pick)
        lowest = mask.argmax(dim=1)
        is_legal = (wild >= 0) & (wild < N_ACTIONS)
        is_legal &= mask.gather(1, wild.clamp(0, N_ACTIONS - 1)[:, None]).squeeze(1) == 1
        replaced = use_wild & ~is_legal
        expected += int(replaced.sum())
        played = torch.where(replaced, lowest, actions)
        out = eng.step(actions)
        ref = twin.step(played)
        for x, y in zip(out, ref, strict=True):
            _equal(x, y)
        mask = out[1]
    assert eng.illegal_actions.device.type == device
    assert int(eng.illegal_actions) == expected > 100


@pytest.mark.parametrize("device", DEVICES)
def test_reset_injects_and_reports_deals(device: str) -> None:
    dealers, hands = _deal_arrays(0, 5)
    eng = TorchBatchedEnv(5, seed=1, device=device)
    obs, mask, seat = eng.reset(dealers=torch.from_numpy(dealers), hands=hands)
    got_dealers, got_hands = eng.current_deals()
    assert got_hands.device.type == device and got_hands.dtype == torch.int64
    np.testing.assert_array_equal(_host(got_dealers), dealers)
    np.testing.assert_array_equal(_host(got_hands), np.sort(hands, axis=2))
    np.testing.assert_array_equal(_host(seat), dealers)  # the dealer chooses trump first
    for i in range(5):
        assert np.flatnonzero(_host(mask[i])).tolist() == [48, 49, 50, 51, 52, 53]
        assert np.flatnonzero(_host(obs[i, :N_CARDS])).tolist() == sorted(hands[i, dealers[i]])
    hand_number, scores = eng.match_info()
    assert _host(hand_number).tolist() == [0] * 5 and _host(scores).tolist() == [[0, 0]] * 5
    assert eng.state().shape == (5, STATE_SIZE) and obs.shape == (5, OBS_SIZE)


def test_bad_deals_are_refused_like_the_numpy_engine() -> None:
    dealers, hands = _deal_arrays(1, 3)
    broken = hands.copy()
    broken[1, 0, 0] = broken[1, 1, 0]
    for kwargs in (
        {"dealers": dealers, "hands": broken},
        {"dealers": dealers, "hands": hands[:, :, :11]},
        {"dealers": np.array([0, 1, 4]), "hands": hands},
        {"dealers": dealers.astype(float)},
    ):
        with pytest.raises(ValueError) as ours:
            TorchBatchedEnv(3).reset(**kwargs)
        with pytest.raises(ValueError) as reference:
            BatchedEnv(3).reset(**kwargs)
        assert str(ours.value) == str(reference.value)
    eng = TorchBatchedEnv(3)
    eng.set_deal_fn(lambda ids, d: np.zeros((len(ids), 4, 12), np.int64))
    with pytest.raises(ValueError, match="deal_fn: hand 0"):
        eng.reset()
    eng.set_deal_fn(
        lambda ids, d: _random_deals(np.random.default_rng(0), len(ids)), with_dealers=True
    )
    with pytest.raises(ValueError, match=r"must return \(dealers, hands\)"):
        eng.reset()
    with pytest.raises(ValueError, match="callable"):
        eng.set_deal_fn(42)  # type: ignore[arg-type]


def test_a_deal_function_cannot_move_the_dealer_of_a_match() -> None:
    eng = TorchBatchedEnv(2, seed=0, target_score=10**4, max_doubling_level=0)
    rng = np.random.default_rng(0)
    eng.set_deal_fn(lambda ids, d: ((d + 1) % 4, _random_deals(rng, len(ids))), with_dealers=True)
    _, mask, _ = eng.reset()  # a new episode: its dealer may be chosen
    with pytest.raises(ValueError, match="in a match whose next dealer is"):
        for _ in range(60):  # the first hand ends after 49 decisions; the match goes on
            _, mask, *_ = eng.step(_first_legal(mask))


@pytest.mark.parametrize("device", DEVICES)
def test_device_deals_follow_the_seed(device: str) -> None:
    def deals(eng: TorchBatchedEnv) -> np.ndarray:
        return _host(eng.current_deals()[1])

    a, b = TorchBatchedEnv(64, seed=7, device=device), TorchBatchedEnv(64, seed=7, device=device)
    a.reset()
    b.reset()
    np.testing.assert_array_equal(deals(a), deals(b))
    a.reset(seed=7)
    c = TorchBatchedEnv(64, device=device)
    c.reset(seed=7)
    np.testing.assert_array_equal(deals(a), deals(c))
    other = TorchBatchedEnv(64, seed=8, device=device)
    other.reset()
    assert not np.array_equal(deals(a), deals(other))
    _, _, seat = TorchBatchedEnv(64, seed=3, device=device, first_dealer=2).reset()
    assert set(_host(seat).tolist()) == {2}


def test_device_deals_are_uniform() -> None:
    """Each card goes to each seat relative to the dealer about equally often; dealers too."""
    n = 8192
    eng = TorchBatchedEnv(n, seed=11)
    eng.reset()
    dealers, hands = (_host(x) for x in eng.current_deals())
    assert np.array_equal(
        np.sort(hands.reshape(n, -1), axis=1), np.broadcast_to(np.arange(N_CARDS), (n, N_CARDS))
    )
    bound = 5 * np.sqrt(n * 3 / 16)
    assert np.all(np.abs(np.bincount(dealers, minlength=4) - n / 4) < bound)
    holder = np.zeros((n, N_CARDS), np.int64)
    for s in range(N_SEATS):
        np.put_along_axis(holder, hands[:, s], s, axis=1)
    rel = (holder - dealers[:, None]) % N_SEATS
    for c in (0, 8, 30, 47):
        counts = np.bincount(rel[:, c], minlength=4)
        assert np.all(np.abs(counts - n / 4) < bound), (c, counts)


@pytest.mark.parametrize("device", DEVICES)
def test_auto_reset_deals_are_fresh_every_hand(device: str) -> None:
    """Hands of the shortest length (49 decisions) end in lockstep again and again: every
    auto-reset deal must be new (the deal pool is redrawn in time) and a valid deal."""
    n = 32
    eng = TorchBatchedEnv(n, seed=5, device=device, max_doubling_level=0)
    _, mask, _ = eng.reset()
    seen = {_host(h).tobytes() for h in eng.current_deals()[1]}
    ends = 0
    for _ in range(49 * 6):
        _, mask, _, _, done = eng.step(_first_legal(mask))
        if bool(done.any()):
            assert bool(done.all())
            ends += 1
            hands = _host(eng.current_deals()[1])
            assert (np.sort(hands.reshape(n, -1), axis=1) == np.arange(N_CARDS)).all()
            new = {h.tobytes() for h in hands}
            assert len(new) == n and not new & seen
            seen |= new
    assert ends == 6


@pytest.mark.parametrize("device", DEVICES)
def test_outputs_are_fresh_tensors(device: str) -> None:
    eng, twin = TorchBatchedEnv(8, seed=4, device=device), TorchBatchedEnv(8, seed=4, device=device)
    obs, mask, seat = eng.reset()
    twin.reset()
    action = _first_legal(mask)
    obs[:] = 7
    mask[:] = 1
    seat[:] = 9
    for x, y in zip(eng.step(action), twin.step(action), strict=True):
        _equal(x, y)
    state = eng.state()
    state[:] = 0
    _equal(eng.state(), twin.state())
    hn, scores = eng.match_info()
    hn += 1
    _equal(eng.match_info()[0], twin.match_info()[0])


def test_state_is_a_few_hundred_bytes_per_hand() -> None:
    """The compact state grows linearly, far below the numpy engine's four 491-byte rows."""
    small, large = TorchBatchedEnv(1024), TorchBatchedEnv(2048)
    per_hand = (large.state_nbytes() - small.state_nbytes()) / 1024
    assert per_hand == large.state_nbytes() // 2048 and per_hand < N_SEATS * OBS_SIZE / 4
    final = TorchBatchedEnv(1024, keep_final_obs=True)
    assert final.state_nbytes() > small.state_nbytes()


COMPILED = Case(
    "compiled-match51-variants-dealer1-device-deals-held-final",
    {**VARIANTS, "target_score": 51, "first_dealer": 1},
    n_envs=64,
    n_steps=300,
    p_double=0.6,
    p_hold=0.1,
    keep_final=True,
    torch_deals=True,  # a host deal function would step eagerly
    compile=True,
)


def test_compiled_engine_matches_numpy_engine() -> None:
    """compile=True (the step's rules through torch.compile) is held to the numpy engine like
    the eager step: every variant, a match, held envs and final observations. Slow: the first
    step compiles (tens of seconds on a busy CPU)."""
    if not hasattr(torch, "compile"):
        pytest.skip("this torch has no torch.compile")
    seen = _drive(COMPILED, "cpu", seed=21)
    _check_coverage(COMPILED, seen)
    if not seen.compiled:  # it fell back (warned): the comparison above ran the eager step
        pytest.skip("torch.compile is not usable here (no C++ compiler?): fell back to eager")


@pytest.mark.parametrize("fails", ["at compile", "at first call"])
def test_compile_falls_back_to_the_eager_step_with_a_warning(monkeypatch: Any, fails: str) -> None:
    """Where torch.compile is unavailable (no compiler, no backend for the device) the engine
    warns once, turns ``compile`` off and steps eagerly: the same results, nothing lost."""

    def broken_compile(fn: Any, **kwargs: Any) -> Any:
        if fails == "at compile":
            raise RuntimeError("no backend here")

        def run(*args: Any) -> Any:
            raise RuntimeError("C++ compile failed")

        return run

    monkeypatch.setattr(batched_torch.torch, "compile", broken_compile)
    dealers, hands = _deal_arrays(3, 8)
    eng = TorchBatchedEnv(8, seed=0, compile=True, max_doubling_level=2)
    twin = TorchBatchedEnv(8, seed=0, max_doubling_level=2)
    out: tuple[Any, ...] = eng.reset(dealers=dealers, hands=hands)
    ref: tuple[Any, ...] = twin.reset(dealers=dealers, hands=hands)
    with pytest.warns(RuntimeWarning, match="torch.compile failed .*stepping eagerly"):
        out = eng.step(_first_legal(out[1]))
    ref = twin.step(_first_legal(ref[1]))
    assert eng.compile is False
    for _ in range(80):  # past a hand end: the fallback carries on exactly as the eager twin
        for x, y in zip(out, ref, strict=True):
            _equal(x, y)
        out, ref = eng.step(_first_legal(out[1])), twin.step(_first_legal(ref[1]))


def test_the_package_does_not_import_the_torch_engine() -> None:
    code = (
        "import sys, butifarra_env.envs, butifarra_env.envs.batched; "
        "assert 'butifarra_env.envs.batched_torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
