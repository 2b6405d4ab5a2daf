"""Exact play of the remaining tricks with all hands known: a double-dummy solver.

Given the four hands still held, trump and the trick in progress, :func:`solve` returns the
points (card points plus one per trick, RULES.md) team A (seats 0 and 2) takes from the
remaining play when both teams play perfectly: A maximises, B minimises (the total is fixed,
so that is zero-sum). The legal moves are :func:`butifarra_env.core.rules.legal_cards`, the trick
winner :func:`butifarra_env.core.rules.winners`: the real rules, not a simplification, with
obligada play when asked (``Solver(trump, obligada=True)``). The other variants do not
change card play: the score is ``(A's points - 36) x multiplier`` whatever the multiplier.

Search: alpha-beta over card plays; a transposition table keyed by the hands at the start of
each trick (with the bound kind: exact, lower or upper); equivalent cards merged (cards of
one hand and suit with no card still in play between them in strength and the same points
lead to the same result, so one of them is searched); moves ordered so that cheap winners
and high leads come first. Search agents call it on sampled deals (PIMC) for the endgame.
"""

from __future__ import annotations

from collections.abc import Sequence

from butifarra_env.core.cards import (
    BELOW,
    N_CARDS,
    POINTS,
    STRENGTH,
    STRENGTH_ORDER,
    SUIT,
    cards_of,
)
from butifarra_env.core.rules import (
    NO_SUIT,
    WINNERS,
    legal_cards,
    partner_winning,
    trick_state,
)

EXACT, LOWER, UPPER = 0, 1, 2


class Solver:
    """Double-dummy search under one trump (the transposition table lives as long as the
    solver: reuse one solver for positions of the same hand), with obligada play when
    ``obligada`` (RULES.md, Variants)."""

    __slots__ = ("trump", "obligada", "tt", "nodes", "_winners")
    _winners: tuple[int, ...]

    def __init__(self, trump: int, obligada: bool = False) -> None:
        self.trump = trump
        self.obligada = bool(obligada)
        self.tt: dict[tuple[int, int, int, int, int], tuple[int, int, int]] = {}
        self.nodes = 0
        self._winners = WINNERS[trump]

    def solve(
        self,
        hands: Sequence[int],
        to_move: int,
        trick: Sequence[tuple[int, int]] = (),
    ) -> int:
        """Team A's points from the remaining play (the trick in progress included).

        ``hands``: the four hands as bitmasks (cards still held); ``trick``: the cards already
        on the table as ``(seat, card)`` in play order; ``to_move``: the next seat.
        """
        h = list(hands)
        led, win, win_seat = trick_state(trick, self.trump)
        pts = sum(POINTS[card] for _, card in trick)
        left = _points_left(h) + pts + _tricks_left(h, len(trick))
        if len(trick) == 4:  # a finished trick: book it, the winner leads on
            gain = pts + 1 if not win_seat & 1 else 0
            left -= pts + 1
            return gain + self._search(h, win_seat, 0, NO_SUIT, -1, -1, 0, left, 0, left + 1)
        return self._search(h, to_move, len(trick), led, win, win_seat, pts, left, 0, left + 1)

    def best_moves(
        self, hands: Sequence[int], to_move: int, trick: Sequence[tuple[int, int]] = ()
    ) -> dict[int, int]:
        """Team A's exact points after each legal card of ``to_move`` (every card of a merged
        group gets the group's value)."""
        out: dict[int, int] = {}
        legal = self._legal(list(hands), to_move, trick)
        for group in self._groups(list(hands), legal, trick):
            h = list(hands)
            h[to_move] ^= 1 << group[0]
            value = self.solve(h, (to_move + 1) & 3, [*trick, (to_move, group[0])])
            for c in group:
                out[c] = value
        return out

    # ------------------------------------------------------------------ search
    def _search(
        self,
        h: list[int],
        seat: int,
        n: int,
        led: int,
        win: int,
        win_seat: int,
        pts: int,
        left: int,
        alpha: int,
        beta: int,
    ) -> int:
        """Team A's points from here; ``left``: the points still to be won, this trick's
        included (so the value lies in [0, left])."""
        self.nodes += 1
        first = -1
        if n == 0:
            if not h[seat]:
                return 0
            if left <= alpha:  # even every point left cannot lift A above alpha
                return left
            if beta <= 0:
                return 0
            key = (h[0], h[1], h[2], h[3], seat)
            hit = self.tt.get(key)
            if hit is not None:
                value, kind, first = hit
                if kind == EXACT:
                    return value
                if kind == LOWER and value >= beta:
                    return value
                if kind == UPPER and value <= alpha:
                    return value
            a0, b0 = alpha, beta
        hand = h[seat]
        legal = legal_cards(
            hand, led, win, partner_winning(win_seat, seat), self.trump, self.obligada
        )
        maximise = not seat & 1
        best = -1 if maximise else 1 << 30
        best_card = -1
        moves = self._ordered(h, legal, n, win)
        if first >= 0 and first in moves and moves[0] != first:
            moves.remove(first)
            moves.insert(0, first)
        for card in moves:
            bit = 1 << card
            h[seat] = hand ^ bit
            # rules.add_to_trick, inlined: calling it costs the solver ~4-7%
            # (benchmarks/bench_trick.py); tests/test_rules_trick.py holds this copy to it.
            if n == 0:
                nl, nw, nws = SUIT[card], card, seat
            elif (self._winners[win] >> card) & 1:
                nl, nw, nws = led, card, seat
            else:
                nl, nw, nws = led, win, win_seat
            npts = pts + POINTS[card]
            if n == 3:
                gain = npts + 1 if not nws & 1 else 0
                nleft = left - npts - 1
                value = gain + self._search(
                    h, nws, 0, NO_SUIT, -1, -1, 0, nleft, alpha - gain, beta - gain
                )
            else:
                value = self._search(h, (seat + 1) & 3, n + 1, nl, nw, nws, npts, left, alpha, beta)
            h[seat] = hand
            if maximise:
                if value > best:
                    best, best_card = value, card
                    if best > alpha:
                        alpha = best
            elif value < best:
                best, best_card = value, card
                if best < beta:
                    beta = best
            if alpha >= beta:
                break
        if n == 0:
            kind = EXACT if a0 < best < b0 else (LOWER if best >= b0 else UPPER)
            self.tt[key] = (best, kind, best_card)
        return best

    def _ordered(self, h: list[int], legal: int, n: int, win: int) -> list[int]:
        """One card per group of equivalent cards, the likely best first."""
        if not legal & (legal - 1):
            return [legal.bit_length() - 1]
        in_play = h[0] | h[1] | h[2] | h[3]
        if win >= 0:
            in_play |= 1 << win  # the card to beat is still in play
        reps = []
        rest = legal
        while rest:
            card = (rest & -rest).bit_length() - 1
            rest &= rest - 1
            # Skip ``card`` when the next weaker card still in play is legal for this hand and
            # carries the same points: the two are interchangeable.
            base = _SUIT_BASE[card]
            below = ((BELOW[card] & in_play) >> base) & 0xFFF
            if below:
                nxt = base + _TOP[below]
                if (legal >> nxt) & 1 and POINTS[nxt] == POINTS[card]:
                    continue
            reps.append(card)
        if len(reps) > 1:
            if n == 0:  # leading: high, pointed cards first
                reps.sort(key=_LEAD_ORDER.__getitem__)
            else:  # following: cards that beat the table first, then cheap ones
                beats_now = self._winners[win]
                reps.sort(key=lambda c: _FOLLOW_ORDER[c] - ((beats_now >> c) & 1) * 1000)
        return reps

    def _legal(self, h: list[int], seat: int, trick: Sequence[tuple[int, int]]) -> int:
        led, win, win_seat = trick_state(trick, self.trump)
        return legal_cards(
            h[seat], led, win, partner_winning(win_seat, seat), self.trump, self.obligada
        )

    def _groups(
        self, h: list[int], legal: int, trick: Sequence[tuple[int, int]]
    ) -> list[list[int]]:
        """Legal cards in groups of equivalent ones (see :meth:`_ordered`)."""
        on_table = 0
        for _, card in trick:
            on_table |= 1 << card
        held = h[0] | h[1] | h[2] | h[3] | on_table
        groups: list[list[int]] = []
        for card in sorted(cards_of(legal), key=lambda c: (SUIT[c], STRENGTH[c])):
            if groups:
                prev = groups[-1][-1]
                if (
                    SUIT[prev] == SUIT[card]
                    and POINTS[prev] == POINTS[card]
                    and not _between(prev, card) & held
                ):
                    groups[-1].append(card)
                    continue
            groups.append([card])
        return groups


def solve(
    hands: Sequence[int],
    trump: int,
    to_move: int,
    trick: Sequence[tuple[int, int]] = (),
    obligada: bool = False,
) -> int:
    """Team A's points from the remaining play under perfect play by both teams."""
    return Solver(trump, obligada).solve(hands, to_move, trick)


# ---------------------------------------------------------------------- card helpers
def _top_table() -> tuple[int, ...]:
    """``_TOP[p]``: the offset (number - 1) of the strongest card in a 12-bit suit pattern."""
    order = [n - 1 for n in STRENGTH_ORDER]
    top = [-1] * 4096
    for p in range(1, 4096):
        top[p] = next(o for o in order if (p >> o) & 1)
    return tuple(top)


_TOP = _top_table()
_SUIT_BASE = tuple(12 * SUIT[c] for c in range(N_CARDS))
_LEAD_ORDER = tuple(-(POINTS[c] * 16 + STRENGTH[c]) for c in range(N_CARDS))
_FOLLOW_ORDER = tuple(POINTS[c] * 16 + STRENGTH[c] for c in range(N_CARDS))


def _between(a: int, b: int) -> int:
    """Cards of the suit strictly between ``a`` and ``b`` in strength."""
    lo, hi = (a, b) if STRENGTH[a] < STRENGTH[b] else (b, a)
    return BELOW[hi] & ~BELOW[lo] & ~(1 << lo)


def _points_left(h: Sequence[int]) -> int:
    return sum(POINTS[c] for c in cards_of(h[0] | h[1] | h[2] | h[3]))


def _tricks_left(h: Sequence[int], on_table: int) -> int:
    return ((h[0] | h[1] | h[2] | h[3]).bit_count() + on_table) // 4
