"""Deal the cards a player cannot see, consistently with everything that player has seen.

What a seat knows about the hidden hands: which cards are still out (not in its hand, not
played), how many cards each other seat holds, and the suits each seat has shown it is void
in (it did not follow). :func:`sample_hidden_hands` deals the cards still out among the
other three seats uniformly at random among the deals that respect all of that. It is what
search agents (PIMC, information-set MCTS) and OpenSpiel's resampler need.

Exactly uniform: a uniform deal of the right sizes is drawn and kept only if it respects the
voids (rejection sampling keeps the distribution uniform over the consistent deals). When
voids make that slow, :class:`HiddenDeal` counts the consistent deals suit by suit and draws
each suit's split in proportion, which is uniform too. numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

import numpy as np

from butifarra_env.cards import N_SUITS, SUIT_MASK, cards_of

REJECTION_TRIES = 64
"""Uniform draws tried before switching to the counting sampler."""


class HiddenDeal:
    """The constraints on the hidden hands, and exact uniform sampling under them.

    ``unseen`` is the bitmask of the cards still out; ``seats`` the other seats (any ids);
    ``sizes[i]`` how many cards ``seats[i]`` holds; ``voids[i]`` a 4-bit mask of the suits
    ``seats[i]`` has shown it lacks. Raises ValueError when no deal fits.
    """

    def __init__(
        self,
        unseen: int,
        seats: Sequence[int],
        sizes: Sequence[int],
        voids: Sequence[int],
    ) -> None:
        if not len(seats) == len(sizes) == len(voids):
            raise ValueError("seats, sizes and voids must have the same length")
        if sum(sizes) != unseen.bit_count():
            raise ValueError(
                f"the hidden hands hold {sum(sizes)} cards but {unseen.bit_count()} are unseen"
            )
        self.unseen = unseen
        self.seats = tuple(seats)
        self.sizes = tuple(int(s) for s in sizes)
        self.voids = tuple(int(v) for v in voids)
        self.by_suit = [cards_of(unseen & SUIT_MASK[s]) for s in range(N_SUITS)]
        self.allowed = [
            tuple(i for i in range(len(seats)) if not (self.voids[i] >> s) & 1)
            for s in range(N_SUITS)
        ]
        self._ways: list[dict[tuple[int, ...], int]] | None = None
        if any(self.by_suit[s] and not self.allowed[s] for s in range(N_SUITS)):
            raise ValueError("a suit is still out but every seat has shown a void in it")

    def sample(self, rng: np.random.Generator) -> dict[int, int]:
        """One uniformly random consistent deal: ``{seat: hand bitmask}``."""
        if self._ways is None:  # no slow case seen yet: try plain uniform deals first
            cards = np.array(cards_of(self.unseen), dtype=np.int64)
            bounds = np.cumsum(self.sizes)[:-1]
            for _ in range(REJECTION_TRIES):
                parts = np.split(rng.permutation(cards), bounds)
                if all(not self.voids[i] & _suits(part) for i, part in enumerate(parts)):
                    return {self.seats[i]: _mask(part) for i, part in enumerate(parts)}
        return self._sample_counting(rng)

    # --------------------------------------------------------------- the counting sampler
    def _table(self) -> list[dict[tuple[int, ...], int]]:
        """``ways[s][capacity]``: consistent deals of suits s.. into seats with that much room
        left (capacities per seat), counting which cards go where."""
        if self._ways is not None:
            return self._ways
        ways: list[dict[tuple[int, ...], int]] = [{} for _ in range(N_SUITS + 1)]
        ways[N_SUITS][(0,) * len(self.seats)] = 1
        for s in range(N_SUITS - 1, -1, -1):
            for room in _capacities(self.sizes, self._cards_after(s)):
                total = 0
                for split in _splits(len(self.by_suit[s]), self.allowed[s], room):
                    rest = tuple(r - k for r, k in zip(room, split, strict=True))
                    total += _multinomial(split) * ways[s + 1].get(rest, 0)
                ways[s][room] = total
        self._ways = ways
        return ways

    def _cards_after(self, s: int) -> int:
        return sum(len(self.by_suit[t]) for t in range(s, N_SUITS))

    def _sample_counting(self, rng: np.random.Generator) -> dict[int, int]:
        ways = self._table()
        room = self.sizes
        if ways[0].get(tuple(room), 0) == 0:
            raise ValueError("no deal of the hidden cards fits the voids and hand sizes")
        hands = [0] * len(self.seats)
        for s in range(N_SUITS):
            options = []
            weights = []
            for split in _splits(len(self.by_suit[s]), self.allowed[s], room):
                rest = tuple(r - k for r, k in zip(room, split, strict=True))
                w = _multinomial(split) * ways[s + 1].get(rest, 0)
                if w:
                    options.append((split, rest))
                    weights.append(w)
            total = sum(weights)
            pick = int(rng.integers(total)) if total < 2**63 else int(rng.random() * total)
            for (split, rest), w in zip(options, weights, strict=True):
                if pick < w:
                    break
                pick -= w
            cards = list(rng.permutation(self.by_suit[s]))
            for i, k in enumerate(split):
                for c in cards[:k]:
                    hands[i] |= 1 << int(c)
                cards = cards[k:]
            room = rest
        return {self.seats[i]: hands[i] for i in range(len(self.seats))}


def sample_hidden_hands(
    unseen: int,
    seats: Sequence[int],
    sizes: Sequence[int],
    voids: Sequence[int],
    rng: np.random.Generator,
) -> dict[int, int]:
    """One uniformly random deal of the ``unseen`` cards to ``seats`` that respects the hand
    ``sizes`` and the shown ``voids`` (see :class:`HiddenDeal`)."""
    return HiddenDeal(unseen, seats, sizes, voids).sample(rng)


def _suits(cards: np.ndarray) -> int:
    out = 0
    for c in cards.tolist():
        out |= 1 << (c // 12)
    return out


def _mask(cards: np.ndarray) -> int:
    out = 0
    for c in cards.tolist():
        out |= 1 << c
    return out


def _multinomial(split: Sequence[int]) -> int:
    out, n = 1, 0
    for k in split:
        n += k
        out *= comb(n, k)
    return out


def _splits(n: int, allowed: Sequence[int], room: Sequence[int]) -> list[tuple[int, ...]]:
    """Ways to give ``n`` cards of one suit to the allowed seats within their room."""
    seats = len(room)
    out: list[tuple[int, ...]] = []

    def rec(i: int, left: int, acc: list[int]) -> None:
        if i == seats:
            if left == 0:
                out.append(tuple(acc))
            return
        top = min(left, room[i]) if i in allowed else 0
        for k in range(top + 1):
            acc.append(k)
            rec(i + 1, left - k, acc)
            acc.pop()

    rec(0, n, [])
    return out


def _capacities(sizes: Sequence[int], total: int) -> list[tuple[int, ...]]:
    """Every room vector (room_i <= sizes_i) whose entries sum to ``total``."""
    out: list[tuple[int, ...]] = []

    def rec(i: int, left: int, acc: list[int]) -> None:
        if i == len(sizes):
            if left == 0:
                out.append(tuple(acc))
            return
        for k in range(min(left, sizes[i]) + 1):
            acc.append(k)
            rec(i + 1, left - k, acc)
            acc.pop()

    rec(0, total, [])
    return out
