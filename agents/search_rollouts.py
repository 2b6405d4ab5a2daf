"""The search agent's rollouts, many at once: the same values, a numpy step per card.

:func:`agents.search_agent._rollout_value` plays one sampled deal on after one candidate
card with a greedy full-information heuristic, then solves the last tricks exactly. It is
Python per card, and a search decision needs one rollout per sampled deal and candidate
(the panel's search member makes about 500 per batch of decisions in the arena). Rollouts
do not touch the agent's random numbers, so :meth:`SearchAgent.act_batch` draws every
row's deals first, in the order one call per row would, and scores all their rollouts
here together (when there are enough: ``search_agent.BATCH_ROLLOUTS_MIN``).
:func:`rollout_values` returns exactly what ``_rollout_value`` returns for each rollout
(``tests/test_search_rollouts.py`` holds the two equal, obligada included), so the agent's
decisions do not change.

The heuristic's per-card questions ("can an opponent still to play take this card?") are
answered for all cards at once with per-suit tables, and each pick ("the cheapest legal
card") is the card of least rank in the pick's order among the hand's unpacked bits. The
endgame (two tricks or fewer, what the panel's ``endgame=2`` asks) is solved by
enumerating the first trick's 16 lines and taking the minimax over them; a longer endgame is
left to the double-dummy solver, rollout by rollout.
"""

from __future__ import annotations

import numpy as np

from agents.double_dummy import Solver
from butifarra_env.core.cards import CARDS_PER_SUIT, N_CARDS, POINTS, STRENGTH, SUIT
from butifarra_env.core.cards import SUIT_MASK as _SUIT_MASK
from butifarra_env.core.rules import (
    FOLLOW,
    NO_SUIT,
    TRUMP_UNSET,
    WINNERS_FLAT,
    WINNERS_STRIDE,
    add_to_trick_array,
    card_bits_array,
    legal_cards_array,
)

ROLLOUT_CHUNK = 16384
"""The most rollouts :func:`rollout_values` plays at once (more are played chunk by chunk):
with the endgame's 16 lines each, about 50 MB of arrays at most."""

_U = np.uint64
_ONE = _U(1)
_FULL_SUIT = _U((1 << CARDS_PER_SUIT) - 1)
_NO_CARD = N_CARDS  # the column of the tables that stands for "no winning card yet"

CHEAP = tuple(POINTS[c] * 16 + STRENGTH[c] for c in range(N_CARDS))
"""Give away least: fewest points, then weakest."""
LOAD = tuple(-(POINTS[c] * 16) + STRENGTH[c] for c in range(N_CARDS))
"""Load a partner's trick: most points, then weakest."""
RICH = tuple(-(POINTS[c] * 16 + STRENGTH[c]) for c in range(N_CARDS))
"""A sure winner to lead: most points, then strongest."""
CHEAP_WINNER = tuple(
    tuple((SUIT[c] == t) * 64 + STRENGTH[c] for c in range(N_CARDS)) for t in range(TRUMP_UNSET + 1)
)
"""Win cheaply: a non-trump first, then the weakest card that does it."""

_WIN = WINNERS_FLAT.reshape(TRUMP_UNSET + 1, WINNERS_STRIDE)
"""``_WIN[trump, win]``: the cards that beat ``win`` (``rules.WINNERS``); column 48: every card."""
_LED = FOLLOW
"""The cards that follow the led suit; :data:`NO_SUIT` (an empty trick): every card."""
_TRUMPS = np.array([*_SUIT_MASK, 0, 0], dtype=_U)
"""The trump cards under each trump value (none under butifarra)."""
_POINTS = np.array(POINTS, dtype=np.int64)


def _above_table() -> np.ndarray:
    """``[p]``: the cards of suit 0 stronger than every card of the 12-bit pattern ``p``."""
    out = np.zeros(1 << CARDS_PER_SUIT, dtype=_U)
    for p in range(1 << CARDS_PER_SUIT):
        top = max((STRENGTH[c] for c in range(CARDS_PER_SUIT) if (p >> c) & 1), default=-1)
        out[p] = sum(1 << c for c in range(CARDS_PER_SUIT) if STRENGTH[c] > top)
    return out


_ABOVE = _above_table()


def _ranks() -> np.ndarray:
    """Each pick order as ranks: ``rank[o, c]`` is card ``c``'s place in order ``o`` (ties
    by card id, as the Python picks break them). Orders: 0 cheap, 1 load, 2 rich, 3 + trump
    cheap winner."""
    keys = [CHEAP, LOAD, RICH, *CHEAP_WINNER]
    rank = np.zeros((len(keys), N_CARDS), dtype=np.int64)
    for o, key in enumerate(keys):
        order = sorted(range(N_CARDS), key=lambda c: (key[c], c))  # noqa: B023
        rank[o, order] = np.arange(N_CARDS)
    return rank


_RANK = _ranks()
_SHIFTS = np.arange(4, dtype=_U) * _U(CARDS_PER_SUIT)
_SUITS4 = _LED[:4]
_SUIT_IDS = np.arange(4)
_SUIT_BITS = np.array([1, 2, 4, 8])
_SUIT_SETS = np.array(
    [sum(_SUIT_MASK[s] for s in range(4) if (b >> s) & 1) for b in range(16)], dtype=_U
)
"""``[b]``: the cards of the suits in the 4-bit set ``b``."""
_O_CHEAP, _O_LOAD, _O_RICH, _O_WINNER = 0, 1, 2, 3


def _lowest_bit(x: np.ndarray) -> np.ndarray:
    """The index of the lowest set bit of each (non-zero) entry: exact through float64,
    which holds every power of two up to 2**63."""
    low = x & (~x + _ONE)
    return np.frexp(low.astype(np.float64))[1].astype(np.int64) - 1


def _pick(cards: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The first of ``cards`` (non-zero masks) in ``order`` (an order index per row)."""
    return np.where(card_bits_array(cards), _RANK[order], N_CARDS).argmin(axis=1)


def _above(cards: np.ndarray) -> np.ndarray:
    """Per suit, the cards stronger than every card of ``cards`` in that suit (all of the
    suit where it has none)."""
    patterns = ((cards[:, None] >> _SHIFTS) & _FULL_SUIT).astype(np.intp)
    return np.bitwise_or.reduce(_ABOVE[patterns] << _SHIFTS, axis=1)


def _greedy(
    h: np.ndarray,
    seat: np.ndarray,
    n: np.ndarray,
    led: np.ndarray,
    win: np.ndarray,
    win_seat: np.ndarray,
    trump: np.ndarray,
    obligada: bool,
) -> np.ndarray:
    """:func:`agents.search_agent._greedy_play` over arrays: one card per row."""
    rows = np.arange(len(seat))
    hand = h[rows, seat]
    partner = (win_seat >= 0) & (((win_seat ^ seat) & 1) == 0)
    legal = legal_cards_array(hand, led, win, ~partner, trump, obligada)
    # The opponents still to play this trick (an absent one holds nothing).
    opp1 = np.where(n <= 2, h[rows, (seat + 1) & 3], _U(0))
    opp3 = np.where(n == 0, h[rows, (seat + 3) & 3], _U(0))
    trumps = _TRUMPS[trump]
    # Following (win < 48): what each opponent may answer with, the led suit if it has it.
    follow1, follow3 = opp1 & _LED[led], opp3 & _LED[led]
    answers = np.where(follow1 != 0, follow1, opp1) | np.where(follow3 != 0, follow3, opp3)
    # The cards that no answer beats: above the answers' best in their own suit, and, unless
    # they are trumps, only when no answer is a trump.
    safe = _above(answers)
    safe = np.where((answers & trumps) != 0, safe & trumps, safe)
    partner_holds = partner & ((answers & _WIN[trump, win]) == 0)
    holding = legal & _WIN[trump, win] & safe
    # Leading (win == 48): a card of suit s holds when no opponent has a stronger one of s,
    # and, if s is not trumps, no opponent void in s has a trump.
    ruffers = np.zeros((len(seat), 4), dtype=bool)
    for opp in (opp1, opp3):
        void = (opp[:, None] & _SUITS4) == 0
        ruffers |= void & ((opp & trumps) != 0)[:, None]
    ruffers &= trump[:, None] != _SUIT_IDS
    sure = _above(opp1 | opp3) & ~_SUIT_SETS[ruffers @ _SUIT_BITS] & legal
    leading = win == _NO_CARD
    chosen = np.where(
        partner_holds,
        legal,
        np.where(leading, np.where(sure != 0, sure, legal), np.where(holding != 0, holding, legal)),
    )
    order = np.where(
        partner_holds,
        _O_LOAD,
        np.where(
            leading,
            np.where(sure != 0, _O_RICH, _O_CHEAP),
            np.where(holding != 0, _O_WINNER + trump, _O_CHEAP),
        ),
    )
    return _pick(chosen, order)


def _last_trick(h: np.ndarray, leader: np.ndarray, trump: np.ndarray) -> np.ndarray:
    """Team A's points from a last trick (one card per hand, every card forced)."""
    rows = np.arange(len(leader))
    led = np.full(len(leader), NO_SUIT)
    win = np.full(len(leader), _NO_CARD)
    ws = np.full(len(leader), -1)
    pts = np.zeros(len(leader), dtype=np.int64)
    for k in range(4):
        s = (leader + k) & 3
        c = _lowest_bit(h[rows, s])
        led, win, ws = add_to_trick_array(led, win, ws, s, c, trump)
        pts += _POINTS[c]
    return np.where(ws & 1, 0, pts + 1)


def _solve_small(
    h: np.ndarray, leader: np.ndarray, tricks: int, trump: np.ndarray, obligada: bool
) -> np.ndarray:
    """Team A's exact points from the last ``tricks`` (0, 1 or 2) tricks, ``leader`` to lead:
    the double-dummy value (:class:`~agents.double_dummy.Solver`), by enumerating every line."""
    m = len(leader)
    if tricks == 0 or m == 0:
        return np.zeros(m, dtype=np.int64)
    rows = np.arange(m)
    if tricks == 1:
        return _last_trick(h, leader, trump)
    # Two tricks: each player chooses one of its two cards for the first (16 lines), the
    # second is forced. Line j: bit 3 - k is the k-th player's choice (1 = its higher id).
    lines = np.tile(np.arange(16), m)
    r2 = np.repeat(rows, 16)
    flat = np.arange(m * 16)
    lead = np.repeat(leader, 16)
    t2 = np.repeat(trump, 16)
    hands = h[r2]  # (m*16, 4)
    led = np.full(m * 16, NO_SUIT)
    win = np.full(m * 16, _NO_CARD)
    ws = np.full(m * 16, -1)
    pts = np.zeros(m * 16, dtype=np.int64)
    legal_at = []
    for k in range(4):
        s = (lead + k) & 3
        hand = hands[flat, s]
        low = hand & (~hand + _ONE)
        card_bit = np.where((lines >> (3 - k)) & 1 == 1, hand ^ low, low)
        opponent = (ws >= 0) & (((ws ^ s) & 1) == 1)
        legal_at.append((legal_cards_array(hand, led, win, opponent, t2, obligada) & card_bit) != 0)
        c = _lowest_bit(card_bit)
        led, win, ws = add_to_trick_array(led, win, ws, s, c, t2)
        pts += _POINTS[c]
        hands[flat, s] = hand ^ card_bit
    value = np.where(ws & 1, 0, pts + 1) + _last_trick(hands, ws, t2)  # its winner leads
    value = value.reshape(m, 2, 2, 2, 2)
    # Minimax, the last player of the first trick first: its choice is the last axis. A
    # player's legal flags do not depend on later players' choices (their axes dropped).
    big = 1 << 20
    for k in (3, 2, 1, 0):
        ok = legal_at[k].reshape(m, 2, 2, 2, 2)[(slice(None),) * (k + 2) + (0,) * (3 - k)]
        team_a = ((((leader + k) & 3) & 1) == 0).reshape((m,) + (1,) * k)
        value = np.where(
            team_a, np.where(ok, value, -big).max(axis=-1), np.where(ok, value, big).min(axis=-1)
        )
    return value


def rollout_values(
    hands: np.ndarray,
    led: np.ndarray,
    win: np.ndarray,
    win_seat: np.ndarray,
    n: np.ndarray,
    pts: np.ndarray,
    trump: np.ndarray,
    endgame: int,
    obligada: bool = False,
) -> np.ndarray:
    """My team's points from now for each rollout: ``_rollout_value`` over arrays.

    Each row is a position just after seat 0 (me) played its candidate card: ``hands``
    (rows, 4) the cards still held (uint64), ``led``/``win``/``win_seat`` the trick's state
    (``win`` -1 before its first card), ``n`` its number of cards (1 to 4), ``pts`` its card
    points, ``trump`` the trump. Seat 1 plays next. Greedy play until ``endgame`` tricks are
    left, then the exact value of the rest.
    """
    m = len(n)
    if m > ROLLOUT_CHUNK:  # bounded memory: the endgame enumeration holds 16 lines a rollout
        parts = []
        for i in range(0, m, ROLLOUT_CHUNK):
            cut = slice(i, i + ROLLOUT_CHUNK)
            parts.append(
                rollout_values(
                    np.asarray(hands)[cut],
                    np.asarray(led)[cut],
                    np.asarray(win)[cut],
                    np.asarray(win_seat)[cut],
                    np.asarray(n)[cut],
                    np.asarray(pts)[cut],
                    np.asarray(trump)[cut],
                    endgame,
                    obligada,
                )
            )
        return np.concatenate(parts)
    out = np.zeros(m, dtype=np.int64)
    h = np.array(hands, dtype=_U).reshape(m, 4).copy()
    led = np.asarray(led, dtype=np.int64).copy()
    win = np.where(np.asarray(win) < 0, _NO_CARD, win).astype(np.int64)
    ws = np.asarray(win_seat, dtype=np.int64).copy()
    n = np.asarray(n, dtype=np.int64).copy()
    pts = np.asarray(pts, dtype=np.int64).copy()
    trump = np.asarray(trump, dtype=np.int64)
    seat = np.ones(m, dtype=np.int64)
    gained = np.zeros(m, dtype=np.int64)
    # Cards still held by all four seats, after each trick closes (a multiple of 4 then).
    held = np.zeros(m, dtype=np.int64)
    for k in range(4):
        held += _popcount(h[:, k])
    idx = np.arange(m)  # the rows still rolling out
    finished: list[tuple[np.ndarray, ...]] = []
    while len(idx):
        closing = n == 4
        if closing.any():
            won = closing & ((ws & 1) == 0)
            gained = gained + np.where(won, pts + 1, 0)
            seat = np.where(closing, ws, seat)
            led = np.where(closing, NO_SUIT, led)
            win = np.where(closing, _NO_CARD, win)
            ws = np.where(closing, -1, ws)
            pts = np.where(closing, 0, pts)
            n = np.where(closing, 0, n)
            done = closing & (held <= 4 * endgame)
            if done.any():  # solved together once every rollout is there
                finished.append((idx[done], h[done], seat[done], held[done] // 4, trump[done]))
                out[idx[done]] = gained[done]
                keep = ~done
                idx, h, led, win, ws = idx[keep], h[keep], led[keep], win[keep], ws[keep]
                n, pts, trump, seat = n[keep], pts[keep], trump[keep], seat[keep]
                gained, held = gained[keep], held[keep]
                if not len(idx):
                    break
        c = _greedy(h, seat, n, led, win, ws, trump, obligada)
        rows = np.arange(len(idx))
        h[rows, seat] ^= _ONE << c.astype(_U)
        led, win, ws = add_to_trick_array(led, win, ws, seat, c, trump)
        pts = pts + _POINTS[c]
        n = n + 1
        held = held - 1
        seat = (seat + 1) & 3
    if finished:
        rows, at_end, leader, tricks, trumps = (
            np.concatenate(part) for part in zip(*finished, strict=True)
        )
        out[rows] += _endgame(at_end, leader, tricks, trumps, obligada)
    return out


def _endgame(
    h: np.ndarray, leader: np.ndarray, tricks: np.ndarray, trump: np.ndarray, obligada: bool
) -> np.ndarray:
    """The exact value of the last tricks: enumerated up to two, else the solver per row."""
    out = np.zeros(len(leader), dtype=np.int64)
    for t in np.unique(tricks).tolist():
        sel = tricks == t
        if t <= 2:
            out[sel] = _solve_small(h[sel], leader[sel], t, trump[sel], obligada)
            continue
        solvers: dict[int, Solver] = {}  # one per trump: positions recur across rollouts
        for i in np.flatnonzero(sel).tolist():
            t = int(trump[i])
            solver = solvers.get(t) or solvers.setdefault(t, Solver(t, obligada))
            out[i] = solver.solve(h[i].tolist(), int(leader[i]))
    return out


def _popcount(x: np.ndarray) -> np.ndarray:
    """Set bits per entry (numpy 1.24 has no bitwise_count)."""
    count = np.zeros(x.shape, dtype=np.int64)
    for k in range(6):
        count += _BYTE_COUNT[((x >> _U(8 * k)) & _U(255)).astype(np.int64)]
    return count


_BYTE_COUNT = np.array([bin(b).count("1") for b in range(256)], dtype=np.int64)
