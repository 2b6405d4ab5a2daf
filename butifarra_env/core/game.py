"""One hand of Butifarra as a state machine: whose turn it is, what is legal, what happened.

The rules themselves are the pure functions of :mod:`butifarra_env.core.rules`; ``Game`` keeps
the position and calls them. The PettingZoo environment, records and replay, the arena and
terminal play all drive a ``Game``; the batched engine is held to it step for step by a
differential test. numpy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from butifarra_env.core import rules
from butifarra_env.core.actions import (
    DEALER_ACTIONS_MASK,
    DELEGATE,
    DOUBLE,
    DOUBLING_MASK,
    N_ACTIONS,
    TRUMP_BASE,
    TRUMP_CHOICE_MASK,
    action_name,
)
from butifarra_env.core.cards import ALL_CARDS, N_TRICKS, POINTS, SUIT, cards_of
from butifarra_env.core.errors import IllegalActionError
from butifarra_env.core.options import Options
from butifarra_env.core.rules import (
    N_SEATS,
    NO_SUIT,
    PHASE_CHOOSE_TRUMP,
    PHASE_CHOOSE_TRUMP_DELEGATED,
    PHASE_DOUBLING,
    PHASE_HAND_OVER,
    PHASE_NAMES,
    PHASE_PLAY,
    TRUMP_UNSET,
    WINNERS,
    legal_cards,
    partner_winning,
)

__all__ = ["Game", "IllegalActionError"]


class Game:
    """One hand of Butifarra, mutated in place by :meth:`step`.

    Match context (hand number, scores before this hand) rides along because players
    observe it; moving from hand to hand is :class:`butifarra_env.core.rules.Match`.
    """

    __slots__ = (
        "options",
        "_obligada",
        "dealer",
        "initial_hands",
        "hands",
        "hand_number",
        "match_scores",
        "phase",
        "to_move",
        "trump",
        "chooser",
        "delegated",
        "level",
        "_second_asked",
        "played",
        "voids",
        "trick_cards",
        "trick_leader",
        "cards_in_trick",
        "led_suit",
        "win_card",
        "win_seat",
        "trick_points",
        "team_points",
        "team_tricks",
        "tricks",
        "actions",
        "legal",
        "scores",
        "rewards",
    )

    def __init__(
        self,
        options: Options,
        dealer: int,
        hands: list[int],
        hand_number: int = 0,
        match_scores: tuple[int, int] = (0, 0),
    ) -> None:
        if not 0 <= dealer < N_SEATS:
            raise ValueError(f"dealer must be a seat 0-3, got {dealer!r}")
        if len(hands) != N_SEATS or any(bin(h).count("1") != N_TRICKS for h in hands):
            raise ValueError("hands must be four bitmasks of 12 cards each")
        if hands[0] | hands[1] | hands[2] | hands[3] != ALL_CARDS:
            raise ValueError("the four hands must hold the 48 cards exactly once")
        self.options = options
        self._obligada = options.obligada  # read at every card: kept at hand
        self.dealer = dealer
        self.initial_hands = tuple(hands)
        self.hands = list(hands)
        self.hand_number = hand_number
        self.match_scores = (int(match_scores[0]), int(match_scores[1]))
        self.phase = PHASE_CHOOSE_TRUMP
        self.to_move = dealer
        self.trump = TRUMP_UNSET
        self.chooser = -1
        self.delegated = False
        self.level = 0
        self._second_asked = False
        self.played = [0, 0, 0, 0]
        self.voids = [0, 0, 0, 0]  # bit s set: the seat has shown it is void in suit s
        self.trick_cards = [-1, -1, -1, -1]  # by seat, -1 = not played in this trick
        self.trick_leader = -1
        self.cards_in_trick = 0
        self.led_suit = NO_SUIT
        self.win_card = -1
        self.win_seat = -1
        self.trick_points = 0
        self.team_points = [0, 0]
        self.team_tricks = [0, 0]
        self.tricks: list[tuple[int, tuple[int, ...], int]] = []  # (leader, cards by seat, winner)
        self.actions: list[tuple[int, int]] = []
        self.legal = DEALER_ACTIONS_MASK
        self.scores: tuple[int, int] | None = None
        self.rewards: tuple[int, int, int, int] | None = None

    # ----------------------------------------------------------------- queries
    @property
    def is_over(self) -> bool:
        return self.phase == PHASE_HAND_OVER

    @property
    def declaring_team(self) -> int:
        return -1 if self.chooser < 0 else rules.team_of(self.chooser)

    @property
    def multiplier(self) -> int:
        """The hand's multiplier now: base x doubling factor (linear doubling included)."""
        return self.options.multiplier(self.trump, self.level)

    @property
    def doubling_cap(self) -> int:
        """The level at which the doubling chain ends for the trump chosen (the options'
        ``max_doubling_level``, or ``butifarra_max_doubling_level`` for a butifarra)."""
        return self.options.doubling_cap(self.trump)

    def legal_actions(self) -> list[int]:
        """Legal action ids for the seat to move, ascending (empty once the hand is over)."""
        return cards_of(self.legal)

    def partner_winning(self, seat: int) -> bool:
        """Is the card winning the current trick ``seat``'s partner's (or its own)?"""
        return partner_winning(self.win_seat, seat)

    def legal_cards(self, seat: int) -> int:
        """The legal cards of ``seat`` in the current trick (:func:`rules.legal_cards`)."""
        return legal_cards(
            self.hands[seat],
            self.led_suit,
            self.win_card,
            partner_winning(self.win_seat, seat),
            self.trump,
            self._obligada,
        )

    # ----------------------------------------------------------------- transitions
    def step(self, action: int) -> None:
        """Apply ``action`` for the seat to move; raises IllegalActionError if not legal."""
        if not (isinstance(action, (int, np.integer)) and 0 <= action < N_ACTIONS) or not (
            (self.legal >> int(action)) & 1
        ):
            raise IllegalActionError(self.illegal_message(action))
        action = int(action)
        seat = self.to_move
        self.actions.append((seat, action))
        phase = self.phase
        if phase == PHASE_PLAY:
            self._play_card(seat, action)
        elif phase == PHASE_DOUBLING:
            self._doubling(seat, action)
        elif action == DELEGATE:
            self.delegated = True
            self.phase = PHASE_CHOOSE_TRUMP_DELEGATED
            self.to_move = rules.partner_of(seat)
            self.legal = TRUMP_CHOICE_MASK
        else:
            self.trump = action - TRUMP_BASE  # butifarra (52) -> 4 = NO_TRUMP
            self.chooser = seat
            if self.doubling_cap == 0:
                self._start_play()
            else:
                self._ask_double(rules.first_asked_to_double(seat))

    def illegal_message(self, action: object) -> str:
        """What was wrong with ``action``: the seat, the phase and the legal actions."""
        legal = ", ".join(f"{a} ({action_name(a)})" for a in self.legal_actions())
        try:
            what = f"{action} ({action_name(int(action))})"  # type: ignore[call-overload]
        except (TypeError, ValueError, OverflowError):
            what = repr(action)
        return (
            f"illegal action {what} for seat {self.to_move} in phase "
            f"{PHASE_NAMES[self.phase]!r}; legal actions: [{legal}]"
        )

    def _ask_double(self, seat: int) -> None:
        self.phase = PHASE_DOUBLING
        self.to_move = seat
        self._second_asked = False
        self.legal = DOUBLING_MASK

    def _doubling(self, seat: int, action: int) -> None:
        if action == DOUBLE:
            self.level += 1
            if self.level >= self.doubling_cap:
                self._start_play()
            else:
                self._ask_double(rules.asked_after_double(seat))
        elif self._second_asked:
            self._start_play()
        else:
            self._second_asked = True
            self.to_move = rules.asked_after_pass(seat)

    def _start_play(self) -> None:
        self.phase = PHASE_PLAY
        self.to_move = rules.mano(self.dealer)
        self.legal = self.hands[self.to_move]

    def _play_card(self, seat: int, card: int) -> None:
        bit = 1 << card
        self.hands[seat] ^= bit
        self.played[seat] |= bit
        self.trick_cards[seat] = card
        self.trick_points += POINTS[card]
        # rules.add_to_trick, inlined: calling it costs the bare engine ~6%
        # (benchmarks/bench_trick.py); tests/test_rules_trick.py holds this copy to it.
        if self.cards_in_trick == 0:
            self.trick_leader = seat
            self.led_suit = SUIT[card]
            self.win_card = card
            self.win_seat = seat
        else:
            if SUIT[card] != self.led_suit:
                self.voids[seat] |= 1 << self.led_suit
            if (WINNERS[self.trump][self.win_card] >> card) & 1:  # it beats W
                self.win_card = card
                self.win_seat = seat
        self.cards_in_trick += 1
        if self.cards_in_trick < N_SEATS:
            nxt = (seat + 1) & 3  # rules.next_seat, inlined: the hottest line of the engine
            self.to_move = nxt
            self.legal = legal_cards(
                self.hands[nxt],
                self.led_suit,
                self.win_card,
                partner_winning(self.win_seat, nxt),
                self.trump,
                self._obligada,
            )
            return
        winner = self.win_seat
        team = winner & 1  # rules.team_of
        self.team_points[team] += self.trick_points + 1
        self.team_tricks[team] += 1
        self.tricks.append((self.trick_leader, tuple(self.trick_cards), winner))
        self.trick_cards = [-1, -1, -1, -1]
        self.cards_in_trick = 0
        self.trick_points = 0
        self.trick_leader = -1
        self.led_suit = NO_SUIT
        self.win_card = -1
        self.win_seat = -1
        self.to_move = winner
        if len(self.tricks) == N_TRICKS:
            self._end_hand()
        else:
            self.legal = self.hands[winner]

    def _end_hand(self) -> None:
        self.phase = PHASE_HAND_OVER
        self.to_move = -1
        self.legal = 0
        self.scores = rules.hand_scores(self.team_points, self.multiplier)
        self.rewards = rules.seat_rewards(self.scores)

    # ----------------------------------------------------------------- summaries
    def result(self) -> dict[str, Any] | None:
        """The hand's outcome once it is over (JSON-friendly), else None."""
        if self.scores is None:
            return None
        return {
            "trump": self.trump,
            "chooser": self.chooser,
            "delegated": self.delegated,
            "doubling_level": self.level,
            "multiplier": self.multiplier,
            "team_points": list(self.team_points),
            "team_tricks": list(self.team_tricks),
            "scores": list(self.scores),
            "rewards": list(self.rewards or ()),
        }
