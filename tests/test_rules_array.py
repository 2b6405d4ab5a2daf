"""``rules.legal_cards_array`` (what the batched engine and the search's batched rollouts
call) equals ``rules.legal_cards`` entry by entry, on positions of every kind, and
``rules.add_to_trick_array`` (the search's rollouts) equals ``rules.add_to_trick``;
``rules.card_bits_array`` lists the cards ``cards_of`` lists."""

from __future__ import annotations

import numpy as np
import pytest

from butifarra_env.core.cards import ALL_CARDS, N_CARDS, SUIT, cards_of
from butifarra_env.core.rules import (
    EMPTY_TRICK,
    NO_SUIT,
    TRUMP_UNSET,
    WINNERS_FLAT,
    WINNERS_STRIDE,
    add_to_trick,
    add_to_trick_array,
    card_bits_array,
    legal_cards,
    legal_cards_array,
    winners,
)


def _positions(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    """Random hands of 1-12 cards; a third leading, the rest with a winning card of any suit
    (often the hand's own suits, so that following, beating and obligada all come up)."""
    hands = np.zeros(n, dtype=np.uint64)
    led = np.full(n, NO_SUIT, dtype=np.int64)
    win = np.full(n, N_CARDS, dtype=np.int64)
    opponent = np.zeros(n, dtype=bool)
    trump = rng.integers(0, TRUMP_UNSET, size=n)  # suits 0-3 and butifarra
    for i in range(n):
        cards = rng.choice(N_CARDS, size=int(rng.integers(1, 13)) + 1, replace=False)
        hands[i] = sum(1 << int(c) for c in cards[1:])
        if rng.random() < 2 / 3:  # a trick under way: its winning card is not in the hand
            w = int(cards[0])
            win[i] = w
            led[i] = SUIT[w] if rng.random() < 0.7 else int(rng.integers(4))
            opponent[i] = rng.random() < 0.6
    return hands, led, win, opponent, trump


@pytest.mark.parametrize("obligada", [False, True])
def test_legal_cards_array_equals_the_scalar_rule(obligada: bool) -> None:
    hands, led, win, opponent, trump = _positions(np.random.default_rng(7), 4000)
    got = legal_cards_array(hands, led, win, opponent, trump, obligada)
    assert got.dtype == np.uint64
    kinds = set()
    for i in range(len(hands)):
        leading = led[i] == NO_SUIT
        w = -1 if leading else int(win[i])
        want = legal_cards(int(hands[i]), int(led[i]), w, not opponent[i], int(trump[i]), obligada)
        assert int(got[i]) == want, (i, int(hands[i]), int(led[i]), w, opponent[i], trump[i])
        kinds.add((leading, bool(opponent[i]), want == int(hands[i]), want.bit_count() == 1))
    assert len(kinds) >= 6  # leading, partner, opponent; whole hand, one card, a subset


def test_obligada_changes_some_positions_and_only_against_an_opponent() -> None:
    hands, led, win, opponent, trump = _positions(np.random.default_rng(8), 4000)
    plain = legal_cards_array(hands, led, win, opponent, trump)
    forced = legal_cards_array(hands, led, win, opponent, trump, obligada=True)
    differ = plain != forced
    assert differ.sum() > 100
    assert opponent[differ].all() and (led[differ] != NO_SUIT).all()
    assert all(int(x).bit_count() == 1 for x in forced[differ])


def test_winners_table_is_winners_with_an_empty_trick_column() -> None:
    table = WINNERS_FLAT.reshape(TRUMP_UNSET + 1, WINNERS_STRIDE)
    for t in range(TRUMP_UNSET + 1):
        for w in range(WINNERS_STRIDE):
            assert int(table[t, w]) == winners(t, w)


def test_add_to_trick_array_folds_tricks_as_the_scalar_rule() -> None:
    """Whole tricks of four distinct cards, folded card by card both ways, under every trump
    value; the winner changes hands at least once in most tricks, so a fold that kept the
    first card (or took every card) fails."""
    rng = np.random.default_rng(9)
    n = 3000
    trump = rng.integers(0, TRUMP_UNSET + 1, size=n)  # suits, butifarra and "unset"
    cards = np.array([rng.choice(N_CARDS, size=4, replace=False) for _ in range(n)])
    leader = rng.integers(0, 4, size=n)
    led = np.full(n, NO_SUIT, dtype=np.int64)
    win = np.full(n, N_CARDS, dtype=np.int64)
    win_seat = np.full(n, -1, dtype=np.int64)
    scalar = [EMPTY_TRICK] * n
    changes = 0
    for k in range(4):
        seat = (leader + k) & 3
        led, win, win_seat = add_to_trick_array(led, win, win_seat, seat, cards[:, k], trump)
        for i in range(n):
            before = scalar[i][1]
            scalar[i] = add_to_trick(scalar[i], int(seat[i]), int(cards[i, k]), int(trump[i]))
            changes += k > 0 and scalar[i][1] != before
            assert (int(led[i]), int(win[i]), int(win_seat[i])) == scalar[i], (i, k)
    assert n < changes < 3 * n


def test_card_bits_array_lists_each_masks_cards() -> None:
    """Every card's bit, the empty and the full mask, and random hands in a 2-d batch: the
    cards marked are exactly ``cards_of`` the mask, in card order."""
    rng = np.random.default_rng(11)
    hands = [
        sum(1 << int(c) for c in rng.choice(N_CARDS, size=12, replace=False)) for _ in range(6)
    ]
    masks = [*(1 << c for c in range(N_CARDS)), 0, ALL_CARDS, *hands]
    got = card_bits_array(np.array(masks, dtype=np.uint64).reshape(-1, 2))
    assert got.shape == (len(masks) // 2, 2, N_CARDS) and got.dtype == bool
    for mask, bits in zip(masks, got.reshape(-1, N_CARDS), strict=True):
        assert np.flatnonzero(bits).tolist() == cards_of(mask)


def test_card_bits_array_reads_any_layout_of_the_masks() -> None:
    """The bits come from the masks' values, not their bytes in memory: a big-endian copy,
    a strided view, a one-mask array and a signed ``int64`` copy give the same bools."""
    rng = np.random.default_rng(12)
    masks = rng.integers(0, 1 << N_CARDS, size=(5, 4), dtype=np.uint64)
    want = card_bits_array(masks)
    assert np.array_equal(card_bits_array(masks.astype(">u8")), want)
    assert np.array_equal(card_bits_array(masks[:, ::2]), want[:, ::2])
    assert np.array_equal(card_bits_array(masks.astype(np.int64)), want)
    one = card_bits_array(np.uint64(masks[2, 3]))
    assert one.shape == (N_CARDS,) and np.flatnonzero(one).tolist() == cards_of(int(masks[2, 3]))
