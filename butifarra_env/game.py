"""The rules of one Butifarra hand (RULES.md), as plain Python on bitmask hands.

This module is the single source of truth for the rules: the PettingZoo environment,
the Gymnasium wrapper, records/replay and the agents all go through :class:`Game`, and
the batched engine is held to it step for step by a differential test. It imports no
framework (numpy only for dealing).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from butifarra_env.actions import (
    BUTIFARRA,
    DELEGATE,
    DOUBLE,
    N_ACTIONS,
    PASS,
    TRUMP_BASE,
    action_name,
)
from butifarra_env.cards import (
    BEATS,
    HALF_POINTS,
    N_CARDS,
    N_TRICKS,
    POINTS,
    SUIT,
    SUIT_MASK,
    cards_of,
)
from butifarra_env.options import Options

N_SEATS = 4

# Phases, in the order a hand goes through them.
PHASE_CHOOSE_TRUMP = 0  # the dealer chooses a suit, butifarra or delegates
PHASE_CHOOSE_TRUMP_DELEGATED = 1  # the dealer's partner must choose (cannot delegate back)
PHASE_DOUBLING = 2  # contrar / recontrar / Sant Vicenç / Verraca chain
PHASE_PLAY = 3  # twelve tricks
PHASE_HAND_OVER = 4
PHASE_NAMES = ("choose_trump", "choose_trump_delegated", "doubling", "play", "hand_over")

NO_TRUMP = 4  # `trump` value for butifarra
TRUMP_UNSET = -1

_TRUMP_CHOICE_ACTIONS = sum(1 << a for a in range(TRUMP_BASE, BUTIFARRA + 1))
_DEALER_ACTIONS = _TRUMP_CHOICE_ACTIONS | (1 << DELEGATE)
_DOUBLING_ACTIONS = (1 << DOUBLE) | (1 << PASS)


def team_of(seat: int) -> int:
    """Team 0 (A) = seats {0, 2}; team 1 (B) = seats {1, 3}."""
    return seat & 1


def deal(permutation: Any, dealer: int) -> list[int]:
    """Deal a shuffled deck (a permutation of 0..47) four cards at a time, starting with
    the player after the dealer, as at the table. Returns the four hands as bitmasks."""
    hands = [0, 0, 0, 0]
    for packet in range(N_CARDS // 4):
        seat = (dealer + 1 + packet) % N_SEATS
        for c in permutation[4 * packet : 4 * packet + 4]:
            hands[seat] |= 1 << int(c)
    return hands


def random_deal(rng: np.random.Generator, dealer: int) -> list[int]:
    return deal(rng.permutation(N_CARDS), dealer)


def multiplier(trump: int, level: int, butifarra_base: int = 2) -> int:
    """base (butifarra_base for butifarra, 1 for a suit) times 2 per doubling level."""
    return (butifarra_base if trump == NO_TRUMP else 1) << level


def hand_scores(team_points: tuple[int, int] | list[int], mult: int) -> tuple[int, int]:
    """Only the team above 36 scores (its points - 36) x multiplier; 36-36 scores nothing."""
    a, b = team_points
    if a > HALF_POINTS:
        return ((a - HALF_POINTS) * mult, 0)
    if b > HALF_POINTS:
        return (0, (b - HALF_POINTS) * mult)
    return (0, 0)


class IllegalActionError(ValueError):
    """An action that is not legal in the current position."""


class Game:
    """One hand of Butifarra, mutated in place by :meth:`step`.

    Match context (hand number, scores before this hand) rides along because players
    observe it; the match loop itself lives in the environment.
    """

    __slots__ = (
        "options",
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
        "trick_count",
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
        if hands[0] | hands[1] | hands[2] | hands[3] != (1 << N_CARDS) - 1:
            raise ValueError("the four hands must hold the 48 cards exactly once")
        self.options = options
        self.dealer = dealer
        self.initial_hands = tuple(hands)
        self.hands = list(hands)
        self.hand_number = hand_number
        self.match_scores = tuple(match_scores)
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
        self.trick_count = 0
        self.led_suit = -1
        self.win_card = -1
        self.win_seat = -1
        self.trick_points = 0
        self.team_points = [0, 0]
        self.team_tricks = [0, 0]
        self.tricks: list[tuple[int, tuple[int, ...], int]] = []  # (leader, cards by seat, winner)
        self.actions: list[tuple[int, int]] = []
        self.legal = _DEALER_ACTIONS
        self.scores: tuple[int, int] | None = None
        self.rewards: tuple[int, int, int, int] | None = None

    # ----------------------------------------------------------------- queries
    @property
    def is_over(self) -> bool:
        return self.phase == PHASE_HAND_OVER

    @property
    def declaring_team(self) -> int:
        return -1 if self.chooser < 0 else self.chooser & 1

    @property
    def multiplier(self) -> int:
        return multiplier(self.trump, self.level, self.options.butifarra_base)

    def legal_actions(self) -> list[int]:
        """Legal action ids for the seat to move, ascending (empty once the hand is over)."""
        return cards_of(self.legal)

    def legal_cards(self, seat: int) -> int:
        """The legal-card algorithm of RULES.md for ``seat`` in the current trick (a bitmask)."""
        hand = self.hands[seat]
        if self.trick_count == 0:  # rule 1: leading
            return hand
        led = self.led_suit
        follow = hand & SUIT_MASK[led]
        win = self.win_card
        if (self.win_seat ^ seat) & 1 == 0:  # rule 2: partner winning
            return follow or hand
        if follow:  # rule 3: opponent winning, you hold the led suit
            if SUIT[win] == led:
                return (follow & BEATS[win]) or follow
            return follow  # the opponent trumped: any card of the led suit
        trump = self.trump
        if trump == NO_TRUMP:  # rule 5: butifarra, void: any card
            return hand
        trumps = hand & SUIT_MASK[trump]  # rule 4: void, must beat if possible
        if SUIT[win] == trump:
            return (trumps & BEATS[win]) or hand
        return trumps or hand

    # ----------------------------------------------------------------- transitions
    def step(self, action: int) -> None:
        """Apply ``action`` for the seat to move; raises IllegalActionError if not legal."""
        if not (isinstance(action, (int, np.integer)) and 0 <= action < N_ACTIONS) or not (
            (self.legal >> int(action)) & 1
        ):
            raise IllegalActionError(self._illegal_message(action))
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
            self.to_move = (seat + 2) % N_SEATS
            self.legal = _TRUMP_CHOICE_ACTIONS
        else:
            self.trump = NO_TRUMP if action == BUTIFARRA else action - TRUMP_BASE
            self.chooser = seat
            if self.options.max_doubling_level == 0:
                self._start_play()
            else:
                self._ask_double((seat + 1) % N_SEATS)

    def _illegal_message(self, action: object) -> str:
        legal = ", ".join(f"{a} ({action_name(a)})" for a in self.legal_actions())
        try:
            what = f"{action} ({action_name(int(action))})"  # type: ignore[call-overload]
        except (TypeError, ValueError):
            what = repr(action)
        return (
            f"illegal action {what} for seat {self.to_move} in phase "
            f"{PHASE_NAMES[self.phase]!r}; legal actions: [{legal}]"
        )

    def _ask_double(self, seat: int) -> None:
        self.phase = PHASE_DOUBLING
        self.to_move = seat
        self._second_asked = False
        self.legal = _DOUBLING_ACTIONS

    def _doubling(self, seat: int, action: int) -> None:
        if action == DOUBLE:
            self.level += 1
            if self.level >= self.options.max_doubling_level:
                self._start_play()
            else:
                self._ask_double((seat + 1) % N_SEATS)
        elif self._second_asked:
            self._start_play()
        else:
            self._second_asked = True
            self.to_move = (seat + 2) % N_SEATS

    def _start_play(self) -> None:
        self.phase = PHASE_PLAY
        self.to_move = (self.dealer + 1) % N_SEATS  # the mano leads, whoever chose trump
        self.legal = self.hands[self.to_move]

    def _play_card(self, seat: int, card: int) -> None:
        bit = 1 << card
        self.hands[seat] ^= bit
        self.played[seat] |= bit
        self.trick_cards[seat] = card
        self.trick_points += POINTS[card]
        suit = SUIT[card]
        if self.trick_count == 0:
            self.trick_leader = seat
            self.led_suit = suit
            self.win_card = card
            self.win_seat = seat
        else:
            if suit != self.led_suit:
                self.voids[seat] |= 1 << self.led_suit
            win = self.win_card
            if (BEATS[win] >> card) & 1 or (suit == self.trump and SUIT[win] != suit):
                self.win_card = card
                self.win_seat = seat
        self.trick_count += 1
        if self.trick_count < N_SEATS:
            nxt = (seat + 1) % N_SEATS
            self.to_move = nxt
            self.legal = self.legal_cards(nxt)
            return
        winner = self.win_seat
        team = winner & 1
        self.team_points[team] += self.trick_points + 1
        self.team_tricks[team] += 1
        self.tricks.append((self.trick_leader, tuple(self.trick_cards), winner))
        self.trick_cards = [-1, -1, -1, -1]
        self.trick_count = 0
        self.trick_points = 0
        self.trick_leader = -1
        self.led_suit = -1
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
        a, b = self.scores = hand_scores(self.team_points, self.multiplier)
        self.rewards = (a - b, b - a, a - b, b - a)

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
