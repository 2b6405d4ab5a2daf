"""One hand-built position per numbered legal-card rule of RULES.md, exact legal sets."""

from __future__ import annotations

import pytest

from butifarra_env.core.rules import NO_TRUMP
from tests.helpers import cards, legal_cards, play_position

OROS, COPAS, ESPADAS, BASTOS = range(4)


def test_rule_1_leading_any_card() -> None:
    g = play_position(OROS, leader=0, hands={0: "9o 2c 5e 12b"})
    assert g.to_move == 0
    assert legal_cards(g) == set(cards("9o 2c 5e 12b"))


def test_rule_2_partner_winning_follow_suit_without_beating() -> None:
    # seat 0 leads 1c (winning), seat 1 plays 4c; seat 2 (partner of 0) holds copas
    g = play_position(OROS, leader=0, trick="1c 4c", hands={2: "9c 2c 5e 3o"})
    assert g.win_seat == 0 and g.to_move == 2
    assert legal_cards(g) == set(cards("9c 2c"))  # any copas, need not beat the partner


def test_rule_2_partner_winning_void_any_card_no_need_to_trump() -> None:
    g = play_position(OROS, leader=0, trick="1c 4c", hands={2: "5e 3o 9o 12b"})
    assert legal_cards(g) == set(cards("5e 3o 9o 12b"))


def test_rule_2_partner_winning_after_an_opponent_played() -> None:
    # seat 1 leads 5e, seat 2 beats with 1e, seat 3 plays 2e; seat 0 (partner of 2)
    g = play_position(BASTOS, leader=1, trick="5e 1e 2e", hands={0: "9e 3e 9b"})
    assert g.win_seat == 2 and g.to_move == 0
    assert legal_cards(g) == set(cards("9e 3e"))


def test_rule_3_opponent_winning_must_beat_in_suit() -> None:
    # seat 0 leads 11c; seat 1 (opponent) holds 12c and 1c (beat it) and 4c (does not)
    g = play_position(OROS, leader=0, trick="11c", hands={1: "12c 1c 4c 9o"})
    assert legal_cards(g) == set(cards("12c 1c"))


def test_rule_3_opponent_winning_cannot_beat_any_of_led_suit() -> None:
    g = play_position(OROS, leader=0, trick="9c", hands={1: "1c 4c 9o"})
    assert legal_cards(g) == set(cards("1c 4c"))  # follow suit, trumping not allowed


def test_rule_3_opponent_trumped_follow_suit_with_any_card() -> None:
    # trump oros; seat 0 leads 5c, seat 1 (void) trumps with 2o; seat 2 holds copas
    # but seat 2's partner is seat 0: make seat 3 the one to check instead.
    g = play_position(OROS, leader=1, trick="5c 2o", hands={3: "9c 3c 1o 5e"})
    assert g.win_seat == 2 and g.to_move == 3  # seat 2 (opponent of 3) trumped
    assert legal_cards(g) == set(cards("9c 3c"))  # any copas; no need to over-trump


def test_rule_4_void_must_trump_a_plain_winner() -> None:
    g = play_position(ESPADAS, leader=0, trick="12c", hands={1: "3e 9e 5o 1b"})
    assert legal_cards(g) == set(cards("3e 9e"))  # any trump


def test_rule_4_void_must_over_trump() -> None:
    # trump espadas: seat 0 leads 5c, seat 1 (void) trumps with 10e; seat 2 is seat 1's
    # opponent and void in copas: must over-trump with 1e or 9e, not 4e
    g = play_position(ESPADAS, leader=0, trick="5c 10e", hands={2: "4e 1e 9e 5o"})
    assert g.win_seat == 1 and g.to_move == 2
    assert legal_cards(g) == set(cards("1e 9e"))


def test_rule_4_void_with_only_lower_trumps_any_card() -> None:
    g = play_position(ESPADAS, leader=0, trick="5c 1e", hands={2: "4e 2e 5o 12b"})
    assert legal_cards(g) == set(cards("4e 2e 5o 12b"))  # under-trumping never required


def test_rule_4_void_no_trumps_any_card() -> None:
    g = play_position(ESPADAS, leader=0, trick="12c", hands={1: "5o 1b 9o"})
    assert legal_cards(g) == set(cards("5o 1b 9o"))


def test_rule_5_butifarra_void_any_card() -> None:
    g = play_position(NO_TRUMP, leader=0, trick="12c", hands={1: "9e 5o 1b"})
    assert legal_cards(g) == set(cards("9e 5o 1b"))


def test_rule_5_butifarra_must_still_beat_in_suit() -> None:
    g = play_position(NO_TRUMP, leader=0, trick="12c", hands={1: "1c 2c 9e"})
    assert legal_cards(g) == {cards("1c")[0]}


@pytest.mark.parametrize(
    ("trump", "leader", "trick", "winner"),
    [
        (OROS, 0, "5c 9c 2c 1c", 1),  # highest of led suit: the manilla
        (OROS, 0, "5c 9c 2o 1c", 2),  # a trump beats the led suit
        (OROS, 0, "5c 2o 3o 9c", 2),  # higher trump wins
        (OROS, 0, "4c 9e 1b 5c", 3),  # off-suit discards never win
        (NO_TRUMP, 0, "12b 1b 9o 11b", 1),  # butifarra: led suit only
        (COPAS, 3, "10c 8c 12c 11c", 1),  # strength order 12 > 11 > 10 > 8
    ],
)
def test_trick_winner(trump: int, leader: int, trick: str, winner: int) -> None:
    g = play_position(trump, leader=leader, trick=trick)
    assert g.tricks[-1][2] == winner
    assert g.to_move == winner  # the winner leads the next trick


def test_voids_are_recorded_when_a_player_fails_to_follow() -> None:
    g = play_position(OROS, leader=0, trick="5c 2o", hands={1: "2o 5e"})
    assert g.voids[1] == 1 << COPAS and g.voids[0] == 0
