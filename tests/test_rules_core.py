"""The pure functions of butifarra_env.core.rules, on known values, and the shared file helper."""

from __future__ import annotations

import os

import numpy as np
import pytest

from butifarra_env.core import rules
from butifarra_env.core.actions import (
    bits_from_mask,
    mask_from_bits,
    masks_from_bits,
    random_legal_actions,
)
from butifarra_env.core.cards import ALL_CARDS, SUIT_MASK
from butifarra_env.core.fileio import atomic_write_text, atomic_writer
from butifarra_env.core.rules import NO_SUIT, NO_TRUMP, TRUMP_UNSET, Match
from tests.helpers import cards


def mask(text: str) -> int:
    return sum(1 << c for c in cards(text))


def test_winners_under_trump_plain_and_butifarra() -> None:
    # 1 de oros winning, espadas trump: the manilla of oros or any espada takes it.
    assert rules.winners(2, cards("1o")[0]) == mask("9o") | SUIT_MASK[2]
    # a trump winning: only higher trumps.
    assert rules.winners(2, cards("12e")[0]) == mask("9e 1e")
    # butifarra: only higher cards of the suit.
    assert rules.winners(NO_TRUMP, cards("10c")[0]) == mask("9c 1c 12c 11c")
    # empty trick, or trump not chosen yet: every card.
    assert rules.winners(2, -1) == ALL_CARDS
    assert rules.winners(TRUMP_UNSET, 5) == ALL_CARDS


def test_trick_winner_in_play_order() -> None:
    assert rules.trick_winner(cards("1o 9o 2e 12o"), 2) == 2  # the only trump
    assert rules.trick_winner(cards("1o 9o 2e 12o"), NO_TRUMP) == 1  # manilla of the led suit
    assert rules.trick_winner(cards("7c 8b 2e 12o"), 0) == 3  # the rey of oros is a trump
    assert rules.trick_winner(cards("7c 8b 2e 12o"), NO_TRUMP) == 0  # nobody followed


def test_legal_card_rule_names_the_rule_that_applies() -> None:
    hand = mask("2o 3c 4e")
    w = cards("1c")[0]
    assert rules.legal_card_rule(hand, NO_SUIT, -1, False, 0) == 1
    assert rules.legal_card_rule(hand, 1, w, True, 0) == 2
    assert rules.legal_card_rule(hand, 1, w, False, 0) == 3
    assert rules.legal_card_rule(mask("2o 4e"), 1, w, False, 0) == 4
    assert rules.legal_card_rule(mask("2o 4e"), 1, w, False, NO_TRUMP) == 5
    # rule 4 in action: void in copas with an oros trump: must trump.
    assert rules.legal_cards(mask("2o 4e"), 1, w, False, 0) == mask("2o")


def test_doubling_order_and_seats() -> None:
    assert [rules.first_asked_to_double(s) for s in range(4)] == [1, 2, 3, 0]
    assert [rules.asked_after_pass(s) for s in range(4)] == [2, 3, 0, 1]
    assert [rules.mano(d) for d in range(4)] == [1, 2, 3, 0]
    seats = np.arange(4)
    assert rules.asked_after_double(seats).tolist() == [1, 2, 3, 0]  # arrays too


def test_multiplier_and_scores_on_ints_and_arrays() -> None:
    assert rules.multiplier(NO_TRUMP, 2, butifarra_base=2) == 8
    assert rules.multiplier(1, 3) == 8
    got = rules.multiplier(np.array([NO_TRUMP, 1]), np.array([2, 3]), butifarra_base=1)
    assert got.tolist() == [4, 8]
    assert rules.hand_scores((40, 32), 4) == (16, 0)
    assert rules.hand_scores((36, 36), 16) == (0, 0)
    arr = rules.hand_scores(np.array([[40, 32], [30, 42], [36, 36]]), np.array([4, 2, 16]))
    assert arr.tolist() == [[16, 0], [0, 12], [0, 0]]
    assert rules.seat_rewards((0, 12)) == (-12, 12, -12, 12)
    assert rules.worst_hand_loss(4, 2) == 36 * 2 * 16


def test_match_books_hands_rotates_the_deal_and_stops_at_the_target() -> None:
    m = Match(target=101, dealer=3)
    assert m.add_hand((40, 0)) and (m.dealer, m.hand_number, m.scores) == (0, 1, (40, 0))
    assert m.add_hand((0, 100)) and (m.dealer, m.hand_number, m.scores) == (1, 2, (40, 100))
    assert m.winner is None
    assert not m.add_hand((0, 1))  # 101: over, the deal does not move on
    assert (m.dealer, m.hand_number, m.scores, m.winner) == (1, 2, (40, 101), 1)
    one_hand = Match(target=None, dealer=2)
    assert not one_hand.add_hand((12, 0)) and one_hand.scores == (0, 0)
    assert rules.match_over(np.array([[100, 0], [0, 101]]), 101).tolist() == [False, True]


def test_deal_gives_packets_of_four_starting_after_the_dealer() -> None:
    hands = rules.deal(list(range(48)), dealer=1)
    assert rules.DEAL_ORDER[0][:8] == (0, 1, 2, 3, 16, 17, 18, 19)
    assert hands[2] == sum(1 << c for c in rules.DEAL_ORDER[0])  # seat 2 is first after 1
    assert hands[1] == sum(1 << c for c in rules.DEAL_ORDER[3])  # the dealer is served last


def test_mask_conversions_and_uniform_random_choice() -> None:
    legal = (1 << 3) | (1 << 48) | (1 << 55)
    m = mask_from_bits(legal)
    assert m.dtype == np.int8 and m.shape == (56,) and np.flatnonzero(m).tolist() == [3, 48, 55]
    assert bits_from_mask(m) == legal
    assert masks_from_bits([legal, 1]).tolist() == [m.tolist(), [1] + [0] * 55]
    rng = np.random.default_rng(0)
    picks = random_legal_actions(np.tile(m, (3000, 1)), rng)
    counts = np.bincount(picks, minlength=56)
    assert set(np.flatnonzero(counts)) == {3, 48, 55}
    assert counts[[3, 48, 55]].min() > 900  # about 1000 each: uniform
    with pytest.raises(ValueError, match="row 1 of the action mask has no legal action"):
        random_legal_actions(np.stack([m, np.zeros(56, np.int8)]), rng)


def test_atomic_writer_keeps_the_old_file_on_error_and_leaves_no_temp(tmp_path) -> None:
    target = tmp_path / "out.txt"
    atomic_write_text(target, "old\n")
    with pytest.raises(RuntimeError), atomic_writer(target) as f:
        f.write("half")
        raise RuntimeError("crash mid-write")
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["out.txt"]
    with pytest.raises(FileExistsError, match="not overwriting"):
        atomic_write_text(target, "new\n", overwrite=False)
    assert target.read_text() == "old\n"


def test_atomic_writer_honours_the_umask(tmp_path) -> None:
    old = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "f.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "f.txt").stat().st_mode & 0o777 == 0o640
