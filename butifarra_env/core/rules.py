"""The rules of docs/RULES.md as pure functions on bitmask hands: the one place they live.

Every rule the project applies is here, once: the legal-card algorithm, who wins a trick,
the deal, the order of the doubling chain, the multiplier and the hand score, and how a
match moves from hand to hand. The regional variants of RULES.md are parameters of these
functions, off by default (``legal_cards(..., obligada=)``, ``multiplier(..., linear=)``,
:func:`doubling_cap`); :class:`~butifarra_env.core.options.Options` holds which are on.
:class:`~butifarra_env.core.game.Game` is the state machine that calls them; the batched
engine builds its lookup tables from them (and a differential test holds it to ``Game``);
the rule-based agent, terminal play and the arena call them too.

Numbers are plain ``int`` (a hand is a 48-bit mask, bit ``c`` = card ``c``). Functions that
only do arithmetic (:func:`next_seat`, :func:`multiplier`, :func:`match_over`...) work the
same on numpy integer arrays, which is how the batched engine uses them. numpy only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

import numpy as np

from butifarra_env.core.cards import (
    ALL_CARDS,
    BEATS,
    CARDS_PER_SUIT,
    HALF_POINTS,
    N_CARDS,
    STRENGTH,
    SUIT,
    SUIT_MASK,
)

N_SEATS = 4

# Trump values (also the index of the one-hot ``trump`` field of the observation).
NO_TRUMP = 4
"""Butifarra: no trump suit."""
TRUMP_UNSET = 5
"""Trump not chosen yet."""
NO_SUIT = 4
"""Led-suit value while the trick is empty."""

# Phases, in the order a hand goes through them.
PHASE_CHOOSE_TRUMP = 0  # the dealer chooses a suit, butifarra, or delegates
PHASE_CHOOSE_TRUMP_DELEGATED = 1  # the dealer's partner must choose (cannot delegate back)
PHASE_DOUBLING = 2  # contrar / recontrar / Sant Vicenç / Verraca
PHASE_PLAY = 3  # twelve tricks
PHASE_HAND_OVER = 4
PHASE_NAMES = ("choose_trump", "choose_trump_delegated", "doubling", "play", "hand_over")

Int = TypeVar("Int", int, np.ndarray)
"""A seat, score or level: a Python int, or a numpy integer array (batched)."""


# --------------------------------------------------------------------------- seats
def team_of(seat: Int) -> Int:
    """Team 0 (A) = seats {0, 2}; team 1 (B) = seats {1, 3}."""
    return seat & 1


def next_seat(seat: Int) -> Int:
    """The player who plays after ``seat`` (RULES.md: always ``(seat + 1) % 4``)."""
    return (seat + 1) & 3


def partner_of(seat: Int) -> Int:
    return (seat + 2) & 3


def mano(dealer: Int) -> Int:
    """The player after the dealer: leads the first trick, whoever chose trump."""
    return next_seat(dealer)


# --------------------------------------------------------------------------- the deal
def deal(permutation: Any, dealer: int) -> list[int]:
    """Deal a shuffled deck (a permutation of 0..47) four cards at a time, starting with the
    player after the dealer, as at the table. Returns the four hands as bitmasks by seat."""
    hands = [0, 0, 0, 0]
    for packet in range(N_CARDS // 4):
        seat = (dealer + 1 + packet) % N_SEATS
        for c in permutation[4 * packet : 4 * packet + 4]:
            hands[seat] |= 1 << int(c)
    return hands


DEAL_ORDER = tuple(tuple(p for p in range(N_CARDS) if (p // 4) % N_SEATS == r) for r in range(4))
"""``DEAL_ORDER[r]``: the deck positions that the ``r``-th player after the dealer receives
under :func:`deal` (for vectorised dealing)."""


def random_deal(rng: np.random.Generator, dealer: int) -> list[int]:
    """A uniformly shuffled deck dealt by :func:`deal`."""
    return deal(rng.permutation(N_CARDS), dealer)


def draw_dealer(rng: np.random.Generator, fixed: int | None) -> int:
    """The first dealer of an episode: ``fixed`` when given, else uniform from ``rng``."""
    return int(rng.integers(N_SEATS)) if fixed is None else fixed


# --------------------------------------------------------------------------- tricks
def winners(trump: int, win: int) -> int:
    """The cards that take the trick from the winning card ``win`` under ``trump``: the
    stronger cards of its suit, plus every trump when ``win`` is not one. Every card when
    the trick is empty (``win`` outside 0-47) or before trump is chosen."""
    if not 0 <= win < N_CARDS or trump == TRUMP_UNSET:
        return ALL_CARDS
    beat = BEATS[win]
    if trump < NO_TRUMP and SUIT[win] != trump:
        beat |= SUIT_MASK[trump]
    return beat


WINNERS: tuple[tuple[int, ...], ...] = tuple(
    tuple(winners(t, w) for w in range(N_CARDS)) for t in range(TRUMP_UNSET + 1)
)
"""``WINNERS[trump][w]`` is :func:`winners` tabulated for every card ``w`` (hot paths)."""

_SUIT0 = SUIT_MASK[0]  # the 12 bits of a suit, shifted down to suit 0


def _weakest_bit(pattern: int) -> int:
    """The bit of the weakest card among the cards of suit 0 set in ``pattern`` (0 if none)."""
    held = [c for c in range(CARDS_PER_SUIT) if (pattern >> c) & 1]
    return 1 << min(held, key=STRENGTH.__getitem__) if held else 0


LOWEST_IN_SUIT: tuple[int, ...] = tuple(_weakest_bit(p) for p in range(1 << CARDS_PER_SUIT))
"""``LOWEST_IN_SUIT[p]``: the weakest card of the cards of one suit given as its 12 bits ``p``
(bit ``n - 1`` = number ``n``), as a mask of those 12 bits; the table behind
:func:`lowest_card` (and the batched engine's obligada lookup)."""


def beats(card: int, win: int, trump: int) -> bool:
    """Does ``card`` take a trick that ``win`` is winning? (higher of its suit, or a trump
    on a non-trump)."""
    return bool((winners(trump, win) >> card) & 1)


TrickState = tuple[int, int, int]
"""``(led_suit, win_card, win_seat)``: all that the legal cards and the trick's winner depend
on, so the game, the solver, the search rollouts and the sampler keep just this."""

EMPTY_TRICK: TrickState = (NO_SUIT, -1, -1)
"""The state of a trick before its first card (``win_card`` -1: :func:`winners` = every card)."""


def add_to_trick(state: TrickState, seat: int, card: int, trump: int) -> TrickState:
    """The trick after ``seat`` plays ``card``: the first card sets the led suit and wins;
    a later one takes over only if it beats the winning card (:data:`WINNERS`). The one
    trick fold of the project; callers that play card by card keep the state between calls."""
    led, win, _ = state
    if win < 0:
        return SUIT[card], card, seat
    if (WINNERS[trump][win] >> card) & 1:
        return led, card, seat
    return state


def trick_state(plays: Iterable[tuple[int, int]], trump: int) -> TrickState:
    """The state of a trick whose ``(seat, card)`` plays came in this order
    (:data:`EMPTY_TRICK` when there are none): :func:`add_to_trick` folded over them."""
    state = EMPTY_TRICK
    for seat, card in plays:
        state = add_to_trick(state, seat, card, trump)
    return state


def partner_winning(win_seat: int, seat: int) -> bool:
    """Is the trick's winning card (played by ``win_seat``, -1 while the trick is empty)
    ``seat``'s partner's or its own? Then ``seat`` need not beat it (rule 2)."""
    return win_seat >= 0 and not (win_seat ^ seat) & 1


def trick_winner(cards_in_order: list[int] | tuple[int, ...], trump: int) -> int:
    """Index (0 = the leader) of the card that wins a trick whose cards were played in this
    order: the highest trump, else the highest card of the led suit."""
    return max(trick_state(enumerate(cards_in_order), trump)[2], 0)


def lowest_card(cards: int) -> int:
    """The weakest of ``cards`` (a non-empty mask of one suit) by the strength order of
    RULES.md (2 lowest, then 3 ... 8, sota, caballo, rey, as, manilla), as a one-card mask;
    0 for no cards. What obligada forces when no card of the led suit beats W."""
    if not cards:
        return 0
    shift = SUIT[(cards & -cards).bit_length() - 1] * CARDS_PER_SUIT
    return LOWEST_IN_SUIT[(cards >> shift) & _SUIT0] << shift


def legal_cards(
    hand: int,
    led_suit: int,
    win: int,
    partner_winning: bool,
    trump: int,
    obligada: bool = False,
) -> int:
    """The legal-card algorithm of RULES.md (rules 1-5) as one bitmask expression.

    ``led_suit`` is :data:`NO_SUIT` when leading; ``win`` is the card winning the trick and
    ``partner_winning`` whether the mover's partner played it::

        follow = hand & SUIT_MASK[led]        # every card when leading (rule 1)
        base   = follow or hand               # follow suit when able (rules 2, 3)
        beat   = base & winners(trump, W)     # only against an opponent (rule 2)
        legal  = beat or base                 # beat when able; never forced to under-trump

    ``obligada`` (the variant of RULES.md): against an opponent, a player who follows suit
    and cannot beat W must play the lowest card of the led suit (:func:`lowest_card`)::

        legal  = beat or (lowest_card(follow) if follow else hand)
    """
    if led_suit == NO_SUIT:
        return hand
    follow = hand & SUIT_MASK[led_suit]
    base = follow or hand
    if partner_winning:
        return base
    beat = base & WINNERS[trump][win]  # WINNERS: winners() tabulated
    if beat:
        return beat
    if obligada and follow:
        return lowest_card(follow)
    return base


def legal_card_rule(hand: int, led_suit: int, win: int, partner_winning: bool, trump: int) -> int:
    """Which numbered rule of RULES.md decides the legal cards here (1-5), for explanations.
    The same under obligada, which changes only what rule 3 allows when nothing beats W."""
    if led_suit == NO_SUIT:
        return 1
    if partner_winning:
        return 2
    if hand & SUIT_MASK[led_suit]:
        return 3
    return 5 if trump == NO_TRUMP else 4


# --------------------------------------------------------------------------- over arrays
WINNERS_STRIDE = N_CARDS + 1
"""Row length of :data:`WINNERS_FLAT`: the 48 cards, then "no card yet"."""
WINNERS_FLAT = np.array(
    [w for t in range(TRUMP_UNSET + 1) for w in (*WINNERS[t], ALL_CARDS)], dtype=np.uint64
)
""":data:`WINNERS` flat for array code: index ``trump * WINNERS_STRIDE + win``, where ``win``
is the winning card or :data:`N_CARDS` while the trick is empty (every card "beats" none)."""
FOLLOW = np.array([*SUIT_MASK, ALL_CARDS], dtype=np.uint64)
"""``FOLLOW[led]``: the cards that follow the led suit; ``FOLLOW[NO_SUIT]``: every card."""
LOWEST_TABLE = np.array(LOWEST_IN_SUIT, dtype=np.uint64)
""":data:`LOWEST_IN_SUIT` as an array (obligada's lookup)."""
SUIT_ARRAY = np.array(SUIT, dtype=np.int64)
"""``SUIT_ARRAY[card]``: the card's suit, for array code."""
_SUIT0_U = np.uint64(_SUIT0)
_ZERO_U = np.uint64(0)
_ONE_U = np.uint64(1)


def card_bits_array(masks: np.ndarray) -> np.ndarray:
    """Card masks (``uint64``, any shape) as one bool per card, shape ``(..., 48)``: which
    cards each mask holds, for array code that needs the cards one by one (``cards_of`` for
    one ``int`` mask)."""
    shape = np.shape(masks)  # ascontiguousarray makes a lone mask 1-d
    little = np.ascontiguousarray(masks, dtype="<u8")  # byte k holds cards 8k to 8k + 7
    bits = np.unpackbits(
        little.view(np.uint8).reshape(*shape, 8), axis=-1, count=N_CARDS, bitorder="little"
    )
    return bits.view(bool)  # unpackbits writes 0/1 bytes: reread them as bools, no copy


def add_to_trick_array(
    led_suit: np.ndarray,
    win: np.ndarray,
    win_seat: np.ndarray,
    seat: np.ndarray,
    card: np.ndarray,
    trump: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`add_to_trick` over arrays, one trick per entry: the new ``(led_suit, win,
    win_seat)`` after ``seat`` plays ``card``. ``win`` is :data:`N_CARDS` while the trick is
    empty (then the card sets the led suit and wins); ``tests/test_rules_array.py`` holds
    it to :func:`add_to_trick`."""
    takes = (np.take(WINNERS_FLAT, trump * WINNERS_STRIDE + win) >> card.astype(np.uint64)) & _ONE_U
    takes = takes != 0
    return (
        np.where(win == N_CARDS, np.take(SUIT_ARRAY, card), led_suit),
        np.where(takes, card, win),
        np.where(takes, seat, win_seat),
    )


def legal_cards_array(
    hand: np.ndarray,
    led_suit: np.ndarray,
    win: np.ndarray,
    opponent_winning: np.ndarray,
    trump: np.ndarray,
    obligada: bool = False,
) -> np.ndarray:
    """:func:`legal_cards` over arrays, one position per entry: the same expression, for the
    batched engine and the search's batched rollouts (``tests/test_rules_array.py`` holds it
    to :func:`legal_cards` on every kind of position).

    ``hand`` is ``uint64``; ``led_suit``, ``win`` (:data:`N_CARDS` while the trick is empty)
    and ``trump`` are integer arrays; ``opponent_winning`` is a bool array: an opponent of
    the mover played the winning card (``not partner_winning``, False while leading)."""
    follow = hand & np.take(FOLLOW, led_suit)
    base = np.where(follow != 0, follow, hand)
    beat = base & np.take(WINNERS_FLAT, trump * WINNERS_STRIDE + win)
    beat = np.where(opponent_winning, beat, _ZERO_U)
    legal = np.where(beat != 0, beat, base)
    if obligada:
        forced = (beat == 0) & (follow != 0) & (led_suit != NO_SUIT) & opponent_winning
        if forced.any():
            shift = (np.minimum(led_suit, NO_SUIT - 1) * CARDS_PER_SUIT).astype(np.uint64)
            pattern = ((follow >> shift) & _SUIT0_U).astype(np.intp)
            legal = np.where(forced, np.take(LOWEST_TABLE, pattern) << shift, legal)
    return legal


# --------------------------------------------------------------------------- bidding
TRUMP_CHOICES = 5
"""Suits 0-3 and butifarra (:data:`NO_TRUMP`)."""


def first_asked_to_double(chooser: Int) -> Int:
    """After the declaration, the defender after the chooser is asked first."""
    return next_seat(chooser)


def asked_after_double(doubler: Int) -> Int:
    """After a double, the other team is asked, starting with the player after the doubler."""
    return next_seat(doubler)


def asked_after_pass(seat: Int) -> Int:
    """After a first pass, the passer's partner is asked (a second pass starts the play)."""
    return partner_of(seat)


def doubling_cap(
    trump: Int, max_doubling_level: int, butifarra_max_doubling_level: int | None = None
) -> Int:
    """The top level of the doubling chain once ``trump`` is chosen: ``max_doubling_level``,
    or for a butifarra (:data:`NO_TRUMP`) ``butifarra_max_doubling_level`` when it is set
    (never above ``max_doubling_level``). At the cap the chain ends and play begins."""
    cap = max_doubling_level
    if butifarra_max_doubling_level is not None:
        cap = min(butifarra_max_doubling_level, max_doubling_level)
    if isinstance(trump, np.ndarray):
        return np.where(trump == NO_TRUMP, cap, max_doubling_level)
    return cap if trump == NO_TRUMP else max_doubling_level


def doubling_factor(level: Int, linear: bool = False) -> Int:
    """What doubling level ``level`` multiplies the base by: 2^level (x1, x2, x4, x8, x16), or
    level + 1 with linear doubling (x1, x2, x3, x4, x5)."""
    return level + 1 if linear else 1 << level


def multiplier(trump: Int, level: Int, butifarra_base: int = 2, linear: bool = False) -> Int:
    """base (``butifarra_base`` for butifarra, 1 for a suit) times the doubling factor of
    ``level`` (:func:`doubling_factor`: 2 per level, or level + 1 when ``linear``)."""
    if isinstance(trump, np.ndarray):
        base = np.where(trump == NO_TRUMP, butifarra_base, 1)
    else:
        base = butifarra_base if trump == NO_TRUMP else 1
    return base * doubling_factor(level, linear)


# --------------------------------------------------------------------------- scoring
def hand_scores(team_points: Any, mult: Any) -> Any:
    """Only the team above 36 scores ``(its points - 36) x multiplier``; 36-36 scores nothing.

    ``team_points`` is ``(team A, team B)``; or an ``(N, 2)`` array with ``mult`` ``(N,)``,
    giving ``(N, 2)`` scores.
    """
    if isinstance(team_points, np.ndarray):
        m = np.asarray(mult)[..., None]
        return np.where(team_points > HALF_POINTS, (team_points - HALF_POINTS) * m, 0)
    a, b = team_points
    if a > HALF_POINTS:
        return ((a - HALF_POINTS) * mult, 0)
    if b > HALF_POINTS:
        return (0, (b - HALF_POINTS) * mult)
    return (0, 0)


SEAT_SIGN = (1, -1, 1, -1)
"""Each seat's share of team A's margin: the default rewards are ``SEAT_SIGN[s] * (A - B)``."""


def seat_rewards(scores: tuple[int, int]) -> tuple[int, int, int, int]:
    """RULES.md rewards: each player gets its team's score minus the other team's."""
    margin = scores[0] - scores[1]
    return (margin, -margin, margin, -margin)


def worst_hand_loss(
    max_doubling_level: int,
    butifarra_base: int,
    linear: bool = False,
    butifarra_max_doubling_level: int | None = None,
) -> int:
    """The most a team can lose on one hand under these options (the illegal-move penalty of
    ``butifarra_v0.env()``, so that an illegal move is never better than playing on): 36
    points at the largest multiplier a suit or a butifarra can reach."""
    top = max(
        multiplier(0, max_doubling_level, butifarra_base, linear),
        multiplier(
            NO_TRUMP,
            doubling_cap(NO_TRUMP, max_doubling_level, butifarra_max_doubling_level),
            butifarra_base,
            linear,
        ),
    )
    return HALF_POINTS * top


# --------------------------------------------------------------------------- matches
def next_dealer(dealer: Int) -> Int:
    """Each new hand of a match, the deal passes to the next player."""
    return next_seat(dealer)


def match_over(match_scores: Any, target: int) -> Any:
    """Has a team reached the target? (``(2,)`` scores, or ``(N, 2)`` arrays -> ``(N,)``)"""
    if isinstance(match_scores, np.ndarray):
        return match_scores.max(axis=-1) >= target
    return max(match_scores) >= target


def match_winner(match_scores: tuple[int, int] | list[int], target: int) -> int | None:
    """The team that reached the target (only one team scores per hand), else None."""
    if match_scores[0] >= target:
        return 0
    if match_scores[1] >= target:
        return 1
    return None


class Match:
    """Where a match stands between hands: the one match loop of the project.

    ``target`` None means an episode is one hand. :meth:`add_hand` books a finished hand's
    scores and says whether the match goes on; :attr:`dealer`, :attr:`hand_number` and
    :attr:`scores` then describe the next hand.
    """

    __slots__ = ("target", "dealer", "hand_number", "scores")

    def __init__(
        self,
        target: int | None,
        dealer: int,
        hand_number: int = 0,
        scores: tuple[int, int] = (0, 0),
    ) -> None:
        self.target = target
        self.dealer = dealer
        self.hand_number = hand_number
        self.scores = (int(scores[0]), int(scores[1]))

    @property
    def winner(self) -> int | None:
        return None if self.target is None else match_winner(self.scores, self.target)

    def add_hand(self, hand_scores: tuple[int, int]) -> bool:
        """Book a finished hand; True when another hand follows (dealer rotated)."""
        if self.target is None:
            return False
        self.scores = (self.scores[0] + hand_scores[0], self.scores[1] + hand_scores[1])
        if match_over(self.scores, self.target):
            return False
        self.dealer = next_dealer(self.dealer)
        self.hand_number += 1
        return True
