"""The rule-based player as torch operations on the device of its input, for on-device PPO.

:func:`decide_batch_torch` makes exactly the decisions of :func:`agents.rule_batch.decide_batch`
(itself held equal to the readable :func:`agents.rule_based.decide`) on every row, without
leaving the device: training that keeps its rollout on the GPU can let the rule-based agent
play opponent seats without copying the batch to the host and back.
``tests/test_rule_torch.py`` holds the two equal on many positions of every phase.

It is :mod:`agents.rule_batch` translated line by line, with three changes that keep it off
the host:

- no row subsets: numpy decides the play rows and the bidding rows (and, among the play rows,
  the leads and the follows) apart; here every branch is computed for every row and
  ``torch.where`` keeps the one that applies. The loops left are over suits, seats and the
  cards of a trick;
- no compaction to a row's cards: a card choice is an arg-min / arg-max over all 48 card
  columns, the ones the row cannot play keyed out. Columns are ascending card ids, so ties
  break to the lowest card as in numpy's compacted ``(rows, 12)`` arrays, and the width does
  not depend on the data (numpy's does, which needs the host);
- card masks are ``int64`` (48 bits, exact: no uint64 bit operations on every device), with
  a shift-and-add popcount.

Every constant and table is :mod:`agents.rule_batch`'s own (thresholds, suit-pattern tables,
the Python-float probability tables; the card tables come from the rules core, as there),
copied to each device once and cached. Probabilities are ``float64`` and follow the numpy
operation order, one operation per kernel (no fused multiply-add), so every float rounds
alike; the weights enter as ``float64`` scalars so that none is rounded to ``float32`` on
the way.

No call reads a tensor's values on the host (``tests/test_rule_torch.py`` runs it on the
``meta`` device, where any such read fails, and under ``torch.cuda.set_sync_debug_mode``
on CUDA). The first call on a device copies the tables there; later calls only launch
kernels. Checking for a row without a legal action needs the host, so it is opt-in
(``check=True``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch

from agents.base import Agent, check_batch
from agents.rule_batch import (
    AS_OR_REY,
    BUTIFARRA_MIN,
    CASH_MIN_P,
    COST_MASTER,
    COST_PER_POINT,
    COST_TRUMP,
    DELEGATE_BELOW,
    DOUBLE_STEP,
    DRAW_TRUMPS_WITH,
    GUARDED_AS,
    GUARDED_AS_LENGTH,
    HOLD_TABLE_FLAT,
    HOLE_PENALTY,
    KEEP_TRUMP_BELOW_POINTS,
    LEAD_CABALLO,
    LEAD_INTO_RUFF,
    LEAD_MANILLA,
    LEAD_NOT_LOWEST,
    LOAD_MIN_P,
    MAX_HOLDERS,
    MAX_UNSEEN,
    OVERTAKE_POINTS,
    PATTERN_POINTS,
    ROLE_THRESHOLDS,
    RUFF_FROM_TRUMPS,
    RUFF_SINGLETON,
    RUFF_VOID,
    SIDE_MANILLA,
    SIDE_MANILLA_AS,
    STOPPER_AS,
    STOPPER_MANILLA,
    STOPPER_REY,
    STOPPER_RUN,
    STOPPER_RUN_FROM,
    STRONGEST_IN_PATTERN,
    SUIT_FIRST,
    TAKE_MIN_P,
    TRUMP_HONOUR,
    VOID_TABLE,
    WEAKEST_IN_PATTERN,
)
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
    SUIT,
    SUIT_MASK,
)
from butifarra_env.core.observation import OBS_SIZE, field_slice
from butifarra_env.core.rules import (
    N_SEATS,
    NO_TRUMP,
    PHASE_CHOOSE_TRUMP,
    PHASE_CHOOSE_TRUMP_DELEGATED,
    PHASE_DOUBLING,
    PHASE_PLAY,
    TRUMP_UNSET,
    WINNERS,
)

__all__ = ["TorchRuleAgent", "decide_batch_torch"]

Tensor = torch.Tensor
_I64 = torch.int64
_F64 = torch.float64
_INT_MAX = torch.iinfo(torch.int64).max
_INT_MIN = torch.iinfo(torch.int64).min
_HOLD_TOTALS = MAX_HOLDERS + 1
_HOLD_KS = CARDS_PER_SUIT + 1
_VOID_TOTALS = MAX_UNSEEN + 1
_VOID_US = CARDS_PER_SUIT + 1
_OBS_DTYPES = (torch.uint8, torch.float32)


# ---------------------------------------------------------------- tables, once per device
class _Tables:
    """The rules core's card tables and :mod:`agents.rule_batch`'s pattern and probability
    tables as tensors on one device (``int64`` masks)."""

    def __init__(self, device: torch.device) -> None:
        def ints(a: npt.ArrayLike) -> Tensor:
            # the uint64 masks are below 2**48: int64 holds them exactly
            return torch.as_tensor(np.asarray(a).astype(np.int64), device=device)

        def floats(a: npt.ArrayLike) -> Tensor:
            return torch.as_tensor(np.asarray(a, dtype=np.float64), device=device)

        self.strongest = ints(STRONGEST_IN_PATTERN)
        self.weakest = ints(WEAKEST_IN_PATTERN)
        self.pattern_points = ints(PATTERN_POINTS)
        self.suit = ints(SUIT)
        self.number = ints(NUMBER)
        self.points = ints(POINTS)
        self.strength = ints(STRENGTH)
        self.beats = ints(BEATS)
        self.suit_mask = ints(SUIT_MASK)
        self.winners = ints(WINNERS).reshape(-1)
        """``rules.WINNERS`` flat: entry ``trump * 48 + win``."""
        self.as_or_rey = ints(AS_OR_REY)
        self.suit_first = ints(SUIT_FIRST)
        """First card id of each suit, also each suit's bit offset in a mask."""
        self.suits = ints(np.arange(N_SUITS))
        self.cards = ints(np.arange(N_CARDS))
        self.bit = ints(np.left_shift(1, np.arange(N_CARDS)))
        """``1 << card``: a 0/1 block times this, summed, is its mask."""
        self.ramp = ints(np.arange(1, OBS_SIZE + 1))
        """1, 2, 3...: the last set entry of a one-hot block is its max times this."""
        assert VOID_TABLE.shape == (N_TRICKS + 1, _VOID_TOTALS, _VOID_US)
        self.void_p = floats(VOID_TABLE).reshape(-1)
        assert HOLD_TABLE_FLAT.shape == ((N_TRICKS + 1) * _HOLD_TOTALS * _HOLD_KS,)
        self.hold = floats(HOLD_TABLE_FLAT)
        self.role_thresholds = floats(ROLE_THRESHOLDS).reshape(-1)
        """Flat ``rule_batch.ROLE_THRESHOLDS``: entry ``role * 2 + no_trump``."""
        weights = {
            *TRUMP_HONOUR.values(),
            SIDE_MANILLA,
            SIDE_MANILLA_AS,
            RUFF_VOID,
            RUFF_SINGLETON,
            STOPPER_MANILLA,
            GUARDED_AS,
            -HOLE_PENALTY,
            STOPPER_REY,
            0.0,
            1.0,
        }
        self._weights = {w: floats(np.float64(w)) for w in weights}

    def f64(self, value: float) -> Tensor:
        """``value`` as a 0-dim ``float64`` tensor on the device: ``torch.where`` of two Python
        floats would round both to ``float32``."""
        return self._weights[value]


_TABLES: dict[torch.device, _Tables] = {}


def _tables(device: torch.device) -> _Tables:
    if device not in _TABLES:
        _TABLES[device] = _Tables(device)
    return _TABLES[device]


# ---------------------------------------------------------------- bit helpers
_M1 = 0x5555555555555555
_M2 = 0x3333333333333333
_M4 = 0x0F0F0F0F0F0F0F0F


def _popcount(x: Tensor) -> Tensor:
    """Set bits of non-negative ``int64`` masks (shift-and-add, no multiply to overflow)."""
    x = x - ((x >> 1) & _M1)
    x = (x & _M2) + ((x >> 2) & _M2)
    x = (x + (x >> 4)) & _M4
    x = x + (x >> 8)
    x = x + (x >> 16)
    x = x + (x >> 32)
    return x & 0x7F


def _last_set(t: _Tables, block: Tensor) -> Tensor:
    """Index of the last set entry of a bool block along its last axis (-1 when none):
    ``rule_batch``'s ``_highest_set`` and ``_high_bit`` (the highest card of a block)."""
    return torch.where(block, t.ramp[: block.shape[-1]], 0).amax(dim=-1) - 1


def _mask(t: _Tables, bits: Tensor) -> Tensor:
    """bool ``(..., 48)`` -> ``int64`` ``(...)``: bit ``c`` = entry ``c``."""
    return torch.where(bits, t.bit, 0).sum(dim=-1)


def _bits48(t: _Tables, mask: Tensor) -> Tensor:
    """``int64`` ``(n,)`` -> bool ``(n, 48)``: which cards are in each mask."""
    return ((mask[:, None] >> t.cards) & 1) != 0


def _patterns(t: _Tables, mask: Tensor) -> Tensor:
    """``(n, 4)`` the 12-bit pattern of each suit in ``mask``."""
    return (mask[:, None] >> t.suit_first) & ((1 << CARDS_PER_SUIT) - 1)


def _tops_and_bottoms(t: _Tables, mask: Tensor) -> tuple[Tensor, Tensor]:
    """``(n, 4)`` strongest and weakest card of each suit in ``mask`` (-1: none)."""
    p = _patterns(t, mask)
    top, bottom = t.strongest[p], t.weakest[p]
    return (
        torch.where(top >= 0, t.suit_first + top, -1),
        torch.where(bottom >= 0, t.suit_first + bottom, -1),
    )


def _at(table: Tensor, index: Tensor) -> Tensor:
    """``table[row, index[row]]`` for an ``(n, k)`` table and ``(n,)`` indices."""
    return table.gather(1, index[:, None])[:, 0]


def _arg_best(key: Tensor, valid: Tensor, lowest: bool) -> Tensor:
    """The card (column) with the lowest / highest ``key`` among the ``valid`` columns of
    ``(n, 48)`` keys, the first on ties (ascending cards, as ``rule_batch._arg_best``); -1:
    none (the keys are small, so the best column is a valid one whenever there is one)."""
    if lowest:
        best = torch.where(valid, key, _INT_MAX).argmin(dim=1)
    else:
        best = torch.where(valid, key, _INT_MIN).argmax(dim=1)
    return torch.where(_at(valid, best), best, -1)


# ---------------------------------------------------------------- the batch view
class _Rows:
    """``rule_batch._Rows`` for every row (relative seats: 0 me, 1 next, 2 partner,
    3 previous)."""

    def __init__(self, t: _Tables, obs: Tensor) -> None:
        n = obs.shape[0]

        def block(name: str) -> Tensor:
            return obs[:, field_slice(name)] != 0

        self.t = t
        self.n = n
        self.hand = _mask(t, block("hand"))
        played = _mask(t, block("played").reshape(n, N_SEATS, N_CARDS))
        trick = block("trick").reshape(n, N_SEATS, N_CARDS)
        self.trick = _last_set(t, trick)
        """(n, 4) the card of each seat on the table, -1: none."""
        self.n_trick = (self.trick >= 0).sum(dim=1)
        self.leader = _last_set(t, block("trick_leader"))
        self.void = block("voids").reshape(n, N_SEATS, N_SUITS)
        """(n, seat, suit): the seat has shown a void in the suit."""
        trump = _last_set(t, block("trump"))
        self.trump = torch.where(trump < 0, TRUMP_UNSET, trump)
        self.chooser = _last_set(t, block("chooser"))
        self.level = _last_set(t, block("doubling_level")).clamp(min=0)
        self.phase = _last_set(t, block("phase"))
        seen = self.hand | played[:, 0] | played[:, 1] | played[:, 2] | played[:, 3]
        self.unseen = ALL_CARDS & ~seen
        self.sizes = N_TRICKS - _popcount(played)
        """(n, 4) cards left in each seat's hand."""


class _Counting:
    """``rule_batch._Counting``: the card-counting probabilities, for every row."""

    def __init__(self, r: _Rows) -> None:
        t = r.t
        self.r, self.t = r, t
        self.unseen_in = _popcount(r.unseen[:, None] & t.suit_mask)
        """(n, suit) unseen cards of each suit."""
        unseen_total = _popcount(r.unseen).clamp(max=MAX_UNSEEN)
        sizes = r.sizes.clamp(min=0)
        holders = (sizes[:, 1:, None] * ~r.void[:, 1:, :]).sum(dim=1)
        self.hold_base: dict[int, Tensor] = {}
        """Per opponent, (n, suit): where its row of the flat hold table starts."""
        self.void_p: dict[int, Tensor] = {}
        """Per opponent, (n, suit): void_probability."""
        for seat in (1, 3):
            void = r.void[:, seat, :]
            total = torch.where(void, 0, holders)
            self.hold_base[seat] = (sizes[:, seat, None] * _HOLD_TOTALS + total) * _HOLD_KS
            at = (sizes[:, seat, None] * _VOID_TOTALS + unseen_total[:, None]) * _VOID_US
            self.void_p[seat] = torch.where(void, 1.0, t.void_p[at + self.unseen_in])
        self.trump = r.trump.clamp(max=N_SUITS - 1)  # a valid index; read where trump < 4
        self.trump_game = r.trump < NO_TRUMP
        self.may_hold_trumps = {
            seat: self.trump_game
            & ~_at(r.void[:, seat, :], self.trump)
            & (_at(self.unseen_in, self.trump) > 0)
            for seat in (1, 2, 3)
        }
        """:func:`~agents.rule_based.may_hold_trumps` per row."""
        self.all = _Cards(t, r.unseen, t.cards[None, :])
        """The 48 cards, the columns of every card choice."""
        self.all_low_cost = self.low_cost(self.all)

    def per_suit(self, table: Tensor, suit: Tensor) -> Tensor:
        """``table[row, suit[row, j]]`` for an ``(n, 4)`` table and ``(n or 1, K)`` suits."""
        return table.gather(1, suit.expand(self.r.n, -1))

    def win_probability(self, cards: _Cards, led: Tensor) -> Tensor:
        """:func:`~agents.rule_based.win_probability` of ``cards`` ``(n, K)``, each winning a
        trick led in ``led`` (``(n or 1, K or 1)``), against the opponents still to play."""
        r, t, tr = self.r, self.t, self.trump
        suit, higher = cards.suit, cards.higher
        same = suit == led
        p = torch.ones(higher.shape, dtype=_F64, device=higher.device)
        for seat in (1, 3):  # opponents_after, in the scalar order
            after = r.n_trick == 0 if seat == 3 else r.n_trick <= 2
            base = self.hold_base[seat]
            hold_higher = t.hold[self.per_suit(base, suit) + higher]
            hold_trumps = t.hold[_at(base, tr) + _at(self.unseen_in, tr)]
            void_led = self.per_suit(self.void_p[seat], led)
            ruff = (self.trump_game & ~_at(r.void[:, seat, :], tr))[:, None] & (led != tr[:, None])
            beat_same = torch.where(
                ruff, hold_higher + void_led * hold_trumps[:, None], hold_higher
            )
            beat_same = beat_same.clamp(max=1.0)
            beat_other = torch.where(higher > 0, void_led * hold_higher, 0.0)
            beat = torch.where(same, beat_same, beat_other)
            p = torch.where(after[:, None], p * (1.0 - beat), p)
        return p

    def low_cost(self, cards: _Cards) -> Tensor:
        """:func:`~agents.rule_based.low_cost` of ``cards`` ``(n, K)``."""
        cost = cards.points * COST_PER_POINT + cards.strength
        cost = cost + COST_TRUMP * (cards.suit == self.r.trump[:, None])
        return cost + COST_MASTER * cards.master


class _Cards:
    """What the heuristics read of each card of an ``(n, K)`` selection, or of the 48 cards
    as ``(1, 48)`` columns that broadcast over the rows."""

    def __init__(self, t: _Tables, unseen: Tensor, ids: Tensor) -> None:
        self.id = ids
        self.suit = t.suit[ids]
        self.number = t.number[ids]
        self.points = t.points[ids]
        self.strength = t.strength[ids]
        out = unseen[:, None] & t.beats[ids]  # the unseen cards that beat it in its suit
        self.higher = _popcount(out)
        self.master = out == 0
        """:func:`~agents.rule_based.is_master`."""


def _manilla_lead_ok(t: _Tables, hand: Tensor, suit: Tensor | int, unseen: Tensor) -> Tensor:
    """:func:`~agents.rule_based.manilla_lead_ok` per element (broadcasting); ``suit`` a
    tensor of suits or one Python int (a tensor index would be read on the host)."""
    as_or_rey = t.as_or_rey[suit]
    return ((hand & as_or_rey) != 0) | ((unseen & as_or_rey) == 0)


# ---------------------------------------------------------------- card play
def _lowest_card(c: _Counting, valid: Tensor) -> Tensor:
    """:func:`~agents.rule_based.lowest_card` among the ``valid`` cards ``(n, 48)``."""
    return _arg_best(c.all_low_cost * 64 + c.all.id, valid, lowest=True)


def _choose_load(c: _Counting, valid: Tensor) -> Tensor:
    """:func:`~agents.rule_based.choose_load`: key (not kept, points, -strength), maximal."""
    a = c.all
    small_trump = (a.suit == c.r.trump[:, None]) & (a.points < KEEP_TRUMP_BELOW_POINTS)
    keep = a.master | small_trump
    key = (~keep) * 256 + a.points * 16 + (11 - a.strength)
    return _arg_best(key, valid, lowest=False)


def _choose_lead(c: _Counting, legal: Tensor) -> Tensor:
    """:func:`~agents.rule_based.choose_lead` (meaningful for rows with an empty table)."""
    r, t = c.r, c.t
    hand = r.hand & _mask(t, legal)
    unseen, tr, trump_game = r.unseen, c.trump, c.trump_game
    tops, bottoms = _tops_and_bottoms(t, hand)
    out = torch.full((r.n,), -1, dtype=_I64, device=hand.device)
    may = c.may_hold_trumps

    # 1. Draw the opponents' trumps with the master trump.
    top_trump = _at(tops, tr)
    safe = top_trump.clamp(min=0)
    mine = _popcount(hand & t.suit_mask[tr])
    draw = (
        trump_game
        & (mine > 0)
        & (may[1] | may[3])
        & ((r.chooser == 0) | (r.chooser == 2) | (mine >= DRAW_TRUMPS_WITH))
        & ((unseen & t.beats[safe]) == 0)
        & ((t.number[safe] != 9) | _manilla_lead_ok(t, hand, tr, unseen))
    )
    out = torch.where(draw, top_trump, out)

    # 2. Cash a sure winner, preferring the suit with most points still out.
    safe_tops = tops.clamp(min=0)
    win_p = c.win_probability(_Cards(t, unseen, safe_tops), t.suits[None, :])
    best = torch.full_like(out, -1)
    best_key = torch.full_like(out, -1)
    points_out = t.pattern_points[_patterns(t, unseen)]
    for s in range(N_SUITS):
        card, safe = tops[:, s], safe_tops[:, s]
        ok = (r.trump != s) & (card >= 0) & (win_p[:, s] >= CASH_MIN_P)
        ok = ok & ((t.number[safe] != 9) | _manilla_lead_ok(t, hand, s, unseen))
        key = points_out[:, s] * 16 + (11 - t.strength[safe])  # (points, -strength)
        better = ok & (key > best_key)
        best = torch.where(better, card, best)
        best_key = torch.where(better, key, best_key)
    out = torch.where((out < 0) & (best >= 0), best, out)

    # 3. Lead into the partner's void so the partner ruffs.
    feed = (out < 0) & trump_game & may[2]
    for s in range(N_SUITS):
        low = bottoms[:, s]
        ok = feed & (r.trump != s) & (low >= 0) & r.void[:, 2, s]
        ok = ok & ~(r.void[:, 3, s] & may[3])
        ok = ok & (t.points[low.clamp(min=0)] == 0)
        out = torch.where(ok, low, out)
        feed = feed & ~ok

    # 4. Lead low from the suit that gives least away (lead_cost, on the whole hand).
    a = c.all
    cost = c.all_low_cost
    lowest = c.per_suit(_tops_and_bottoms(t, r.hand)[1], a.suit)
    cost = cost + LEAD_NOT_LOWEST * (lowest != a.id)
    cost = cost + LEAD_CABALLO * ((a.number == 11) & ~a.master)
    manilla_ok = _manilla_lead_ok(t, r.hand[:, None], a.suit, unseen[:, None])
    cost = cost + LEAD_MANILLA * ((a.number == 9) & ~manilla_ok)
    side = trump_game[:, None] & (a.suit != r.trump[:, None])
    for seat in (1, 3):
        ruffs = c.per_suit(r.void[:, seat, :], a.suit) & may[seat][:, None]
        cost = cost + LEAD_INTO_RUFF * (side & ruffs)
    low = _arg_best(cost * 64 + a.id, _bits48(t, hand), lowest=True)
    return torch.where(out < 0, low, out)


def _winning_card(r: _Rows) -> tuple[Tensor, Tensor]:
    """(card, relative seat) winning the trick on the table: ``rules.add_to_trick`` folded
    over the cards in playing order (meaningful for rows with a card on the table)."""
    t = r.t
    seat = r.leader & 3
    win = _at(r.trick, seat)
    win_seat = seat
    for k in range(1, N_SEATS):
        seat = (r.leader + k) & 3
        card = _at(r.trick, seat)
        safe = card.clamp(min=0)
        takes = (t.winners[r.trump * N_CARDS + win.clamp(min=0)] >> safe) & 1
        takes = (k < r.n_trick) & (card >= 0) & (takes != 0)
        win = torch.where(takes, card, win)
        win_seat = torch.where(takes, seat, win_seat)
    return win, win_seat


def _choose_follow(c: _Counting, legal: Tensor) -> Tensor:
    """:func:`~agents.rule_based.choose_follow` (meaningful for rows with cards on the
    table); ``legal`` bool ``(n, 48)``."""
    r, t, a = c.r, c.t, c.all
    led = t.suit[_at(r.trick, r.leader & 3).clamp(min=0)][:, None]
    win, win_seat = _winning_card(r)
    safe_win = win.clamp(min=0)
    partner_winning = (win_seat >= 0) & ((win_seat & 1) == 0)
    # numpy's one call on (the card winning now, the cards) made as two: the same elements
    win_p = c.win_probability(_Cards(t, r.unseen, safe_win[:, None]), led)[:, 0]
    load = partner_winning & (win_p >= LOAD_MIN_P)
    takes = (t.winners[r.trump * N_CARDS + safe_win][:, None] >> a.id) & 1
    likely = legal & (takes != 0) & (c.win_probability(a, led) >= TAKE_MIN_P)
    on_table = torch.where(r.trick >= 0, t.points[r.trick.clamp(min=0)], 0).sum(dim=1)
    best_points = torch.where(likely, a.points, 0).amax(dim=1)
    cheap = partner_winning & (on_table + best_points < OVERTAKE_POINTS)
    # cheapest_winner: key (is a trump, strength, card), minimal; -1 when nothing is likely
    key = (a.suit == r.trump[:, None]) * 4096 + a.strength * 64 + a.id
    winner = _arg_best(key, likely, lowest=True)
    go_low = ~load & ((winner < 0) | cheap)
    out = torch.where(load, _choose_load(c, legal), winner)
    return torch.where(go_low, _lowest_card(c, legal), out)


# ---------------------------------------------------------------- bidding
def _hand_values(t: _Tables, hand: Tensor) -> tuple[Tensor, Tensor]:
    """``rule_batch._hand_values``: every suit's trump value ``(n, 4)`` and the butifarra
    value ``(n,)``, the same terms added in the same order."""
    zero = t.f64(0.0)
    pats = _patterns(t, hand)
    k = _popcount(pats)
    has = {number: ((pats >> (number - 1)) & 1) != 0 for number in (1, 9, 11, 12)}

    values = k.to(_F64)  # column: the suit as trump
    for number in sorted(TRUMP_HONOUR):  # cards_of order: ascending ids
        values = values + torch.where(has[number], t.f64(TRUMP_HONOUR[number]), zero)
    ruffs = k >= RUFF_FROM_TRUMPS
    for s in range(N_SUITS):  # s as a side suit of every other trump suit
        side = t.suits != s
        manilla = has[9][:, s, None] & side
        values = values + torch.where(manilla, t.f64(SIDE_MANILLA), zero)
        values = values + torch.where(manilla & has[1][:, s, None], t.f64(SIDE_MANILLA_AS), zero)
        short = torch.where(
            k[:, s] == 0,
            t.f64(RUFF_VOID),
            torch.where(k[:, s] == 1, t.f64(RUFF_SINGLETON), zero),
        )
        values = values + torch.where(ruffs & side, short[:, None], zero)

    stopped = has[9] & has[1]
    first = torch.where(
        has[9],
        t.f64(STOPPER_MANILLA),
        torch.where(has[1] & (k >= GUARDED_AS_LENGTH), t.f64(GUARDED_AS), t.f64(-HOLE_PENALTY)),
    )
    runs = (k - STOPPER_RUN_FROM).clamp(min=0).to(_F64) * STOPPER_RUN + STOPPER_AS
    run = torch.where(stopped, runs, zero)
    rey = torch.where(stopped & has[12], t.f64(STOPPER_REY), zero)
    no_trump = torch.zeros(hand.shape, dtype=_F64, device=hand.device)
    for s in range(N_SUITS):
        no_trump = no_trump + first[:, s]
        no_trump = no_trump + run[:, s]
        no_trump = no_trump + rey[:, s]
    return values, no_trump


def _bid(r: _Rows, legal: Tensor) -> Tensor:
    """``rule_batch._bid``: the trump choice and the doubling answer, by each row's phase."""
    t, phase = r.t, r.phase
    values, no_trump_value = _hand_values(t, r.hand)
    best = values.argmax(dim=1)  # the first (lowest) suit on ties
    can_delegate = (phase == PHASE_CHOOSE_TRUMP) & legal[:, DELEGATE]
    delegate = can_delegate & (_at(values, best) < DELEGATE_BELOW)
    choice = torch.where(delegate, DELEGATE, TRUMP_BASE + best)
    choice = torch.where(no_trump_value >= BUTIFARRA_MIN, BUTIFARRA, choice)

    no_trump = r.trump == NO_TRUMP
    strength = torch.where(no_trump, no_trump_value, _at(values, r.trump.clamp(max=3)))
    role = torch.where(r.chooser == 0, 1, torch.where(r.chooser == 2, 2, 0))
    threshold = t.role_thresholds[role * 2 + no_trump]
    double = strength >= threshold + (r.level // 2).to(_F64) * DOUBLE_STEP
    return torch.where(phase == PHASE_DOUBLING, torch.where(double, DOUBLE, PASS), choice)


# ---------------------------------------------------------------- the batch
def _check_args(obs: Tensor, masks: Tensor) -> None:
    """Shapes, dtypes and devices: metadata only, so always checked (no host sync)."""
    if not isinstance(obs, torch.Tensor) or not isinstance(masks, torch.Tensor):
        raise TypeError(
            f"observations and masks must be torch tensors, got {type(obs).__name__} and "
            f"{type(masks).__name__} (numpy arrays: agents.rule_batch.decide_batch)"
        )
    if obs.ndim != 2 or obs.shape[1] != OBS_SIZE or tuple(masks.shape) != (obs.shape[0], N_ACTIONS):
        raise ValueError(
            f"expected observations (N, {OBS_SIZE}) and masks (N, {N_ACTIONS}), got "
            f"{tuple(obs.shape)} and {tuple(masks.shape)}"
        )
    if obs.dtype not in _OBS_DTYPES:
        raise ValueError(
            f"observations must be uint8 or float32 (obs_format='float32'), got {obs.dtype}"
        )
    if masks.dtype.is_complex:
        raise ValueError(f"masks must be 0/1 of a real dtype or bool, got {masks.dtype}")
    if obs.device != masks.device:
        raise ValueError(
            f"observations and masks must be on one device, got {obs.device} and {masks.device}"
        )


def _validate(masks: Tensor) -> None:
    """The checks that read values, so wait for the device: ``check=True`` only."""
    if not ((masks == 0) | (masks == 1)).all().item():
        raise ValueError("action masks must hold 0 and 1 only (1 = legal)")
    empty = torch.nonzero(~(masks != 0).any(dim=1))
    if len(empty):
        raise ValueError(f"row {int(empty[0, 0])} of the action mask has no legal action")


def decide_batch_torch(obs: Tensor, masks: Tensor, *, check: bool = False) -> Tensor:
    """:func:`agents.rule_batch.decide_batch` for every row, on the rows' device: ``int64``
    ``(N,)`` action ids.

    ``obs`` are ``(N, 491)`` ``uint8`` or ``float32`` (``uint8 * scale_vector()``) in the layout
    of :mod:`butifarra_env.core.observation`; only its 0/1 fields are read (nonzero = set).
    ``masks`` are 0/1 ``(N, 56)`` (any real dtype or bool) on the same device. Shapes, dtypes
    and devices are always checked (ValueError). With ``check=False`` (the default, the hot
    path) nothing waits for the device, and a row without a legal action gets action 0 rather
    than an error; ``check=True`` first verifies the masks (0/1, a legal action in every row,
    the ValueError of ``decide_batch``), which reads them on the host. As in ``decide_batch``,
    a heuristic choice outside the mask falls back to the first legal id.
    """
    _check_args(obs, masks)
    if check:
        _validate(masks)
    t = _tables(obs.device)
    legal = masks != 0
    r = _Rows(t, obs)
    c = _Counting(r)
    cards = legal[:, :N_CARDS]
    card = torch.where(r.n_trick == 0, _choose_lead(c, cards), _choose_follow(c, cards))
    bidding = (
        (r.phase == PHASE_CHOOSE_TRUMP)
        | (r.phase == PHASE_CHOOSE_TRUMP_DELEGATED)
        | (r.phase == PHASE_DOUBLING)
    )
    out = torch.where(r.phase == PHASE_PLAY, card, torch.where(bidding, _bid(r, legal), -1))
    ok = (out >= 0) & _at(legal, out.clamp(min=0))
    return torch.where(ok, out, legal.to(torch.uint8).argmax(dim=1))


class TorchRuleAgent(Agent):
    """The rule-based player through :func:`decide_batch_torch` on ``device``, for numpy
    callers (the arena, tests): the same decisions as :class:`agents.rule_based.RuleBasedAgent`.
    On-device training calls :func:`decide_batch_torch` on its tensors directly."""

    name = "rule_torch"

    def __init__(self, device: str | torch.device = "cpu") -> None:
        self.device = torch.device(device)

    def act(self, observation: np.ndarray, action_mask: np.ndarray) -> int:
        obs, mask = np.asarray(observation), np.asarray(action_mask)
        return int(self.act_batch(obs[None], mask[None])[0])

    def act_batch(self, observations: np.ndarray, action_masks: np.ndarray) -> np.ndarray:
        """:func:`agents.base.check_batch`, then the device (``check=True``: a row without a
        legal action is refused as ``decide_batch`` refuses it)."""
        obs, masks = check_batch(observations, action_masks)
        o = torch.from_numpy(np.ascontiguousarray(obs)).to(self.device)
        m = torch.from_numpy(np.ascontiguousarray(masks)).to(self.device)
        return decide_batch_torch(o, m, check=True).cpu().numpy()
