"""Deal the cards a player cannot see, consistently with everything that player has seen.

What a seat knows about the hidden hands: which cards are still out, how many cards each
other seat holds, and the cards each seat is known NOT to hold: a seat that did not follow
suit holds none of it (a void), and, because beating is compulsory, a seat that let an
opponent's card stand holds no card that would have beaten it (and, under obligada, no
weaker card of the led suit than the one it played: :func:`known_absent`, from the hand's
history). :func:`deal_consistent` deals the hidden cards uniformly at random
among the deals that respect all of that; :class:`HiddenDeal` wraps it for repeated draws
(search agents: PIMC, information-set MCTS; OpenSpiel's resampler).

Exactly uniform: a uniform deal of the right sizes is tried first and kept only if it
respects the constraints (rejection keeps the distribution uniform); when that keeps
failing, :func:`deal_consistent` counts the consistent deals per group of interchangeable
cards and draws each group's split in proportion, which is uniform too. numpy only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import factorial

import numpy as np

from butifarra_env.core.actions import TRUMP_BASE
from butifarra_env.core.cards import BELOW, N_CARDS, SUIT, SUIT_MASK, cards_of
from butifarra_env.core.rules import (
    EMPTY_TRICK,
    N_SEATS,
    TRUMP_UNSET,
    add_to_trick,
    partner_winning,
    winners,
)

REJECTION_TRIES = 64
"""Uniform draws tried before switching to the counting sampler."""


class HiddenDeal:
    """The constraints on the hidden hands, and exact uniform sampling under them.

    ``unseen`` is the bitmask of the cards still out; ``seats`` the other seats (any ids);
    ``sizes[i]`` how many cards ``seats[i]`` holds; ``voids[i]`` a 4-bit mask of the suits
    ``seats[i]`` has shown it lacks; ``absent[i]`` (optional) more cards it cannot hold.
    Raises ValueError when no deal fits.
    """

    def __init__(
        self,
        unseen: int,
        seats: Sequence[int],
        sizes: Sequence[int],
        voids: Sequence[int],
        absent: Sequence[int] | None = None,
    ) -> None:
        if not len(seats) == len(sizes) == len(voids):
            raise ValueError("seats, sizes and voids must have the same length")
        if sum(sizes) != unseen.bit_count():
            raise ValueError(
                f"the hidden hands hold {sum(sizes)} cards but {unseen.bit_count()} are unseen"
            )
        extra = absent if absent is not None else [0] * len(seats)
        self.unseen = unseen
        self.seats = tuple(seats)
        self.sizes = tuple(int(s) for s in sizes)
        self.forbidden = tuple(
            (_suit_cards(v) | a) & unseen for v, a in zip(voids, extra, strict=True)
        )
        nowhere = unseen
        for f in self.forbidden:
            nowhere &= f
        if nowhere:
            raise ValueError(
                f"cards {cards_of(nowhere)} are still out but every seat is known not to "
                "hold them (every seat has shown a void in their suit)"
            )
        self._counting = False  # set once plain uniform deals kept failing
        self._dealer: ConsistentDealer | None = None

    def sample(self, rng: np.random.Generator) -> dict[int, int]:
        """One uniformly random consistent deal: ``{seat: hand bitmask}``."""
        if not self._counting:
            cards = np.array(cards_of(self.unseen), dtype=np.int64)
            bounds = np.cumsum(self.sizes)[:-1]
            for _ in range(REJECTION_TRIES):
                parts = np.split(rng.permutation(cards), bounds)
                masks = [_mask(part) for part in parts]
                if all(not m & f for m, f in zip(masks, self.forbidden, strict=True)):
                    return dict(zip(self.seats, masks, strict=True))
            self._counting = True
        return self._sample_counting(rng)

    def sample_many(
        self, rng: np.random.Generator, k: int, max_fruitless: int | None = None
    ) -> list[dict[int, int]]:
        """``k`` independent uniformly random consistent deals (as :meth:`sample`, with the
        uniform draws and the rejection done for a whole batch at once).

        Rounds of ``2 x (deals missing) + 8`` uniform draws; a round of at least
        :data:`REJECTION_TRIES` draws none of which fits switches to the counting sampler
        for good. With fewer than 28 deals asked no round is that large, so constraints few
        deals meet can take many rounds (a constructed 1-in-2.7-million case: tens of
        seconds). ``max_fruitless`` bounds that: after that many draws in a row without a
        fit it switches too (a time-budgeted search passes :data:`REJECTION_TRIES`). The
        default (None) keeps the draws of the evaluation protocol's search member as they
        were published; either way the deals are exactly uniform."""
        if max_fruitless is not None and max_fruitless < 1:
            raise ValueError(f"max_fruitless must be None or at least 1, got {max_fruitless}")
        out: list[dict[int, int]] = []
        if not self.unseen:
            return [dict.fromkeys(self.seats, 0) for _ in range(k)]
        bits = np.left_shift(np.uint64(1), np.array(cards_of(self.unseen), dtype=np.uint64))
        sizes = np.array(self.sizes)
        held = np.flatnonzero(sizes)  # seats dealt at least one card (reduceat needs cards)
        starts = (np.cumsum(sizes) - sizes)[held]
        forbidden = np.array(self.forbidden, dtype=np.uint64)
        rows = np.broadcast_to(bits, (2 * k + 8, len(bits)))
        fruitless = 0  # uniform draws in a row that did not fit
        while len(out) < k and not self._counting:
            n = 2 * (k - len(out)) + 8
            perms = rng.permuted(rows[:n], axis=1)
            # Each hand is a run of the permutation; distinct bits: a sum is a union.
            if len(held) == len(sizes):
                hands = np.add.reduceat(perms, starts, axis=1)
            else:
                hands = np.zeros((n, len(sizes)), dtype=np.uint64)
                hands[:, held] = np.add.reduceat(perms, starts, axis=1)
            ok = ((hands & forbidden) == 0).all(axis=1)
            fruitless = 0 if ok.any() else fruitless + n
            if fruitless and (
                n >= REJECTION_TRIES or (max_fruitless is not None and fruitless >= max_fruitless)
            ):
                self._counting = True
            for row in hands[ok][: k - len(out)].tolist():
                out.append(dict(zip(self.seats, row, strict=True)))
        while len(out) < k:
            out.append(self._sample_counting(rng))
        return out

    def _sample_counting(self, rng: np.random.Generator) -> dict[int, int]:
        if self._dealer is None:
            self._dealer = ConsistentDealer(self.unseen, self.sizes, self.forbidden)
        hands = self._dealer.draw(rng.random)
        return dict(zip(self.seats, hands, strict=True))


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


def _suit_cards(voids: int) -> int:
    out = 0
    for s in range(4):
        if (voids >> s) & 1:
            out |= SUIT_MASK[s]
    return out


def _mask(cards: np.ndarray) -> int:
    out = 0
    for c in cards.tolist():
        out |= 1 << c
    return out


def known_absent(actions: Sequence[tuple[int, int]], obligada: bool = False) -> list[int]:
    """For each seat, the cards its plays so far prove it does not hold (bitmasks by seat).

    ``actions`` is a hand's ``(seat, action)`` history (``Game.actions``). Every card play
    was legal under :func:`butifarra_env.core.rules.legal_cards`, and that reveals more than the
    voids: a seat that did not follow suit holds none of the led suit; a seat that let an
    opponent's card stand holds no card that would have beaten it (of the led suit when it
    followed, any winner when it did not). Under ``obligada`` (the variant of RULES.md) a
    seat that followed suit under an opponent's card without beating it played its lowest
    card of the led suit, so it also holds no weaker card of that suit. A deal of the hidden
    cards that avoids these sets makes every past play legal again (under the same
    ``obligada``), and every deal that does so avoids them.
    """
    absent = [0] * N_SEATS
    trump = TRUMP_UNSET
    trick = EMPTY_TRICK
    n_in_trick = 0
    for seat, action in actions:
        if action >= N_CARDS:
            if TRUMP_BASE <= action < TRUMP_BASE + 5:  # a suit or butifarra (4)
                trump = action - TRUMP_BASE
            continue
        if n_in_trick == 0:
            trick = EMPTY_TRICK
        led, win, win_seat = trick  # before this card
        trick = add_to_trick(trick, seat, action, trump)
        if n_in_trick:
            follows = SUIT[action] == led
            if not follows:
                absent[seat] |= SUIT_MASK[led]
            stands = trick[1] == win  # the card did not beat the winning one
            if stands and not partner_winning(win_seat, seat):  # an opponent's card stands
                beaters = winners(trump, win)
                absent[seat] |= beaters & SUIT_MASK[led] if follows else beaters
                if obligada and follows:  # it played its lowest card of the led suit
                    absent[seat] |= BELOW[action]
        n_in_trick = (n_in_trick + 1) % N_SEATS
    return absent


def deal_consistent(
    cards: int,
    sizes: Sequence[int],
    forbidden: Sequence[int],
    random: Callable[[], float],
) -> list[int]:
    """Deal the ``cards`` (a bitmask) into hands of ``sizes[i]`` cards, hand ``i`` holding no
    card of ``forbidden[i]``: uniformly at random among all such deals.

    ``random`` returns floats in [0, 1) and is the only source of randomness (OpenSpiel's
    probability samplers, ``np.random.Generator.random``...), so a seeded source reproduces
    the deal. Exact: cards allowed in the same set of hands are interchangeable, so the
    number of completions is counted per group of such cards and each group's split is drawn
    in proportion to it. Raises ValueError when no deal satisfies the constraints.
    """
    return ConsistentDealer(cards, sizes, forbidden).draw(random)


class ConsistentDealer:
    """:func:`deal_consistent` prepared once for many draws: the groups of interchangeable
    cards and the number of completions of every partial split are counted on the first
    draws and remembered, so each further deal costs one walk down the groups."""

    def __init__(self, cards: int, sizes: Sequence[int], forbidden: Sequence[int]) -> None:
        n = len(sizes)
        if len(forbidden) != n or any(s < 0 for s in sizes):
            raise ValueError("sizes and forbidden must have one entry per hand, sizes >= 0")
        if sum(sizes) != cards.bit_count():
            raise ValueError(
                f"sizes add up to {sum(sizes)}, but there are {cards.bit_count()} cards"
            )
        allowed = [cards & ~f for f in forbidden]
        nowhere = cards & ~_union(allowed)
        if nowhere:
            raise ValueError(f"cards {cards_of(nowhere)} are forbidden in every hand: no deal")
        groups: dict[int, list[int]] = {}  # set of hands (bits) -> cards allowed in exactly those
        for hands_set in range(1, 1 << n):
            m = cards
            for i in range(n):
                m &= allowed[i] if (hands_set >> i) & 1 else ~allowed[i]
            if m:
                groups[hands_set] = cards_of(m)
        # The group allowed in most hands goes last: its split is then forced by what is left.
        order = sorted(groups, key=lambda a: (a.bit_count(), a))
        self.n = n
        self.sizes = tuple(int(s) for s in sizes)
        self.group_cards = [groups[a] for a in order]
        self.seats_of = [[i for i in range(n) if (a >> i) & 1] for a in order]
        self.counts = [len(groups[a]) for a in order]
        self._ways: dict[tuple[int, tuple[int, ...]], int] = {}
        self._splits: dict[tuple[int, tuple[int, ...]], list[tuple[tuple[int, ...], int]]] = {}

    def splits(self, g: int, caps: tuple[int, ...]) -> list[tuple[tuple[int, ...], int]]:
        """Each way to share group ``g`` among its hands when the hands still have room
        ``caps``, weighted by the number of complete deals that follow it."""
        key = (g, caps)
        out = self._splits.get(key)
        if out is not None:
            return out
        k, seats, n = self.counts[g], self.seats_of[g], self.n
        out = []
        if g == len(self.counts) - 1:  # what is left must be exactly this group's hands' room
            if not any(caps[i] for i in range(n) if i not in seats):
                part = tuple(caps[i] for i in seats)
                out = [(part, _multinomial(k, part))]
        else:
            for part in _compositions(k, [caps[i] for i in seats]):
                rest = list(caps)
                for i, a in zip(seats, part, strict=True):
                    rest[i] -= a
                nxt = (g + 1, tuple(rest))
                ways = self._ways.get(nxt)
                if ways is None:
                    ways = self._ways[nxt] = sum(w for _, w in self.splits(*nxt))
                if ways:
                    out.append((part, _multinomial(k, part) * ways))
        self._splits[key] = out
        return out

    def draw(self, random: Callable[[], float]) -> list[int]:
        """One deal: the hands as bitmasks, in the order of ``sizes``."""
        caps = self.sizes
        hands = [0] * self.n
        for g in range(len(self.counts)):
            options = self.splits(g, caps)
            if not options:
                raise ValueError("no deal gives every hand its size without a forbidden card")
            pick = _below(random, sum(w for _, w in options))
            chosen = 0
            while pick >= options[chosen][1]:
                pick -= options[chosen][1]
                chosen += 1
            group = list(self.group_cards[g])
            _shuffle(group, random)
            rest = list(caps)
            start = 0
            for i, a in zip(self.seats_of[g], options[chosen][0], strict=True):
                for c in group[start : start + a]:
                    hands[i] |= 1 << c
                start += a
                rest[i] -= a
            caps = tuple(rest)
        return hands


def _union(masks: Sequence[int]) -> int:
    """The union of bitmasks."""
    out = 0
    for m in masks:
        out |= m
    return out


_FACTORIAL = [factorial(i) for i in range(N_CARDS + 1)]


def _multinomial(k: int, part: tuple[int, ...]) -> int:
    """Ways to split ``k`` distinct cards into hands of the sizes in ``part``."""
    out = _FACTORIAL[k]
    for a in part:
        out //= _FACTORIAL[a]
    return out


def _compositions(k: int, caps: list[int]) -> list[tuple[int, ...]]:
    """Every way to write ``k`` as ``len(caps)`` parts with part ``i`` at most ``caps[i]``."""
    if len(caps) == 1:
        return [(k,)] if k <= caps[0] else []
    room = sum(caps[1:])
    return [
        (a, *rest)
        for a in range(max(0, k - room), min(k, caps[0]) + 1)
        for rest in _compositions(k - a, caps[1:])
    ]


def _below(random: Callable[[], float], n: int) -> int:
    """An int uniform in [0, n) from one float of ``random`` (n may exceed 2**53: the float's
    53 bits then choose among n in proportion, which is all the sampler provides)."""
    r = float(random())
    if not 0.0 <= r < 1.0:
        raise ValueError(f"the random source must return floats in [0, 1), got {r!r}")
    return min(int(r * n), n - 1)


def _shuffle(items: list[int], random: Callable[[], float]) -> None:
    """Fisher-Yates with ``random`` as the source."""
    for i in range(len(items) - 1, 0, -1):
        j = _below(random, i + 1)
        items[i], items[j] = items[j], items[i]
