"""The rule-based player over a whole batch of observations: numpy arrays, no loop over rows.

:func:`decide_batch` makes exactly the decisions of :func:`agents.rule_based.decide` (the
readable definition, one observation at a time) for every row of a batch, because the
rule-based agent plays most opponent seats in PPO training and teaches its bids. The same
heuristics are written as array operations: each observation's cards are ``uint64`` bitmasks
(hand, played per seat, unseen), suit patterns are looked up in 4096-entry tables, and a
card-play choice is an arg-min or arg-max, over each row's legal cards in ascending order
(``(rows, 12)`` at most), of one integer key that encodes the scalar code's tuple key, so
ties break alike. ``tests/test_rule_batch.py`` holds the two equal on many positions of
every phase. The loops left are over suits, seats and the cards of a trick, never rows.

Probabilities stay ``float64`` and follow the scalar operation order. The two
non-elementary pieces, the hypergeometric :func:`~agents.rule_based.void_probability` and the
power in :func:`~agents.rule_based.hold_probability`, depend only on a few small counts, so
they are tabulated once with Python floats (the scalar expressions, the same rounding)
rather than left to numpy's ``power``, which rounds differently in some entries. The hand
valuations add the same terms in the same order (0.0 where the scalar adds nothing).

A call costs a few hundred numpy operations whatever the batch size, so the batch path
pays from batches of about a hundred rows on (``benchmarks/bench_agents.py`` prints both).

The tunable parameters of the rule-based player live here (one copy, imported by
:mod:`agents.rule_based`). Equality is for observations the engine produces; a vector that
passes :func:`agents.base.check_batch` but no game can reach (say a seat with more than 12
played cards) still gets a legal action, possibly another than the scalar code's.
"""

from __future__ import annotations

import numpy as np

from butifarra_env.core.actions import (
    BUTIFARRA,
    DELEGATE,
    DOUBLE,
    N_ACTIONS,
    PASS,
    TRUMP_BASE,
)
from butifarra_env.core.cards import (
    ALL_CARDS,
    BEATS,
    CARDS_PER_SUIT,
    N_CARDS,
    N_SUITS,
    N_TRICKS,
    NUMBER,
    POINTS,
    STRENGTH,
    STRENGTH_ORDER,
    SUIT_MASK,
)
from butifarra_env.core.observation import CARD_FIELDS, OBS_SIZE, field
from butifarra_env.core.rules import (
    N_SEATS,
    NO_TRUMP,
    PHASE_CHOOSE_TRUMP,
    PHASE_CHOOSE_TRUMP_DELEGATED,
    PHASE_DOUBLING,
    PHASE_PLAY,
    TRUMP_UNSET,
    WINNERS,
    card_bits_array,
)
from butifarra_env.core.rules import SUIT_ARRAY as _SUIT

__all__ = ["decide_batch"]

# ---------------------------------------------------------------- tunable parameters
DELEGATE_BELOW = 9.5
"""The dealer delegates when no suit reaches this :func:`~agents.rule_based.trump_suit_value`.
Calibrated on rule-vs-rule play of the same deals both ways: below it the partner's forced
choice scores more on average than the dealer's best suit."""
BUTIFARRA_MIN = 6.0
"""Sing butifarra from this :func:`~agents.rule_based.butifarra_value` on (about the best tenth
of hands: stoppers in three or four suits); calibrated like :data:`DELEGATE_BELOW`."""
TAKE_MIN_P = 0.7
"""Take a trick when the winning card holds against the opponents still to play with at
least this probability (:func:`~agents.rule_based.win_probability`)."""
LOAD_MIN_P = 0.7
"""Load points on the partner's card ("carregar") from this probability of it holding."""
CASH_MIN_P = 0.75
"""Lead ("cash") the top card of a side suit when it wins with this probability."""
OVERTAKE_POINTS = 5
"""Over-take a partner's doubtful trick (with a winner that holds, :data:`TAKE_MIN_P`)
when the trick carries this many points."""
DOUBLE_THRESHOLDS = {
    "defender": (9.0, 10.0),
    "chooser": (10.5, 8.0),
    "partner": (6.0, 0.0),
}
"""Strength (suit contract, butifarra) for a side's first raise, by role. Calibrated on
rule-vs-rule play: each is where the expected score of the raising side (at x1) given
that strength is clearly positive (about +4 points), so the raise pays against an equal
opponent, not only against a weak one."""
DOUBLE_STEP = 2.0
"""Extra strength for a side's second raise (Sant Vicenç, Verraca)."""

# Weights of the hand valuations (trump_suit_value, butifarra_value).
TRUMP_HONOUR = {9: 3.0, 1: 2.0, 12: 1.0, 11: 0.5}
"""Bonus of a trump by number (manilla, as, rey, caballo), on top of 1 per trump."""
SIDE_MANILLA = 1.5
"""A manilla in a side suit, plus :data:`SIDE_MANILLA_AS` with its as."""
SIDE_MANILLA_AS = 1.0
RUFF_FROM_TRUMPS = 4
"""With this many trumps, short side suits count: :data:`RUFF_VOID`, :data:`RUFF_SINGLETON`."""
RUFF_VOID = 1.5
RUFF_SINGLETON = 0.5
STOPPER_MANILLA = 3.0
"""No-trump: a manilla stops its suit; :data:`STOPPER_AS` more with the as, plus
:data:`STOPPER_RUN` per card beyond :data:`STOPPER_RUN_FROM`, plus :data:`STOPPER_REY`."""
STOPPER_AS = 2.0
STOPPER_RUN = 0.75
STOPPER_RUN_FROM = 3
STOPPER_REY = 1.0
GUARDED_AS = 1.0
"""No-trump: an as without the manilla, guarded by :data:`GUARDED_AS_LENGTH` cards."""
GUARDED_AS_LENGTH = 3
HOLE_PENALTY = 1.5
"""No-trump: a suit with neither stopper is a hole the opponents run."""

# Card-play costs (low_cost, lead_cost) and the trumps choose_load keeps.
COST_PER_POINT = 10
"""Playing a card costs its points times this, plus its strength in the suit."""
COST_TRUMP = 40
COST_MASTER = 25
LEAD_NOT_LOWEST = 5
"""Leading a card that is not the lowest of its suit."""
LEAD_CABALLO = 30
"""Leading a caballo while a stronger card of its suit is out ("salida de caballo")."""
LEAD_MANILLA = 30
"""Leading a manilla without the as or rey ("de manilla no saldrás")."""
LEAD_INTO_RUFF = 15
"""Per opponent shown void in the suit who may still ruff it."""
DRAW_TRUMPS_WITH = 3
"""Draw trumps with the master trump when my side chose trump, or with this many trumps."""
KEEP_TRUMP_BELOW_POINTS = 3
"""When loading, keep the trumps worth fewer points than this."""

# ---------------------------------------------------------------- suit-pattern tables
_STRONG_TO_WEAK_POSITIONS = tuple(n - 1 for n in STRENGTH_ORDER)
_SUIT_PATTERNS = 1 << CARDS_PER_SUIT
"""A suit's cards in a mask, shifted down to bits 0-11 (bit ``number - 1``)."""


def _strongest_and_weakest() -> tuple[tuple[int, ...], tuple[int, ...]]:
    strongest = [-1] * _SUIT_PATTERNS
    weakest = [-1] * _SUIT_PATTERNS
    for pattern in range(1, _SUIT_PATTERNS):
        present = [o for o in _STRONG_TO_WEAK_POSITIONS if (pattern >> o) & 1]
        strongest[pattern], weakest[pattern] = present[0], present[-1]
    return tuple(strongest), tuple(weakest)


STRONGEST_IN_PATTERN, WEAKEST_IN_PATTERN = _strongest_and_weakest()
"""Offset in its suit of the strongest / weakest card of a 12-bit suit pattern (-1: none)."""
PATTERN_POINTS = tuple(
    sum(POINTS[o] for o in range(CARDS_PER_SUIT) if (pattern >> o) & 1)
    for pattern in range(_SUIT_PATTERNS)
)
"""Card points of a 12-bit suit pattern (the same for every suit)."""

_STRONGEST = np.array(STRONGEST_IN_PATTERN, dtype=np.int64)
_WEAKEST = np.array(WEAKEST_IN_PATTERN, dtype=np.int64)
_PATTERN_POINTS = np.array(PATTERN_POINTS, dtype=np.int64)

# ---------------------------------------------------------------- per-card tables
_CARD = np.arange(N_CARDS, dtype=np.int64)
_NUMBER = np.array(NUMBER, dtype=np.int64)
_POINTS = np.array(POINTS, dtype=np.int64)
_STRENGTH = np.array(STRENGTH, dtype=np.int64)
_BEATS = np.array(BEATS, dtype=np.uint64)
_SUIT_MASK = np.array(SUIT_MASK, dtype=np.uint64)
_WINNERS = np.array(WINNERS, dtype=np.uint64)
"""``rules.WINNERS[trump][win]``: the cards that take the trick from ``win``."""
AS_OR_REY = np.array(
    [(1 << (CARDS_PER_SUIT * s)) | (1 << (CARDS_PER_SUIT * s + 11)) for s in range(N_SUITS)],
    dtype=np.uint64,
)
_ALL = np.uint64(ALL_CARDS)
SUIT_FIRST = np.arange(N_SUITS, dtype=np.int64) * CARDS_PER_SUIT
"""The id of each suit's first card (its as)."""
_SUIT_SHIFTS = SUIT_FIRST.astype(np.uint64)
_FFF = np.uint64(_SUIT_PATTERNS - 1)
_ONE = np.uint64(1)
_INT_MAX = np.iinfo(np.int64).max
_INT_MIN = np.iinfo(np.int64).min

# ---------------------------------------------------------------- probability tables
# Public, with AS_OR_REY, SUIT_FIRST, the pattern tables and ROLE_THRESHOLDS:
# agents/rule_torch.py copies them to its device rather than building its own.
MAX_UNSEEN = N_CARDS
"""Unseen cards are at most 36 in a game; 48 covers a hand-built vector with few cards."""
MAX_HOLDERS = 3 * N_TRICKS
"""Cards left with the three other players, at most."""


def _void_table() -> np.ndarray:
    """``[size, total, u]``: chance that a seat with ``size`` cards holds none of the ``u``
    unseen cards of a suit among ``total`` unseen cards
    (:func:`~agents.rule_based.void_probability`'s product: the same factors, in order)."""
    table = np.ones((N_TRICKS + 1, MAX_UNSEEN + 1, CARDS_PER_SUIT + 1))
    for total in range(MAX_UNSEEN + 1):
        for u in range(CARDS_PER_SUIT + 1):
            p = 1.0
            for i in range(N_TRICKS):
                if total - i > 0:  # the scalar loop stops at the first i where this fails
                    p *= max(0, total - u - i) / (total - i)
                table[i + 1, total, u] = p
    return table


def _hold_table() -> np.ndarray:
    """``[size, total, k]``: chance that a seat with ``size`` of the ``total`` cards that may
    hold a suit has at least one of ``k`` unseen cards of it
    (:func:`~agents.rule_based.hold_probability`'s expression)."""
    table = np.zeros((N_TRICKS + 1, MAX_HOLDERS + 1, CARDS_PER_SUIT + 1))
    for size in range(N_TRICKS + 1):
        for total in range(1, MAX_HOLDERS + 1):
            for k in range(1, CARDS_PER_SUIT + 1):
                table[size, total, k] = 1.0 - (1.0 - size / total) ** k
    return table


VOID_TABLE = _void_table()
HOLD_TABLE_FLAT = _hold_table().ravel()
"""The hold table flat: entry ``(size * 37 + total) * 13 + k``."""


# ---------------------------------------------------------------- bit helpers
if hasattr(np, "bitwise_count"):  # numpy >= 2.0

    def _popcount(x: np.ndarray) -> np.ndarray:
        return np.bitwise_count(x).astype(np.int64)

else:  # pragma: no cover - numpy 1.x
    _BYTE_BITS = np.array([bin(b).count("1") for b in range(256)], dtype=np.int64)

    def _popcount(x: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.uint64)
        return _BYTE_BITS[x.view(np.uint8).reshape(*x.shape, 8)].sum(axis=-1)


def _masks(block: np.ndarray, width: int) -> np.ndarray:
    """0/1 ``(n, k * width)`` -> ``uint64`` ``(n, k)``: bit ``c`` = entry ``c`` of each block."""
    n = len(block)
    k = block.shape[1] // width
    packed = np.packbits(block.reshape(n, k, width), axis=2, bitorder="little")
    out = np.zeros((n, k, 8), dtype=np.uint8)
    out[:, :, : packed.shape[2]] = packed
    return out.view("<u8")[:, :, 0].astype(np.uint64)


def _high_bit(x: np.ndarray) -> np.ndarray:
    """Index of the highest set bit of masks below 2**53 (-1 for 0): ``frexp`` is exact."""
    return np.frexp(x.astype(np.float64))[1].astype(np.int64) - 1


def _highest_set(block: np.ndarray) -> np.ndarray:
    """Per row, the last non-zero entry of a one-hot field (-1 when none), as
    ``observation.View`` reads it."""
    set_ = block != 0
    last = block.shape[1] - 1 - set_[:, ::-1].argmax(axis=1)
    return np.where(set_.any(axis=1), last, -1)


def _patterns(mask: np.ndarray) -> np.ndarray:
    """``(n, 4)`` the 12-bit pattern of each suit in ``mask`` (as table indices)."""
    return ((mask[:, None] >> _SUIT_SHIFTS) & _FFF).astype(np.intp)


def _tops_and_bottoms(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(n, 4)`` strongest and weakest card of each suit in ``mask`` (-1: none), as
    :func:`~agents.rule_based.top_card` / :func:`~agents.rule_based.bottom_card`."""
    p = _patterns(mask)
    top, bottom = _STRONGEST[p], _WEAKEST[p]
    return np.where(top >= 0, SUIT_FIRST + top, -1), np.where(bottom >= 0, SUIT_FIRST + bottom, -1)


# ---------------------------------------------------------------- the batch view
class _Rows:
    """What :class:`butifarra_env.core.observation.View` holds, for every row of a batch
    (relative seats: 0 me, 1 next, 2 partner, 3 previous)."""

    __slots__ = (
        "n",
        "rows",
        "hand",
        "trick",
        "n_trick",
        "leader",
        "void",
        "trump",
        "chooser",
        "level",
        "unseen",
        "sizes",
    )

    def __init__(self, obs: np.ndarray) -> None:
        self.n = n = len(obs)
        self.rows = np.arange(n)
        cards = np.concatenate([field(obs, name) for name in CARD_FIELDS], axis=1)
        blocks = _masks(cards, N_CARDS)  # hand, played x4, trick x4 (CARD_FIELDS)
        self.hand: np.ndarray = blocks[:, 0]
        played = blocks[:, 1 : 1 + N_SEATS]
        trick = blocks[:, 1 + N_SEATS :]
        self.trick: np.ndarray = _high_bit(trick)
        """(n, 4) the card of each seat on the table, -1: none."""
        self.n_trick: np.ndarray = (trick != 0).sum(axis=1)
        self.leader: np.ndarray = _highest_set(field(obs, "trick_leader"))
        self.void: np.ndarray = field(obs, "voids").reshape(n, N_SEATS, N_SUITS) != 0
        """(n, seat, suit): the seat has shown a void in the suit."""
        trump = _highest_set(field(obs, "trump"))
        self.trump: np.ndarray = np.where(trump < 0, TRUMP_UNSET, trump)
        self.chooser: np.ndarray = _highest_set(field(obs, "chooser"))
        self.level: np.ndarray = np.maximum(_highest_set(field(obs, "doubling_level")), 0)
        seen = self.hand | played[:, 0] | played[:, 1] | played[:, 2] | played[:, 3]
        self.unseen: np.ndarray = _ALL & ~seen
        self.sizes: np.ndarray = N_TRICKS - _popcount(played)
        """(n, 4) cards left in each seat's hand."""

    def take(self, at: np.ndarray) -> _Rows:
        """The rows ``at`` (indices)."""
        out = object.__new__(_Rows)
        for name in self.__slots__[2:]:
            setattr(out, name, getattr(self, name)[at])
        out.n = len(at)
        out.rows = np.arange(out.n)
        return out


def _compact(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """bool ``(n, 48)`` -> each row's set cards in ascending order, as ``(n, K)`` ids (padded
    with card 0) and which of them are real; ``K`` is the most cards in a row (at least 1).
    A hand holds at most 12 cards, so the per-card work shrinks fourfold."""
    count = bits.sum(axis=1)
    width = max(int(count.max(initial=0)), 1)
    rows, cards = np.nonzero(bits)  # row-major: ascending cards within a row
    starts = np.cumsum(count) - count
    out = np.zeros((len(bits), width), dtype=np.int64)
    out[rows, np.arange(len(cards)) - np.repeat(starts, count)] = cards
    return out, np.arange(width) < count[:, None]


def _arg_best(key: np.ndarray, valid: np.ndarray, cards: np.ndarray, lowest: bool) -> np.ndarray:
    """The card of ``cards`` (ascending per row) with the lowest / highest ``key`` among the
    ``valid`` ones, the first on ties (as ``min`` / ``max`` over ``cards_of``); -1: none."""
    if lowest:
        best = np.where(valid, key, _INT_MAX).argmin(axis=1)
    else:
        best = np.where(valid, key, _INT_MIN).argmax(axis=1)
    card = cards[np.arange(len(cards)), best]
    return np.where(valid.any(axis=1), card, -1)


class _Counting:
    """Card counting for the play phase: the probabilities of ``rule_based`` over arrays."""

    def __init__(self, r: _Rows) -> None:
        self.r = r
        self.offsets = (np.arange(r.n) * N_SUITS)[:, None]
        self.unseen_in: np.ndarray = _popcount(r.unseen[:, None] & _SUIT_MASK[None, :])
        """(n, suit) unseen cards of each suit."""
        unseen_total = np.minimum(_popcount(r.unseen), MAX_UNSEEN)
        sizes = np.maximum(r.sizes, 0)  # a seat has 12 cards or fewer
        # hold_probability's total: the cards of the seats 1-3 not shown void in the suit.
        holders = (sizes[:, 1:, None] * ~r.void[:, 1:, :]).sum(axis=1)  # at most 36
        self.hold_base: dict[int, np.ndarray] = {}
        """Per opponent, (n, suit): where its row of the flat hold table starts; a seat shown
        void in the suit reads the all-zero row of total 0."""
        self.void_p: dict[int, np.ndarray] = {}
        """Per opponent, (n, suit): void_probability."""
        for seat in (1, 3):
            void = r.void[:, seat, :]
            total = np.where(void, 0, holders)
            self.hold_base[seat] = (sizes[:, seat, None] * (MAX_HOLDERS + 1) + total) * (
                CARDS_PER_SUIT + 1
            )
            table = VOID_TABLE[sizes[:, seat, None], unseen_total[:, None], self.unseen_in]
            self.void_p[seat] = np.where(void, 1.0, table)
        self.trump = np.minimum(r.trump, N_SUITS - 1)  # a valid index; read where trump < 4
        self.trump_game = r.trump < NO_TRUMP
        self._may_ruff: dict[int, np.ndarray] = {}

    def per_suit(self, table: np.ndarray, suit: np.ndarray) -> np.ndarray:
        """``table[row, suit[row, j]]`` for an ``(n, 4)`` table and ``(n, K)`` suits."""
        return table.ravel()[suit + self.offsets]

    def may_hold_trumps(self, seat: int) -> np.ndarray:
        """:func:`~agents.rule_based.may_hold_trumps` per row (kept: leads ask it often)."""
        if seat not in self._may_ruff:
            r, t = self.r, self.trump
            may = self.trump_game & ~r.void[r.rows, seat, t] & (self.unseen_in[r.rows, t] > 0)
            self._may_ruff[seat] = may
        return self._may_ruff[seat]

    def win_probability(self, cards: np.ndarray, led: np.ndarray) -> np.ndarray:
        """:func:`~agents.rule_based.win_probability` of ``cards`` ``(n, K)``, each winning a
        trick led in ``led`` (broadcast to ``(n, K)``), against the opponents still to play."""
        r, rows, t = self.r, self.r.rows, self.trump
        suit = _SUIT[cards]
        higher = _popcount(r.unseen[:, None] & _BEATS[cards])
        same = suit == led
        p = np.ones(cards.shape)
        for seat in (1, 3):  # opponents_after, in the scalar order
            after = r.n_trick == 0 if seat == 3 else r.n_trick <= 2
            base = self.hold_base[seat]
            hold_higher = HOLD_TABLE_FLAT[self.per_suit(base, suit) + higher]
            hold_trumps = HOLD_TABLE_FLAT[base[rows, t] + self.unseen_in[rows, t]]
            void_led = self.per_suit(self.void_p[seat], led)
            ruff = (self.trump_game & ~r.void[rows, seat, t])[:, None] & (led != t[:, None])
            beat_same = np.minimum(
                np.where(ruff, hold_higher + void_led * hold_trumps[:, None], hold_higher), 1.0
            )
            beat_other = np.where(higher > 0, void_led * hold_higher, 0.0)
            beat = np.where(same, beat_same, beat_other)
            p = np.where(after[:, None], p * (1.0 - beat), p)
        return p

    def low_cost(self, cards: np.ndarray) -> np.ndarray:
        """:func:`~agents.rule_based.low_cost` of ``cards`` ``(n, K)``."""
        r = self.r
        master = (r.unseen[:, None] & _BEATS[cards]) == 0
        cost = _POINTS[cards] * COST_PER_POINT + _STRENGTH[cards]
        cost += COST_TRUMP * (_SUIT[cards] == r.trump[:, None])
        return cost + COST_MASTER * master


def _manilla_lead_ok(hand: np.ndarray, suit: np.ndarray, unseen: np.ndarray) -> np.ndarray:
    """:func:`~agents.rule_based.manilla_lead_ok` per element (broadcasting)."""
    as_or_rey = AS_OR_REY[suit]
    return ((hand & as_or_rey) != 0) | ((unseen & as_or_rey) == 0)


# ---------------------------------------------------------------- card play
def _lowest_card(c: _Counting, cards: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """:func:`~agents.rule_based.lowest_card` among the ``valid`` ``cards``."""
    return _arg_best(c.low_cost(cards) * 64 + cards, valid, cards, lowest=True)


def _choose_load(c: _Counting, cards: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """:func:`~agents.rule_based.choose_load`: key (not kept, points, -strength), maximal."""
    r = c.r
    master = (r.unseen[:, None] & _BEATS[cards]) == 0
    points = _POINTS[cards]
    small_trump = (_SUIT[cards] == r.trump[:, None]) & (points < KEEP_TRUMP_BELOW_POINTS)
    keep = master | small_trump
    key = (~keep) * 256 + points * 16 + (11 - _STRENGTH[cards])
    return _arg_best(key, valid, cards, lowest=False)


def _choose_lead(c: _Counting, legal: np.ndarray) -> np.ndarray:
    """:func:`~agents.rule_based.choose_lead` for rows with an empty table."""
    r, rows = c.r, c.r.rows
    hand = r.hand & _masks(legal, N_CARDS)[:, 0]
    unseen, t, trump_game = r.unseen, c.trump, c.trump_game
    tops, bottoms = _tops_and_bottoms(hand)
    out = np.full(r.n, -1, dtype=np.int64)

    # 1. Draw the opponents' trumps with the master trump.
    top_trump = tops[rows, t]
    safe = np.maximum(top_trump, 0)
    mine = _popcount(hand & _SUIT_MASK[t])
    draw = (
        trump_game
        & (mine > 0)
        & (c.may_hold_trumps(1) | c.may_hold_trumps(3))
        & ((r.chooser == 0) | (r.chooser == 2) | (mine >= DRAW_TRUMPS_WITH))
        & ((unseen & _BEATS[safe]) == 0)
        & ((_NUMBER[safe] != 9) | _manilla_lead_ok(hand, t, unseen))
    )
    out[draw] = top_trump[draw]

    # 2. Cash a sure winner, preferring the suit with most points still out.
    safe_tops = np.maximum(tops, 0)
    win_p = c.win_probability(safe_tops, np.arange(N_SUITS)[None, :])
    best = np.full(r.n, -1, dtype=np.int64)
    best_key = np.full(r.n, -1, dtype=np.int64)
    points_out = _PATTERN_POINTS[_patterns(unseen)]
    for s in range(N_SUITS):
        card, safe = tops[:, s], safe_tops[:, s]
        ok = (r.trump != s) & (card >= 0) & (win_p[:, s] >= CASH_MIN_P)
        ok &= (_NUMBER[safe] != 9) | _manilla_lead_ok(hand, np.intp(s), unseen)
        key = points_out[:, s] * 16 + (11 - _STRENGTH[safe])  # (points, -strength)
        better = ok & (key > best_key)
        best = np.where(better, card, best)
        best_key = np.where(better, key, best_key)
    cash = (out < 0) & (best >= 0)
    out[cash] = best[cash]

    # 3. Lead into the partner's void so the partner ruffs.
    feed = (out < 0) & trump_game & c.may_hold_trumps(2)
    over_ruff = c.may_hold_trumps(3)
    for s in range(N_SUITS):
        low = bottoms[:, s]
        ok = feed & (r.trump != s) & (low >= 0) & r.void[:, 2, s]
        ok &= ~(r.void[:, 3, s] & over_ruff)
        ok &= _POINTS[np.maximum(low, 0)] == 0
        out[ok] = low[ok]
        feed &= ~ok

    # 4. Lead low from the suit that gives least away (lead_cost, on the whole hand).
    rest = out < 0
    if rest.any():
        cards, valid = _compact(card_bits_array(hand))
        suit, number = _SUIT[cards], _NUMBER[cards]
        cost = c.low_cost(cards)
        cost += LEAD_NOT_LOWEST * (c.per_suit(_tops_and_bottoms(r.hand)[1], suit) != cards)
        higher_out = (unseen[:, None] & _BEATS[cards]) != 0
        cost += LEAD_CABALLO * ((number == 11) & higher_out)
        manilla_ok = _manilla_lead_ok(r.hand[:, None], suit, unseen[:, None])
        cost += LEAD_MANILLA * ((number == 9) & ~manilla_ok)
        side = trump_game[:, None] & (suit != r.trump[:, None])
        for seat in (1, 3):
            ruffs = c.per_suit(r.void[:, seat, :], suit) & c.may_hold_trumps(seat)[:, None]
            cost += LEAD_INTO_RUFF * (side & ruffs)
        low = _arg_best(cost * 64 + cards, valid, cards, lowest=True)
        out[rest] = low[rest]
    return out


def _winning_card(r: _Rows) -> tuple[np.ndarray, np.ndarray]:
    """(card, relative seat) winning the trick on the table: ``rules.add_to_trick`` folded
    over the cards in playing order (rows with at least one card on the table)."""
    rows = r.rows
    seat = r.leader & 3
    win = r.trick[rows, seat]
    win_seat = seat.copy()
    for k in range(1, N_SEATS):
        seat = (r.leader + k) & 3
        card = r.trick[rows, seat]
        safe = np.maximum(card, 0)
        takes = (_WINNERS[r.trump, np.maximum(win, 0)] >> safe.astype(np.uint64)) & _ONE
        takes = (k < r.n_trick) & (card >= 0) & (takes != 0)
        win = np.where(takes, card, win)
        win_seat = np.where(takes, seat, win_seat)
    return win, win_seat


def _choose_follow(c: _Counting, legal: np.ndarray) -> np.ndarray:
    """:func:`~agents.rule_based.choose_follow` for rows with cards on the table."""
    r, rows = c.r, c.r.rows
    led = _SUIT[np.maximum(r.trick[rows, r.leader & 3], 0)]
    win, win_seat = _winning_card(r)
    safe_win = np.maximum(win, 0)
    partner_winning = (win_seat >= 0) & ((win_seat & 1) == 0)
    cards, valid = _compact(legal)
    # column 0: the card winning now; then the legal cards
    win_p = c.win_probability(np.concatenate([safe_win[:, None], cards], axis=1), led[:, None])
    load = partner_winning & (win_p[:, 0] >= LOAD_MIN_P)
    takes = (_WINNERS[r.trump, safe_win][:, None] >> cards.astype(np.uint64)) & _ONE
    likely = valid & (takes != 0) & (win_p[:, 1:] >= TAKE_MIN_P)
    on_table = np.where(r.trick >= 0, _POINTS[np.maximum(r.trick, 0)], 0).sum(axis=1)
    best_points = np.where(likely, _POINTS[cards], 0).max(axis=1)
    cheap = partner_winning & (on_table + best_points < OVERTAKE_POINTS)
    go_low = ~load & (~likely.any(axis=1) | cheap)
    # cheapest_winner: key (is a trump, strength, card), minimal
    key = (_SUIT[cards] == r.trump[:, None]) * 4096 + _STRENGTH[cards] * 64 + cards
    out = np.where(load, _choose_load(c, cards, valid), _arg_best(key, likely, cards, True))
    return np.where(go_low, _lowest_card(c, cards, valid), out)


def _choose_card(r: _Rows, legal: np.ndarray) -> np.ndarray:
    out = np.full(r.n, -1, dtype=np.int64)
    leading = r.n_trick == 0
    for part, choose in ((leading, _choose_lead), (~leading, _choose_follow)):
        if part.any():
            at = np.flatnonzero(part)
            out[at] = choose(_Counting(r.take(at)), legal[at])
    return out


# ---------------------------------------------------------------- bidding
def _hand_values(hand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~agents.rule_based.trump_suit_value` of every suit ``(n, 4)`` and
    :func:`~agents.rule_based.butifarra_value` ``(n,)``: the scalar sums term by term in the
    scalar order (adding 0.0 where the scalar adds nothing, which changes no float), so they
    round alike whatever the weights."""
    pats = _patterns(hand)
    k = _popcount(pats.astype(np.uint64))
    has = {number: ((pats >> (number - 1)) & 1) != 0 for number in (1, 9, 11, 12)}

    values = k.astype(np.float64)  # column: the suit as trump
    for number in sorted(TRUMP_HONOUR):  # cards_of order: ascending ids
        values = values + np.where(has[number], TRUMP_HONOUR[number], 0.0)
    ruffs = k >= RUFF_FROM_TRUMPS
    for s in range(N_SUITS):  # s as a side suit of every other trump suit
        side = np.arange(N_SUITS) != s
        manilla = has[9][:, s, None] & side
        values = values + np.where(manilla, SIDE_MANILLA, 0.0)
        values = values + np.where(manilla & has[1][:, s, None], SIDE_MANILLA_AS, 0.0)
        short = np.where(k[:, s] == 0, RUFF_VOID, np.where(k[:, s] == 1, RUFF_SINGLETON, 0.0))
        values = values + np.where(ruffs & side, short[:, None], 0.0)

    stopped = has[9] & has[1]
    first = np.where(
        has[9],
        STOPPER_MANILLA,
        np.where(has[1] & (k >= GUARDED_AS_LENGTH), GUARDED_AS, -HOLE_PENALTY),
    )
    run = np.where(stopped, STOPPER_AS + STOPPER_RUN * np.maximum(0, k - STOPPER_RUN_FROM), 0.0)
    rey = np.where(stopped & has[12], STOPPER_REY, 0.0)
    no_trump = np.zeros(len(hand))
    for s in range(N_SUITS):
        no_trump = no_trump + first[:, s]
        no_trump = no_trump + run[:, s]
        no_trump = no_trump + rey[:, s]
    return values, no_trump


ROLE_THRESHOLDS = np.array(
    [DOUBLE_THRESHOLDS[role] for role in ("defender", "chooser", "partner")], dtype=np.float64
)
"""Rows: :func:`~agents.rule_based.doubling_role` defender, chooser, partner."""


def _bid(r: _Rows, phase: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """:func:`~agents.rule_based.choose_trump` (the dealer, or the partner without the option
    to delegate) and :func:`~agents.rule_based.should_double`, by each row's phase."""
    values, no_trump_value = _hand_values(r.hand)
    best = values.argmax(axis=1)  # the first (lowest) suit on ties
    can_delegate = (phase == PHASE_CHOOSE_TRUMP) & legal[:, DELEGATE]
    delegate = can_delegate & (values[r.rows, best] < DELEGATE_BELOW)
    choice = np.where(delegate, DELEGATE, TRUMP_BASE + best)
    choice = np.where(no_trump_value >= BUTIFARRA_MIN, BUTIFARRA, choice)

    no_trump = r.trump == NO_TRUMP
    strength = np.where(no_trump, no_trump_value, values[r.rows, np.minimum(r.trump, 3)])
    role = np.where(r.chooser == 0, 1, np.where(r.chooser == 2, 2, 0))
    threshold = ROLE_THRESHOLDS[role, no_trump.astype(np.intp)]
    double = strength >= threshold + DOUBLE_STEP * (r.level // 2)
    return np.where(phase == PHASE_DOUBLING, np.where(double, DOUBLE, PASS), choice)


# ---------------------------------------------------------------- the batch
def decide_batch(observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
    """:func:`agents.rule_based.decide` for every row: ``int64`` ``(N,)`` action ids.

    ``observations`` are ``uint8`` ``(N, 491)`` and ``action_masks`` 0/1 ``(N, 56)``, as
    :func:`agents.base.check_batch` returns them. Raises ValueError for a row without a legal
    action. A heuristic's choice that is not legal falls back to the first legal id.
    """
    obs = np.asarray(observations)
    legal = np.asarray(action_masks) != 0
    if obs.ndim != 2 or obs.shape[1] != OBS_SIZE or legal.shape != (len(obs), N_ACTIONS):
        raise ValueError(
            f"expected observations (N, {OBS_SIZE}) and masks (N, {N_ACTIONS}), got "
            f"{obs.shape} and {legal.shape}"
        )
    empty = ~legal.any(axis=1)
    if empty.any():
        raise ValueError(
            f"row {int(np.flatnonzero(empty)[0])} of the action mask has no legal action"
        )
    out = np.empty(len(obs), dtype=np.int64)
    for lo in range(0, len(obs), _CHUNK):
        out[lo : lo + _CHUNK] = _decide(obs[lo : lo + _CHUNK], legal[lo : lo + _CHUNK])
    return out


_CHUNK = 2048
"""Rows decided together: large enough to amortise numpy's per-call cost, small enough that
the per-card arrays stay in cache."""


def _decide(obs: np.ndarray, legal: np.ndarray) -> np.ndarray:
    n = len(obs)
    out = np.full(n, -1, dtype=np.int64)
    r = _Rows(obs)
    phase = _highest_set(field(obs, "phase"))
    at = np.flatnonzero(phase == PHASE_PLAY)
    if len(at):
        out[at] = _choose_card(r.take(at), legal[at, :N_CARDS])
    bidding = (PHASE_CHOOSE_TRUMP, PHASE_CHOOSE_TRUMP_DELEGATED, PHASE_DOUBLING)
    at = np.flatnonzero((phase == bidding[0]) | (phase == bidding[1]) | (phase == bidding[2]))
    if len(at):
        out[at] = _bid(r.take(at), phase[at], legal[at])
    illegal = (out < 0) | ~legal[np.arange(n), np.maximum(out, 0)]
    return np.where(illegal, legal.argmax(axis=1), out)
