"""Every bad input gets a clear error naming what was wrong, and leaves state unchanged.

Hypothesis generates wrong types, shapes and ranges for each public entry point of the
environments; each case must raise ValueError (or RuntimeError for a call out of order)
whose message names the argument, and the object must be exactly as before the call.
"""

from __future__ import annotations

import math
import pickle
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from butifarra_env import BatchedEnv, butifarra_v0
from butifarra_env.core.errors import IllegalActionError
from butifarra_env.core.options import Options
from butifarra_env.envs.gym_env import SingleAgentEnv

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# Values of the wrong type for an int option or argument.
NOT_INTS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=5),
    st.lists(st.integers(0, 3), max_size=3),
    st.just(np.float64(2.0)),
    st.just(np.bool_(True)),
    st.just(object()),
)
ACTION_NOT_ID = st.one_of(
    NOT_INTS,
    st.none(),
    st.integers(max_value=-1),
    st.integers(min_value=56),
    st.just(np.array([48])),
    st.just(np.array(48.0)),
)


def _state(env: butifarra_v0.raw_env) -> bytes:
    """Everything observable about an env's position, to compare before/after a refusal."""
    game = env.game
    return pickle.dumps(
        (
            game.actions,
            game.hands,
            env.match_scores,
            [env.observe(a)["observation"].tobytes() for a in env.possible_agents],
            env.agent_selection,
            dict(env.terminations),
            list(env.hand_results),
        )
    )


# ------------------------------------------------------------------ options
@SETTINGS
@given(
    name=st.sampled_from(["target_score", "max_doubling_level", "butifarra_base", "first_dealer"]),
    value=NOT_INTS,
)
def test_options_of_the_wrong_type_are_refused_naming_the_option(name: str, value) -> None:
    for make in (
        lambda: butifarra_v0.raw_env(**{name: value}),
        lambda: BatchedEnv(2, **{name: value}),
        lambda: SingleAgentEnv(**{name: value}),
    ):
        with pytest.raises(ValueError, match=name):
            make()


# Values that are not True or False, for a switch (the variants obligada, linear_doubling).
NOT_BOOLS = st.one_of(
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.none(),
    st.lists(st.booleans(), max_size=2),
    st.just(np.int64(1)),
    st.just(object()),
)


@SETTINGS
@given(name=st.sampled_from(["obligada", "linear_doubling"]), value=NOT_BOOLS)
def test_switch_options_that_are_not_bools_are_refused_naming_the_option(name: str, value) -> None:
    for make in (
        lambda: butifarra_v0.raw_env(**{name: value}),
        lambda: BatchedEnv(2, **{name: value}),
        lambda: SingleAgentEnv(**{name: value}),
    ):
        with pytest.raises(ValueError, match=rf"{name} must be True or False, got "):
            make()


@SETTINGS
@given(value=NOT_INTS.filter(lambda v: v is not None))
def test_butifarra_cap_of_the_wrong_type_is_refused(value) -> None:
    with pytest.raises(ValueError, match="butifarra_max_doubling_level must be an int 0-4"):
        butifarra_v0.raw_env(butifarra_max_doubling_level=value)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("target_score", 0),
        ("max_doubling_level", 5),
        ("butifarra_base", 3),
        ("first_dealer", 4),
        ("butifarra_max_doubling_level", 5),
        ("butifarra_max_doubling_level", -1),
    ],
)
def test_options_out_of_range_say_what_is_allowed(name: str, value: int) -> None:
    with pytest.raises(ValueError, match=rf"{name} must be an int .*got {value}"):
        Options(**{name: value})


def test_numpy_integer_options_are_stored_as_int_and_records_stay_json() -> None:
    import json

    env = butifarra_v0.raw_env(butifarra_base=np.int64(1), target_score=np.int32(51))
    assert type(env.game_options.butifarra_base) is int
    assert type(env.game_options.target_score) is int
    env.reset(seed=0)
    json.dumps(env.game_record())


def test_unknown_options_are_named() -> None:
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['targt_score'\]"):
        butifarra_v0.raw_env(targt_score=101)


# ------------------------------------------------------------------ reset
NEGATIVE = st.integers(max_value=-1)
NOT_PAIRS = NOT_INTS.filter(lambda v: not (isinstance(v, list) and len(v) == 2))
NO_HANDS = st.just([])
RESET_KEYS = ("match_scores", "hand_number", "dealer", "hands", "one_hand")
RESET_BAD = st.one_of(
    st.fixed_dictionaries({"match_scores": st.one_of(NOT_PAIRS, st.integers())}),
    st.fixed_dictionaries(
        {
            "match_scores": st.lists(
                st.one_of(NOT_INTS, st.integers(max_value=-1)), min_size=2, max_size=2
            )
        }
    ),
    st.fixed_dictionaries({"hand_number": st.one_of(NOT_INTS, st.integers(max_value=-1))}),
    st.fixed_dictionaries(
        {"dealer": st.one_of(NOT_INTS, st.integers(4, 99)), "hands": st.just([])}
    ),
    st.fixed_dictionaries(
        {
            "dealer": st.just(0),
            "hands": st.one_of(
                NOT_INTS,
                st.just([[3.5] * 12] * 4),
                st.just([list(range(12))] * 4),
                st.just([list(range(12 * s, 12 * s + 12)) for s in range(3)]),
                st.just([list(range(12 * s, 12 * s + 11)) + [99] for s in range(4)]),
            ),
        }
    ),
    st.fixed_dictionaries({"hands": st.just([list(range(12 * s, 12 * s + 12)) for s in range(4)])}),
    st.fixed_dictionaries({"one_hand": NOT_INTS.filter(lambda v: not isinstance(v, bool))}),
)


@SETTINGS
@given(options=RESET_BAD)
def test_bad_reset_options_are_refused_and_change_nothing(options: dict) -> None:
    env = butifarra_v0.raw_env(target_score=101)
    env.reset(seed=3, options={"match_scores": [40, 20], "hand_number": 2})
    for _ in range(5):
        env.step(env.legal_actions()[0])
    before = _state(env)
    with pytest.raises(ValueError) as err:
        env.reset(options=options)
    message = str(err.value)
    assert any(
        key in message for key in ("match_scores", "hand_number", "dealer", "hands", "one_hand")
    )
    assert _state(env) == before


# ------------------------------------------------------------------ actions
@SETTINGS
@given(action=ACTION_NOT_ID)
def test_an_action_that_is_not_an_action_id_is_refused_everywhere(action) -> None:
    raw = butifarra_v0.raw_env()
    raw.reset(seed=0)
    before = _state(raw)
    with pytest.raises(IllegalActionError, match="an action must be an int action id 0-55"):
        raw.step(action)
    assert _state(raw) == before

    wrapped = butifarra_v0.env()
    wrapped.reset(seed=0)
    with pytest.raises(IllegalActionError, match="an action must be an int action id 0-55"):
        wrapped.step(action)
    assert not any(wrapped.terminations.values())  # refused, not played or penalised

    gym_env = SingleAgentEnv(seat=0)
    gym_env.reset(seed=0)
    with pytest.raises(IllegalActionError, match="an action must be an int action id 0-55"):
        gym_env.step(action)


def test_numpy_and_zero_d_integer_actions_are_accepted() -> None:
    for action in (np.int64, np.int8, lambda a: np.array(a)):
        env = butifarra_v0.raw_env()
        env.reset(seed=0)
        legal = env.legal_actions()[0]
        env.step(action(legal))
        assert env.game.actions == [(env.game.dealer, legal)]


def test_wrapped_env_checks_actions_under_python_O() -> None:
    code = (
        "from butifarra_env import butifarra_v0\n"
        "from butifarra_env.core.errors import IllegalActionError\n"
        "e = butifarra_v0.env(); e.reset(seed=0)\n"
        "try:\n    e.step(56)\nexcept IllegalActionError as x:\n    print('refused', x)\n"
    )
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("refused an action must be"), out.stderr


@pytest.mark.parametrize("action", [np.zeros(3, np.int64), np.zeros((2, 2), np.int64)])
def test_batched_engine_refuses_wrong_shapes_and_changes_nothing(action) -> None:
    eng = BatchedEnv(2, seed=0)
    obs, mask, seat = eng.reset()
    with pytest.raises(ValueError, match=r"actions must have shape \(2,\)"):
        eng.step(action)
    with pytest.raises(ValueError, match="must be an integer array"):
        eng.step(np.array([48.0, 48.0]))
    assert (eng.state() == eng.state()).all()
    again = eng.step(mask.argmax(axis=1))
    assert again[0].shape == obs.shape


# ------------------------------------------------------------------ calls out of order
def test_raw_env_before_reset_and_after_the_end_says_what_to_do() -> None:
    env = butifarra_v0.raw_env()
    for call in (lambda: env.observe("player_0"), lambda: env.step(0), env.last, env.state):
        with pytest.raises(RuntimeError, match=r"call reset\(\)"):
            call()
    env.reset(seed=1)
    while env.agents:
        obs, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else int(np.flatnonzero(obs["action_mask"])[0]))
    for call in (lambda: env.step(0), env.last):
        with pytest.raises(RuntimeError, match="episode is over"):
            call()
    with pytest.raises(ValueError, match="unknown agent 'player_9'"):
        env.observe("player_9")


def test_gymnasium_wrapper_refuses_to_act_after_an_opponent_policy_failed() -> None:
    calls = {"n": 0}

    def flaky(observation: np.ndarray, action_mask: np.ndarray) -> int:
        calls["n"] += 1
        if calls["n"] == 3:
            raise ZeroDivisionError("policy bug")
        return int(np.flatnonzero(action_mask)[0])

    env = SingleAgentEnv(seat=0, opponents=flaky)
    obs, _ = env.reset(seed=0)
    with pytest.raises(ZeroDivisionError):
        for _ in range(60):
            obs, *_ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
    before = list(env.game.actions)
    with pytest.raises(RuntimeError, match=r"opponent policy at seat \d .*policy bug.*reset\(\)"):
        env.step(0)
    assert env.game.actions == before  # nothing was played for the learner out of turn
    env.reset(seed=1)  # and reset recovers


def test_gymnasium_wrapper_names_an_opponent_that_plays_illegally() -> None:
    env = SingleAgentEnv(seat=0, opponents=lambda o, m: 55)  # 'pass' is rarely legal
    with pytest.raises(IllegalActionError, match="illegal action 55"):
        for seed in range(5):
            obs, _ = env.reset(seed=seed)
            for _ in range(60):
                obs, _, done, _, _ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
                if done:
                    break
    with pytest.raises(RuntimeError, match=r"opponent policy at seat \d"):
        env.step(0)


@pytest.mark.parametrize("scale", [0, -1.0, math.inf, math.nan, "1", True, None])
def test_reward_scale_must_be_a_positive_finite_number(scale) -> None:
    for make in (
        lambda: butifarra_v0.raw_env(reward_scale=scale),
        lambda: BatchedEnv(2, reward_scale=scale),
    ):
        with pytest.raises(ValueError, match="reward_scale must be a finite number > 0"):
            make()
