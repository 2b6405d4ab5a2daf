"""A brute-force oracle for the legal cards and the trick winner, written from docs/RULES.md.

The oracle shares nothing with ``butifarra_env``: cards are ``(suit, number)`` tuples, the
strength order is its own list, and each numbered rule of "Legal cards" (1-5) is a plain
``if`` on lists. The only link to the code under test is the public card id
``c = suit * 12 + number - 1`` (RULES.md, "Card id"), used to convert the answers.

It is compared with :func:`butifarra_env.core.rules.legal_cards`, with
:func:`butifarra_env.core.rules.trick_winner`, and with ``Game.legal`` / ``Game.legal_cards``
along thousands of random hands, on random positions (any hand, any trick of 0-3 cards,
the partner or an opponent winning, any trump including butifarra) and under hypothesis;
each with the default rules and with the "obligada" variant (RULES.md, Variants).
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from butifarra_env.core import rules
from butifarra_env.core.game import Game
from butifarra_env.core.options import Options

# ------------------------------------------------------------------ the oracle (RULES.md)
Card = tuple[int, int]  # (suit 0-3: oros, copas, espadas, bastos; number 1-12)
BUTIFARRA = None  # no trump suit
DECK: list[Card] = [(suit, number) for suit in range(4) for number in range(1, 13)]

# "Strength inside a suit, high to low: 9 (manilla), 1 (as), 12 (rey), 11 (caballo),
# 10 (sota), 8, 7, 6, 5, 4, 3, 2."
HIGH_TO_LOW = [9, 1, 12, 11, 10, 8, 7, 6, 5, 4, 3, 2]


def stronger(a: Card, b: Card) -> bool:
    """Two cards of one suit: is ``a`` the higher?"""
    return HIGH_TO_LOW.index(a[1]) < HIGH_TO_LOW.index(b[1])


def oracle_trick_winner(trick: list[Card], trump: int | None) -> int:
    """ "A trick is won by the highest trump in it; if it holds no trump, by the highest
    card of the suit that was led. In butifarra there is no trump." (index in play order)"""
    trumps = [i for i, card in enumerate(trick) if card[0] == trump]
    led_suit = trick[0][0]
    contenders = trumps or [i for i, card in enumerate(trick) if card[0] == led_suit]
    best = contenders[0]
    for i in contenders[1:]:
        if stronger(trick[i], trick[best]):
            best = i
    return best


def weakest(cards: list[Card]) -> Card:
    """The lowest of some cards of one suit by the strength order (the 2 lowest)."""
    return max(cards, key=lambda card: HIGH_TO_LOW.index(card[1]))


def oracle_legal_cards(
    hand: list[Card], trick: list[Card], trump: int | None, obligada: bool = False
) -> set[Card]:
    """The legal cards of the player to move, who holds ``hand``, after the cards of
    ``trick`` (in play order: the partner is the player two before, at index len - 2).
    ``obligada``: the variant of RULES.md, which changes only rule 3's fallback."""
    # 1. Leading: any card.
    if not trick:
        return set(hand)
    led_suit = trick[0][0]
    w_index = oracle_trick_winner(trick, trump)
    w = trick[w_index]  # W, the card currently winning the trick
    of_led_suit = [card for card in hand if card[0] == led_suit]
    # 2. W belongs to your partner: follow the led suit if you can (any card of it); if you
    #    are void in it, any card. You never have to beat your partner.
    if w_index == len(trick) - 2:
        return set(of_led_suit) if of_led_suit else set(hand)
    # 3. W belongs to an opponent and you hold the led suit: a card of the led suit that
    #    beats W if you have one; otherwise any card of the led suit (also when W is a trump).
    #    Obligada: otherwise your lowest card of the led suit, exactly one card.
    if of_led_suit:
        beating = [c for c in of_led_suit if c[0] == w[0] and stronger(c, w)]
        if beating:
            return set(beating)
        return {weakest(of_led_suit)} if obligada else set(of_led_suit)
    # 5. In butifarra (no trump), a player void in the led suit plays any card.
    if trump is BUTIFARRA:
        return set(hand)
    # 4. Void in the led suit: beat W if you can (any trump if W is not a trump, a higher
    #    trump if it is); if you cannot, any card (under-trumping is never required).
    trumps = [card for card in hand if card[0] == trump]
    if w[0] == trump:
        beating = [c for c in trumps if stronger(c, w)]
    else:
        beating = trumps
    return set(beating) if beating else set(hand)


def card_id(card: Card) -> int:
    """RULES.md: ``c = suit * 12 + (number - 1)``."""
    return card[0] * 12 + card[1] - 1


def as_card(card_id: int) -> Card:
    return card_id // 12, card_id % 12 + 1


def as_mask(cards: set[Card] | list[Card]) -> int:
    return sum(1 << card_id(card) for card in cards)


def as_cards(mask: int) -> set[Card]:
    return {as_card(c) for c in range(48) if (mask >> c) & 1}


def trump_code(trump: int | None) -> int:
    """The code's trump value: the suit, or 4 for butifarra (RULES.md action 52 - 48)."""
    return 4 if trump is BUTIFARRA else trump


# ------------------------------------------------------------------ the pure rule function
def code_legal_cards(
    hand: list[Card], trick: list[Card], trump: int | None, obligada: bool = False
) -> set[Card]:
    """``rules.legal_cards`` on the same position (W and who holds it from the oracle)."""
    if not trick:
        mask = rules.legal_cards(
            as_mask(hand), rules.NO_SUIT, -1, False, trump_code(trump), obligada
        )
    else:
        w_index = oracle_trick_winner(trick, trump)
        mask = rules.legal_cards(
            as_mask(hand),
            trick[0][0],
            card_id(trick[w_index]),
            w_index == len(trick) - 2,
            trump_code(trump),
            obligada,
        )
    return as_cards(mask)


def random_position(rng: random.Random) -> tuple[list[Card], list[Card], int | None]:
    """Any hand of 1-12 cards, any trick of 0-3 other cards, any trump or butifarra."""
    cards = rng.sample(DECK, 15)
    trick = cards[: rng.randrange(4)]
    hand = cards[3 : 3 + rng.randint(1, 12)]
    return hand, trick, rng.choice([0, 1, 2, 3, BUTIFARRA])


@pytest.mark.parametrize("obligada", [False, True], ids=["lliure", "obligada"])
def test_oracle_agrees_with_rules_legal_cards_on_random_positions(obligada: bool) -> None:
    rng = random.Random(2026)
    seen_rules = set()
    forced = 0  # obligada left one card where the default rules allow several
    for _ in range(20_000):
        hand, trick, trump = random_position(rng)
        expected = oracle_legal_cards(hand, trick, trump, obligada)
        assert code_legal_cards(hand, trick, trump, obligada) == expected, (hand, trick, trump)
        forced += len(expected) < len(oracle_legal_cards(hand, trick, trump))
        if trick:
            w_index = oracle_trick_winner(trick, trump)
            seen_rules.add(
                rules.legal_card_rule(
                    as_mask(hand),
                    trick[0][0],
                    card_id(trick[w_index]),
                    w_index == len(trick) - 2,
                    trump_code(trump),
                )
            )
    assert seen_rules == {2, 3, 4, 5}  # every rule of a trick in progress was exercised
    assert (forced > 500) if obligada else (forced == 0)


def test_oracle_agrees_with_rules_trick_winner() -> None:
    rng = random.Random(7)
    for _ in range(20_000):
        trick = rng.sample(DECK, rng.randint(1, 4))
        trump = rng.choice([0, 1, 2, 3, BUTIFARRA])
        ids = [card_id(card) for card in trick]
        assert rules.trick_winner(ids, trump_code(trump)) == oracle_trick_winner(trick, trump)


# ------------------------------------------------------------------ the engine, in play
@pytest.mark.parametrize("obligada", [False, True], ids=["lliure", "obligada"])
def test_oracle_agrees_with_the_game_along_random_hands(obligada: bool) -> None:
    """Every card decision of 400 random hands (all trumps, butifarra included): the legal
    set the Game offers is the oracle's, from the seat's hand and the trick on the table."""
    rng = np.random.default_rng(11)
    decisions = forced = 0
    options = Options(max_doubling_level=0, obligada=obligada)
    for h in range(400):
        dealer = h % 4
        game = Game(options, dealer, rules.random_deal(rng, dealer))
        game.step(48 + h % 5)  # oros, copas, espadas, bastos, butifarra in turn
        trump = BUTIFARRA if game.trump == 4 else game.trump
        while not game.is_over:
            seat = game.to_move
            leader = game.trick_leader
            trick = []
            if leader >= 0:
                for k in range(4):
                    c = game.trick_cards[(leader + k) % 4]
                    if c < 0:
                        break
                    trick.append(as_card(c))
            hand = sorted(as_cards(game.hands[seat]))
            expected = oracle_legal_cards(hand, trick, trump, obligada)
            assert as_cards(game.legal) == expected, (hand, trick, trump)
            assert as_cards(game.legal_cards(seat)) == expected
            decisions += 1
            forced += len(expected) < len(oracle_legal_cards(hand, trick, trump))
            legal = game.legal_actions()
            game.step(legal[int(rng.integers(len(legal)))])
        assert sum(game.team_points) == 72
    assert decisions == 400 * 48
    assert (forced > 1000) if obligada else (forced == 0)


# ------------------------------------------------------------------ hypothesis
@st.composite
def positions(draw: st.DrawFn) -> tuple[list[Card], list[Card], int | None]:
    cards = draw(st.permutations(DECK))
    n_trick = draw(st.integers(0, 3))
    n_hand = draw(st.integers(1, 12))
    trump = draw(st.sampled_from([0, 1, 2, 3, BUTIFARRA]))
    return cards[3 : 3 + n_hand], cards[:n_trick], trump


@settings(max_examples=500, deadline=None)
@given(positions(), st.booleans())
def test_oracle_agrees_with_rules_legal_cards_under_hypothesis(
    position: tuple[list[Card], list[Card], int | None], obligada: bool
) -> None:
    hand, trick, trump = position
    legal = oracle_legal_cards(hand, trick, trump, obligada)
    assert legal and legal <= set(hand)
    assert legal <= oracle_legal_cards(hand, trick, trump)  # obligada only ever narrows
    assert code_legal_cards(hand, trick, trump, obligada) == legal
