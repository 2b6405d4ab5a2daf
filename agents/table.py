"""The table driver: agents seated at the engine, their moves checked and played, the hand kept.

Every program that plays hands (the arena, the web table, terminal play, the demo) runs this
one loop: ask the seat to move (an agent, from its own observation and legal-action mask;
or, for a seat played from outside, a person), check the move against the engine's legal
set, step the :class:`~butifarra_env.core.game.Game` and the
:class:`~butifarra_env.core.observation.Observer`, and keep each decision's action
probabilities for the game record (:func:`table_record`).

Two ways to drive it:

* :func:`play_tables`: many tables in lockstep, the tables grouped by the agent to move and
  each group decided by one :meth:`~agents.base.Agent.act_batch` call (one network forward
  for a whole batch): the arena.
* :meth:`Table.moves` / :meth:`Table.agent_move` / :meth:`Table.outside_move`: one table, a
  move at a time with :meth:`~agents.base.Agent.act`, where a person's seat waits for its
  move from outside (the web table, terminal play, the demo).

An agent that raises, returns something that is not an action id, or chooses an illegal
action is an :class:`AgentError` naming the agent, the hand, the move and the legal
actions; the illegal move is not played.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, TypeVar

import numpy as np

from agents.base import Agent, obs_version_of
from butifarra_env.core.actions import N_ACTIONS, action_name, mask_from_bits, masks_from_bits
from butifarra_env.core.errors import IllegalActionError
from butifarra_env.core.game import Game
from butifarra_env.core.observation import Observer, ObserverV1, layout, make_observer
from butifarra_env.core.rules import N_SEATS, PHASE_NAMES
from butifarra_env.core.validate import is_int
from butifarra_env.records import game_record

__all__ = [
    "AgentError",
    "ProbsEntry",
    "Table",
    "play_tables",
    "probs_entries",
    "table_record",
]


class AgentError(RuntimeError):
    """An agent failed during a game (raised, returned something that is not an action, or
    chose an illegal one); the message names the agent, the hand and the decision."""


ProbsEntry = dict[str, float] | None
"""One decision's logged probabilities: ``{action id (str): probability}`` over the legal
actions, or None (an agent without a policy distribution, or a person)."""

ProbsErrors = Literal["raise", "ignore"]
"""What a failing ``action_probs_batch`` does: an :class:`AgentError` (the arena, where the
probabilities are the data), or a None entry (the web table, where they are a display)."""


class Table:
    """One seating: the hand in progress, the agents' observer and each decision's
    probabilities (and, under :func:`play_tables`, the hands finished).

    ``seat_agent`` gives, by seat, the index of the seat's agent in the list of agents the
    table is played with, or None for a seat whose moves come from outside (a person).
    ``label`` says which table this is in error messages (e.g. ``"deal 3 (agent A's team at
    seats 0 and 2)"``).
    """

    __slots__ = (
        "game",
        "hand",
        "hands_done",
        "label",
        "observer",
        "probs",
        "probs_done",
        "seat_agent",
    )

    game: Game

    def __init__(self, seat_agent: Sequence[int | None], label: str = "") -> None:
        if len(seat_agent) != N_SEATS:
            raise ValueError(
                f"seat_agent must give {N_SEATS} seats (an agent index or None), got "
                f"{len(seat_agent)}"
            )
        self.seat_agent = tuple(seat_agent)
        self.label = label
        self.observer = Observer()
        self.hand = -1  # the hands started at this table, less one: the current hand's index
        self.probs: list[ProbsEntry] = []  # the current hand's, one per action played
        self.hands_done: list[Game] = []
        self.probs_done: list[list[ProbsEntry]] = []

    def start(self, game: Game, agents: Sequence[Agent | None] | None = None) -> None:
        """Sit down to a new hand (the observer and the probabilities start afresh). With
        ``agents`` (those the table is played with), each seated one is first told the hand's
        options (:meth:`~agents.base.Agent.set_options`): one that cannot play them raises
        :class:`~agents.base.UnsupportedVariant` here, before any move."""
        if agents is not None:
            for index in sorted({i for i in self.seat_agent if i is not None}):
                agent = agents[index]
                if agent is not None:
                    agent.set_options(game.options)
                    if obs_version_of(agent) and not isinstance(self.observer, ObserverV1):
                        self.observer = make_observer(1)  # v1's vector starts with v0's
        self.game = game
        self.observer.reset(game)
        self.probs = []
        self.hand += 1

    def where(self) -> str:
        """The hand in words, for error messages."""
        at = f"hand {self.hand}, move {len(self.game.actions)}"
        return f"{self.label}, {at}" if self.label else at

    def decision(self) -> str:
        """The decision to take in words: the hand, the seat, the phase, the legal actions."""
        g = self.game
        legal = ", ".join(f"{a} ({action_name(a)})" for a in g.legal_actions())
        return (
            f"{self.where()}: seat {g.to_move} to move in phase {PHASE_NAMES[g.phase]!r}; "
            f"legal actions: [{legal}]"
        )

    @property
    def waits_outside(self) -> bool:
        """The hand goes on and the seat to move is played from outside (a person)."""
        return not self.game.is_over and self.seat_agent[self.game.to_move] is None

    # ------------------------------------------------------------ one table
    def outside_move(self, action: object) -> int:
        """Play the move of the seat to move, which is played from outside. A move that is
        not legal now is an :class:`~butifarra_env.core.errors.IllegalActionError` with the
        engine's message (the move, the seat, the phase, the legal actions), nothing
        changed; so is calling it when an agent is to move or the hand is over."""
        g = self.game
        if g.is_over:
            raise IllegalActionError("the hand is over: no move is legal")
        if self.seat_agent[g.to_move] is not None:
            raise IllegalActionError(f"seat {g.to_move} is played by an agent, not from outside")
        if not (is_int(action) and 0 <= action < N_ACTIONS and (g.legal >> action) & 1):  # type: ignore[operator]
            raise IllegalActionError(g.illegal_message(action))
        a = int(action)  # type: ignore[call-overload]
        self._step(a)
        self.probs.append(None)  # a person gives no probabilities
        return a

    def agent_move(
        self,
        agents: Sequence[Agent | None],
        log_probs: bool = False,
        probs_errors: ProbsErrors = "raise",
    ) -> int:
        """Ask the agent to move (:meth:`~agents.base.Agent.act`), check its move and play it;
        returns the action. With ``log_probs`` the decision's probabilities are kept
        (:attr:`probs`, aligned with the actions)."""
        g = self.game
        seat = g.to_move
        index = None if g.is_over else self.seat_agent[seat]
        agent = None if index is None else agents[index]
        if agent is None:
            raise ValueError(f"no agent to move: {self.where()} waits for a move from outside")
        obs = self.observer.observe(seat)[: layout(obs_version_of(agent)).size]
        mask = mask_from_bits(g.legal)
        entry = None
        if log_probs:
            entry = probs_entries(agent, obs[None], mask[None], [self], probs_errors)[0]
        try:
            action = agent.act(obs, mask)
        except Exception as e:
            raise AgentError(
                f"agent {agent.name!r} raised {type(e).__name__}: {e} in {self.decision()}"
            ) from e
        if isinstance(action, np.ndarray) and action.ndim == 0:
            action = action.item()
        if not is_int(action):
            raise AgentError(
                f"agent {agent.name!r} act returned {action!r:.40}, not an integer action id, in "
                f"{self.decision()}"
            )
        a = int(action)
        _check_legal(agent, self, a)
        self._step(a)
        self.probs.append(entry)  # only once the move is made: probs stay aligned with actions
        return a

    def moves(
        self,
        agents: Sequence[Agent | None],
        outside: Callable[[Table], object] | None = None,
        log_probs: bool = False,
        probs_errors: ProbsErrors = "raise",
    ) -> Iterator[tuple[int, int]]:
        """Play the hand on, yielding ``(seat, action)`` after each move. When a seat played
        from outside is to move, its move is ``outside(self)`` (terminal play asks the person
        and waits), or, with no ``outside``, the moves stop there until :meth:`outside_move`
        is called (the web table waits for the next request)."""
        g = self.game
        while not g.is_over:
            seat = g.to_move
            if self.seat_agent[seat] is None:
                if outside is None:
                    return
                action = self.outside_move(outside(self))
            else:
                action = self.agent_move(agents, log_probs, probs_errors)
            yield seat, action

    def _step(self, action: int) -> None:
        g = self.game
        seat = g.to_move
        g.step(action)
        self.observer.update(g, seat, action)


def _check_legal(agent: Agent, t: Table, a: int) -> None:
    g = t.game
    if not (0 <= a < N_ACTIONS and (g.legal >> a) & 1):
        raise AgentError(
            f"agent {agent.name!r} chose an illegal action in {t.where()}: {g.illegal_message(a)}"
        )


# --------------------------------------------------------------------------- lockstep
T = TypeVar("T", bound=Table)


def play_tables(
    tables: list[T],
    agents: Sequence[Agent],
    next_game: Callable[[T], Game | None],
    log_probs: bool = False,
    until: Callable[[Game], bool] | None = None,
) -> None:
    """Play every table to the end in lockstep, batching decisions per agent.

    Each round groups the live tables by the agent to move (``seat_agent`` indices into
    ``agents``) and asks each group with one :meth:`~agents.base.Agent.act_batch` call.
    ``next_game(table)`` gives a table its next hand (None: the table is done); finished
    hands go to :attr:`Table.hands_done`, their probabilities to :attr:`Table.probs_done`.
    With ``log_probs`` each decision's probabilities are kept
    (:meth:`~agents.base.Agent.action_probs_batch`). ``until(game)`` ends a hand early: the
    hand goes to :attr:`Table.hands_done` unfinished as soon as it is true (e.g. when the
    card play starts: the importance sampler's bidding pass). Every seat must have an agent.
    """
    for t in tables:
        if None in t.seat_agent:
            raise ValueError(
                f"play_tables plays agents only; {t.label or 'a table'} has a seat "
                "played from outside"
            )
    live = [t for t in tables if _start_next(t, next_game, agents)]
    while live:
        groups: dict[int, list[T]] = {}
        for t in live:
            groups.setdefault(t.seat_agent[t.game.to_move], []).append(t)  # type: ignore[arg-type]
        for idx, group in groups.items():
            agent = agents[idx]
            games = [t.game for t in group]
            seats = np.fromiter((g.to_move for g in games), dtype=np.intp, count=len(games))
            canon = np.stack([t.observer.canon for t in group])
            gather = layout(obs_version_of(agent)).permutation[seats]  # the agent's version
            obs = np.take_along_axis(canon, gather, axis=1)
            masks = masks_from_bits([g.legal for g in games])
            actions = _decide(agent, obs, masks, group)
            if log_probs:
                for t, entry in zip(group, probs_entries(agent, obs, masks, group), strict=True):
                    t.probs.append(entry)
            for t, seat, a in zip(group, seats.tolist(), actions, strict=True):
                g = t.game
                if not (0 <= a < N_ACTIONS and (g.legal >> a) & 1):
                    _check_legal(agent, t, a)
                g.step(a)
                t.observer.update(g, seat, a)
        still = []
        for t in live:
            if t.game.is_over or (until is not None and until(t.game)):
                t.hands_done.append(t.game)
                t.probs_done.append(t.probs)
                if _start_next(t, next_game, agents):
                    still.append(t)
            else:
                still.append(t)
        live = still


def _start_next(
    t: T, next_game: Callable[[T], Game | None], agents: Sequence[Agent] | None = None
) -> bool:
    g = next_game(t)
    if g is None:
        return False
    t.start(g, agents)  # the agents are told the options before the hand's first decision
    return True


def _decide(agent: Agent, obs: np.ndarray, masks: np.ndarray, group: Sequence[Table]) -> list[int]:
    """``agent.act_batch`` for the group's decisions, as a list of ints; any failure is an
    :class:`AgentError` naming the agent and the decision (the first one, or the one row
    that fails on its own when the batch is asked again row by row)."""
    n = len(group)
    try:
        actions = np.asarray(agent.act_batch(obs, masks))
    except Exception as e:
        for i, t in enumerate(group):  # which decision? ask again one row at a time
            try:
                agent.act_batch(obs[i : i + 1], masks[i : i + 1])
            except Exception as row_error:
                raise AgentError(
                    f"agent {agent.name!r} raised {type(row_error).__name__}: {row_error} "
                    f"in {t.decision()}"
                ) from row_error
        raise AgentError(
            f"agent {agent.name!r} raised {type(e).__name__}: {e} choosing for {n} tables; "
            f"the first was {group[0].decision()}"
        ) from e
    if actions.shape != (n,) or actions.dtype.kind not in "iu":
        raise AgentError(
            f"agent {agent.name!r} act_batch returned {actions.dtype} {actions.shape} for {n} "
            f"decisions, not {n} integer action ids; the first was {group[0].decision()}"
        )
    return actions.tolist()


def probs_entries(
    agent: Agent,
    obs: np.ndarray,
    masks: np.ndarray,
    group: Sequence[Table],
    errors: ProbsErrors = "raise",
) -> list[ProbsEntry]:
    """Each decision's probabilities over its legal actions (rounded to 6 places), or None
    for each when the agent has no :meth:`~agents.base.Agent.action_probs_batch` (or
    returns None from it). Values that are not probabilities, or a method that raises, are
    an :class:`AgentError`, or None entries with ``errors="ignore"``."""
    method = getattr(agent, "action_probs_batch", None)
    try:
        probs = None if method is None else method(obs, masks)
    except Exception as e:
        if errors == "ignore":
            return [None] * len(group)
        raise AgentError(
            f"agent {agent.name!r} action_probs_batch raised {type(e).__name__}: {e}; the "
            f"first decision was {group[0].decision()}"
        ) from e
    if probs is None:
        return [None] * len(group)
    probs = np.asarray(probs, dtype=np.float64)
    if (
        probs.shape != masks.shape
        or not np.isfinite(probs).all()
        or (probs < 0).any()
        or (probs > 1 + 1e-6).any()
    ):
        if errors == "ignore":
            return [None] * len(group)
        raise AgentError(
            f"agent {agent.name!r} action_probs_batch returned {probs.shape} values that are not "
            f"probabilities 0-1 of shape {masks.shape}; the first decision was "
            f"{group[0].decision()}"
        )
    return [
        {str(a): round(float(row[a]), 6) for a in np.flatnonzero(mask).tolist()}
        for row, mask in zip(probs, masks, strict=True)
    ]


def table_record(
    game: Game, extra: dict[str, Any], probs: Sequence[ProbsEntry] | None = None
) -> dict[str, Any]:
    """The hand's game record (:func:`~butifarra_env.records.game_record`, replayable), then
    ``extra`` (who sat where, the seed, ...), then ``probs`` (one entry per action) when
    given."""
    record = game_record(game)
    record.update(extra)
    if probs is not None:
        record["probs"] = list(probs)
    return record
