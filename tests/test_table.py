"""The table driver (agents.table): checked moves, batched lockstep, a seat played from outside."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agents import RandomAgent, RuleBasedAgent
from agents.base import Agent
from agents.table import AgentError, Table, play_tables, table_record
from butifarra_env.core.actions import DELEGATE, N_ACTIONS, PASS, TRUMP_BASE
from butifarra_env.core.errors import IllegalActionError
from butifarra_env.core.game import Game
from butifarra_env.core.options import Options
from butifarra_env.core.rules import random_deal
from butifarra_env.records import iter_replay_games, replay_game


def new_game(seed: int = 0, dealer: int = 0) -> Game:
    return Game(Options(), dealer, random_deal(np.random.default_rng(seed), dealer))


class Scripted(Agent):
    """Plays the given actions in order, whatever the position."""

    name = "scripted"

    def __init__(self, *actions: int) -> None:
        self.actions = list(actions)

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        return self.actions.pop(0)

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        return np.array([self.actions.pop(0) for _ in range(len(observations))], dtype=np.int64)


class CountingRule(RuleBasedAgent):
    """The rule-based agent, noting the size of every act_batch call."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        self.batches.append(len(observations))
        return super().act_batch(observations, action_masks)


def snapshot(t: Table) -> tuple[object, ...]:
    g = t.game
    return (list(g.actions), g.phase, g.to_move, g.legal, t.observer.canon.copy(), list(t.probs))


def assert_unchanged(t: Table, before: tuple[object, ...]) -> None:
    after = snapshot(t)
    assert after[:4] == before[:4] and after[5] == before[5]
    assert np.array_equal(after[4], before[4])  # type: ignore[arg-type]


def test_an_illegal_agent_move_names_the_agent_the_move_and_the_legal_set() -> None:
    t = Table([0, 0, 0, 0], label="test table")
    t.start(new_game(dealer=0))  # the dealer (seat 0) chooses trump: passing is illegal
    before = snapshot(t)
    with pytest.raises(AgentError) as e:
        t.agent_move([Scripted(PASS)], log_probs=True)
    text = str(e.value)
    assert "agent 'scripted' chose an illegal action in test table, hand 0, move 0" in text
    assert "illegal action 55 (pass) for seat 0 in phase 'choose_trump'" in text
    assert f"legal actions: [{TRUMP_BASE} (trump oros)," in text and "53 (delegate)]" in text
    assert_unchanged(t, before)


@pytest.mark.parametrize("bad", [N_ACTIONS, -1, 48.0, "48", None])
def test_an_agent_answer_that_is_no_legal_action_id_leaves_the_table_as_it_was(
    bad: object,
) -> None:
    t = Table([0, 0, 0, 0])
    t.start(new_game(seed=1, dealer=2))
    before = snapshot(t)
    with pytest.raises(AgentError, match="agent 'scripted'"):
        t.agent_move([Scripted(bad)])  # type: ignore[arg-type]
    assert_unchanged(t, before)


def test_lockstep_play_refuses_an_illegal_move_before_stepping_it() -> None:
    t = Table([0, 1, 0, 1], label="deal 7")
    with pytest.raises(AgentError) as e:
        play_tables([t], [Scripted(PASS), RandomAgent(0)], lambda _t: new_game(dealer=0))
    assert "agent 'scripted' chose an illegal action in deal 7, hand 0, move 0" in str(e.value)
    assert t.game.actions == [] and t.hands_done == []


def test_lockstep_play_asks_each_agent_once_per_round_for_all_its_tables() -> None:
    agent = CountingRule()
    tables = [Table([0, 0, 0, 0]) for _ in range(5)]
    play_tables(tables, [agent], lambda t: None if t.hands_done else new_game(seed=3))
    moves = len(tables[0].hands_done[0].actions)
    # identical deals: every table is at the same move each round, one call for all five
    assert agent.batches == [5] * moves
    assert all(t.hands_done[0].actions == tables[0].hands_done[0].actions for t in tables)


def test_lockstep_and_one_table_at_a_time_play_the_same_hand() -> None:
    lockstep = Table([0, 1, 0, 1])
    play_tables([lockstep], [RuleBasedAgent(), RuleBasedAgent()], lambda t: (
        None if t.hands_done else new_game(seed=5, dealer=3)))  # fmt: skip
    single = Table([0, 1, 0, 1])
    single.start(new_game(seed=5, dealer=3))
    played = list(single.moves([RuleBasedAgent(), RuleBasedAgent()]))
    assert single.game.is_over and single.game.actions == lockstep.hands_done[0].actions
    assert played == single.game.actions


def test_records_with_probabilities_replay_move_for_move() -> None:
    tables = [Table([0, 1, 0, 1], label=f"deal {d}") for d in range(3)]
    agents = [RandomAgent(1), RuleBasedAgent()]  # probabilities from one side only
    play_tables(tables, agents, lambda t: None if t.hands_done else new_game(int(t.label[-1])),
                log_probs=True)  # fmt: skip
    for t in tables:
        [game], [probs] = t.hands_done, t.probs_done
        record = json.loads(
            json.dumps(table_record(game, {"players": ["r", "b", "r", "b"]}, probs))
        )
        assert record["players"] == ["r", "b", "r", "b"] and len(record["probs"]) == len(
            record["actions"]
        )
        positions = iter_replay_games(record)  # the game before each move, then the end
        assert replay_game(record).actions == game.actions
        for before, (seat, action), entry in zip(
            positions, record["actions"], record["probs"], strict=False
        ):
            if seat % 2:  # the rule-based agent has no policy distribution
                assert entry is None
                continue
            legal = before.legal_actions()
            assert sorted(map(int, entry)) == legal and action in legal
            assert entry[str(action)] == pytest.approx(1 / len(legal), abs=1e-6)


def test_a_seat_played_from_outside_waits_for_its_move() -> None:
    t = Table([None, 0, 0, 0])  # seat 0 is the person's
    t.start(new_game(seed=2, dealer=3))  # seat 3 deals and chooses (or delegates to seat 1)
    agents = [RuleBasedAgent()]
    moved = list(t.moves(agents))
    assert moved and all(seat != 0 for seat, _ in moved)
    assert t.waits_outside and t.game.to_move == 0 and not t.game.is_over
    assert list(t.moves(agents)) == []  # still waiting: nothing moves without the person
    with pytest.raises(ValueError, match="waits for a move from outside"):
        t.agent_move(agents)
    before = snapshot(t)
    illegal = next(a for a in range(N_ACTIONS) if not (t.game.legal >> a) & 1)
    with pytest.raises(IllegalActionError, match=f"illegal action {illegal} .* legal actions"):
        t.outside_move(illegal)
    assert_unchanged(t, before)
    legal = t.game.legal_actions()[0]
    assert t.outside_move(legal) == legal and t.probs[-1] is None
    assert t.game.actions[-1] == (0, legal)


def test_an_outside_seat_is_asked_through_the_callback_until_the_hand_ends() -> None:
    t = Table([0, 0, None, 0])
    t.start(new_game(seed=4, dealer=2))  # the person deals
    asked: list[int] = []

    def person(table: Table) -> int:
        asked.append(table.game.to_move)
        legal = table.game.legal_actions()
        return DELEGATE if DELEGATE in legal else legal[-1]

    moves = list(t.moves([RuleBasedAgent()], outside=person))
    assert t.game.is_over and moves == t.game.actions
    assert asked == [s for s, _ in t.game.actions if s == 2] and asked
    assert t.game.actions[0] == (2, DELEGATE)


def test_a_table_needs_four_seats() -> None:
    with pytest.raises(ValueError, match="4 seats"):
        Table([0, 1, 0])
    with pytest.raises(ValueError, match="outside"):
        play_tables([Table([0, None, 0, 0])], [RuleBasedAgent()], lambda t: new_game())
