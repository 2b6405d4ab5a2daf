"""``HiddenDeal.sample_many`` draws the same deals, with the same random numbers, as the
round-by-round rejection it was written from (kept below as the reference): the search
agent's decisions, and so every published search figure, depend on that stream."""

from __future__ import annotations

import numpy as np
import pytest

from butifarra_env.core.cards import SUIT_MASK, cards_of
from butifarra_env.core.observation import View, encode, pack_bits
from butifarra_env.core.sampling import REJECTION_TRIES, HiddenDeal, known_absent
from tests.helpers import endgame


def reference(hidden: HiddenDeal, rng: np.random.Generator, k: int) -> list[dict[int, int]]:
    """The implementation before 2026-12-03 (cumulative sums over each permutation)."""
    out: list[dict[int, int]] = []
    if not hidden.unseen:
        return [dict.fromkeys(hidden.seats, 0) for _ in range(k)]
    bits = np.left_shift(np.uint64(1), np.array(cards_of(hidden.unseen), dtype=np.uint64))
    ends = np.cumsum(hidden.sizes)
    forbidden = np.array(hidden.forbidden, dtype=np.uint64)
    while len(out) < k and not hidden._counting:
        n = 2 * (k - len(out)) + 8
        perms = rng.permuted(np.broadcast_to(bits, (n, len(bits))), axis=1)
        sums = np.zeros((n, len(bits) + 1), dtype=np.uint64)
        np.cumsum(perms, axis=1, out=sums[:, 1:])
        hands = sums[:, ends] - sums[:, np.concatenate(([0], ends[:-1]))]
        ok = ~((hands & forbidden) != 0).any(axis=1)
        if not ok.any() and n >= REJECTION_TRIES:
            hidden._counting = True
        for row in hands[ok][: k - len(out)].tolist():
            out.append(dict(zip(hidden.seats, row, strict=True)))
    while len(out) < k:
        out.append(hidden._sample_counting(rng))
    return out


def cases(k: int) -> list[tuple[str, HiddenDeal]]:
    """Constraints from real positions (voids, what the current trick proves), a seat
    with no cards, and, when ``k`` asks for rounds of at least :data:`REJECTION_TRIES`
    deals, constraints so tight that the counting sampler takes over (with smaller rounds
    both would draw uniform deals for minutes: one in 2.7 million fits)."""
    out = []
    for seed in range(40):
        game, trick = endgame(seed, 2 + seed % 10)
        view = View(pack_bits(encode(game, game.to_move)))
        rel = [((s - game.to_move) & 3, c) for s, c in trick]
        absent = known_absent([(0, 48 + view.trump), *rel])
        out.append(
            (
                f"position {seed}",
                HiddenDeal(view.unseen, (1, 2, 3), view.sizes[1:], view.voids[1:], absent[1:]),
            )
        )
    unseen = SUIT_MASK[0] | SUIT_MASK[1]
    out.append(("a seat with no cards", HiddenDeal(unseen, (1, 2, 3), (0, 12, 12), (0, 0, 0))))
    out.append(("the last seat empty", HiddenDeal(unseen, (1, 2, 3), (12, 12, 0), (0, 0, 0))))
    if 2 * k + 8 >= REJECTION_TRIES:  # seat 1 only copas, seat 2 only oros: 1 in C(24, 12)
        out.append(("tight", HiddenDeal(unseen, (1, 2), (12, 12), (0b1101, 0b1110))))
    return out


@pytest.mark.parametrize("k", [1, 4, 16, 40])
def test_sample_many_draws_what_the_round_by_round_rejection_drew(k: int) -> None:
    switched = 0
    for i, (name, hidden) in enumerate(cases(k)):
        twin = HiddenDeal.__new__(HiddenDeal)
        twin.__dict__.update(hidden.__dict__)
        rng, rng_ref = np.random.default_rng([k, i]), np.random.default_rng([k, i])
        for _ in range(3):  # the counting switch, once made, carries over to later calls
            assert hidden.sample_many(rng, k) == reference(twin, rng_ref, k), name
            assert rng.bit_generator.state == rng_ref.bit_generator.state, name
            assert hidden._counting == twin._counting, name
        switched += hidden._counting
    if 2 * k + 8 >= REJECTION_TRIES:
        assert switched  # the tight case reached the counting sampler


class CountingRng:
    """A generator that counts the uniform deals ``sample_many`` draws (``permuted`` rows)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.draws = 0

    def permuted(self, x: np.ndarray, axis: int) -> np.ndarray:
        self.draws += len(x)
        return self.rng.permuted(x, axis=axis)

    def random(self, *args: object) -> object:
        return self.rng.random(*args)  # type: ignore[call-overload]


def fairly_tight() -> HiddenDeal:
    """Seat 1 holds no copas: it must get 10 of the 12 oros, 1 uniform deal in 2,800."""
    unseen = SUIT_MASK[0] | (SUIT_MASK[1] & 0xFF << 12)
    return HiddenDeal(unseen, (1, 2), (10, 10), (0b0010, 0))


def test_max_fruitless_bounds_the_rejected_draws_in_a_row() -> None:
    """Small rounds (one deal asked: 10 draws) never switch to the counting sampler on
    their own; ``max_fruitless`` (what the budgeted search passes) switches after that
    many rejected draws in a row. The deals stay consistent either way."""
    long_runs = 0
    for seed in range(10):
        plain, bounded = fairly_tight(), fairly_tight()
        rng_plain, rng_bounded = CountingRng(seed), CountingRng(seed)
        (deal,) = plain.sample_many(rng_plain, 1)  # type: ignore[arg-type]
        assert not plain._counting
        long_runs += rng_plain.draws > REJECTION_TRIES + 10
        (deal_b,) = bounded.sample_many(rng_bounded, 1, max_fruitless=REJECTION_TRIES)  # type: ignore[arg-type]
        assert rng_bounded.draws <= REJECTION_TRIES + 10  # the round that crossed the bound
        assert bounded._counting == (rng_plain.draws > REJECTION_TRIES + 10)
        if not bounded._counting:  # a fit came before the bound: the same deal
            assert deal_b == deal
        for d in (deal, deal_b):
            assert not d[1] & SUIT_MASK[1] and d[1] | d[2] == plain.unseen
    assert long_runs >= 8  # the plain sampler went on drawing in most seeds


def test_max_fruitless_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_fruitless must be None or at least 1, got 0"):
        fairly_tight().sample_many(np.random.default_rng(0), 1, max_fruitless=0)
