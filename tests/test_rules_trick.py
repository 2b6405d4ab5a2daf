"""The trick fold of the rules core (led suit, winning card, winning seat) and "partner is
winning", on tricks worked out by hand; and the two inlined copies of the fold (the engine's
``Game._play_card`` and the solver's ``Solver._search``, kept for speed, see
``benchmarks/bench_trick.py``) held to the function on many random tricks."""

from __future__ import annotations

import numpy as np
import pytest

from agents.double_dummy import Solver
from butifarra_env.core import rules
from butifarra_env.core.cards import POINTS, cards_of
from butifarra_env.core.game import Game
from butifarra_env.core.options import Options
from butifarra_env.core.rules import (
    EMPTY_TRICK,
    NO_SUIT,
    NO_TRUMP,
    PHASE_PLAY,
    add_to_trick,
    legal_cards,
    partner_winning,
    random_deal,
    trick_state,
)
from tests.helpers import cards

OROS, COPAS, ESPADAS, BASTOS = 0, 1, 2, 3


def plays(leader: int, text: str) -> list[tuple[int, int]]:
    """'1c 9c 2e' led by ``leader`` -> [(seat, card), ...] in playing order."""
    return [((leader + k) % 4, c) for k, c in enumerate(cards(text))]


def card(text: str) -> int:
    return cards(text)[0]


# ------------------------------------------------------------------ worked out by hand
def test_empty_trick_has_no_led_suit_no_winner() -> None:
    assert EMPTY_TRICK == (NO_SUIT, -1, -1)
    for trump in (OROS, NO_TRUMP):
        assert trick_state([], trump) == EMPTY_TRICK


def test_each_card_of_a_trick_in_turn() -> None:
    # Espadas trump, seat 1 leads the as de copas; seat 2's manilla de copas is higher; seat
    # 3 is void and trumps with the 2 de espadas; seat 0's rey de copas takes nothing.
    trick = plays(1, "1c 9c 2e 12c")
    expected = [
        (COPAS, card("1c"), 1),
        (COPAS, card("9c"), 2),
        (COPAS, card("2e"), 3),
        (COPAS, card("2e"), 3),
    ]
    state = EMPTY_TRICK
    for (seat, c), want in zip(trick, expected, strict=True):
        state = add_to_trick(state, seat, c, ESPADAS)
        assert state == want
    assert trick_state(trick, ESPADAS) == expected[-1]


@pytest.mark.parametrize(
    ("trump", "leader", "text", "want"),
    [
        # the same cards under butifarra: the 2 de espadas is no trump, the manilla wins
        (NO_TRUMP, 1, "1c 9c 2e 12c", (COPAS, "9c", 2)),
        # oros trump: nobody follows copas, the rey de oros (a trump) wins
        (OROS, 0, "7c 8b 2e 12o", (COPAS, "12o", 3)),
        # butifarra, nobody follows: the card led stands
        (NO_TRUMP, 0, "7c 8b 2e 12o", (COPAS, "7c", 0)),
        # bastos led and trump: the manilla over-takes the as, later cards are lower
        (BASTOS, 2, "1b 9b 12b 2o", (BASTOS, "9b", 3)),
        # oros trump: a trump takes copas, a lower trump (an under-trump) does not, nor does
        # the manilla of copas after a trump
        (OROS, 0, "5c 3o 2o 9c", (COPAS, "3o", 1)),
        # espadas trump led: an off-suit manilla never beats a trump
        (ESPADAS, 3, "2e 9o 9c 9b", (ESPADAS, "2e", 3)),
    ],
)
def test_trick_state_led_suit_winning_card_and_seat(
    trump: int, leader: int, text: str, want: tuple[int, str, int]
) -> None:
    led, win, seat = want
    assert trick_state(plays(leader, text), trump) == (led, card(win), seat)


def test_a_card_that_does_not_beat_leaves_the_state_as_it_was() -> None:
    state = (OROS, card("1o"), 2)
    assert add_to_trick(state, 3, card("12o"), COPAS) == state  # lower of the led suit
    assert add_to_trick(state, 3, card("9b"), COPAS) == state  # off suit, not trump
    assert add_to_trick(state, 3, card("2c"), COPAS) == (OROS, card("2c"), 3)  # a trump


def test_partner_winning_only_for_the_movers_team() -> None:
    same_team = {(0, 0), (0, 2), (2, 0), (2, 2), (1, 1), (1, 3), (3, 1), (3, 3)}
    for win_seat in range(4):
        for seat in range(4):
            assert partner_winning(win_seat, seat) == ((win_seat, seat) in same_team)
    for seat in range(4):
        assert partner_winning(-1, seat) is False  # empty trick: nobody is winning


def test_partner_winning_in_a_trick_worked_out_by_hand() -> None:
    # Espadas trump, seat 1 led 1c, seat 2 played 9c, seat 3 trumped with the 2 de espadas.
    _, _, win_seat = trick_state(plays(1, "1c 9c 2e"), ESPADAS)
    assert win_seat == 3
    assert not partner_winning(win_seat, 0)  # seat 0 must beat the trump if it can
    # Butifarra: the manilla de copas of seat 2 wins, seat 0 is its partner.
    _, _, win_seat = trick_state(plays(1, "1c 9c 2e"), NO_TRUMP)
    assert win_seat == 2 and partner_winning(win_seat, 0)


def test_trick_winner_is_the_index_of_the_fold_winner() -> None:
    assert rules.trick_winner(cards("1c 9c 2e 12c"), ESPADAS) == 2
    assert rules.trick_winner(cards("1c 9c 2e 12c"), NO_TRUMP) == 1
    assert rules.trick_winner([], OROS) == 0  # as before: index 0 for an empty trick


# ------------------------------------------------------------------ the inlined copies
@pytest.mark.parametrize("seed", range(4))
def test_game_keeps_the_trick_state_of_the_function(seed: int) -> None:
    """Random whole hands (bidding and doubling included): after every card the engine's
    led suit, winning card and seat are ``trick_state`` of the trick's plays, its legal
    cards use ``partner_winning``, and each finished trick's winner is the function's."""
    rng = np.random.default_rng(seed)
    for h in range(60):
        dealer = h % 4
        game = Game(Options(), dealer, random_deal(rng, dealer))
        trick: list[tuple[int, int]] = []
        while not game.is_over:
            legal = game.legal_actions()
            action = legal[rng.integers(len(legal))]
            seat, in_play = game.to_move, game.phase == PHASE_PLAY
            game.step(action)
            if not in_play:
                continue
            trick.append((seat, action))
            state = trick_state(trick, game.trump)
            if len(trick) == 4:
                assert game.tricks[-1][2] == state[2]
                assert (game.led_suit, game.win_card, game.win_seat) == EMPTY_TRICK
                trick = []
                continue
            assert (game.led_suit, game.win_card, game.win_seat) == state
            mover = game.to_move
            partner = partner_winning(state[2], mover)
            assert game.partner_winning(mover) == partner
            led, win, _ = state
            assert game.legal == legal_cards(game.hands[mover], led, win, partner, game.trump)


def minimax(hands: list[int], seat: int, trick: list[tuple[int, int]], trump: int) -> int:
    """Team A's points by plain minimax on the rules core's functions (no pruning)."""
    led, win, win_seat = trick_state(trick, trump)
    if len(trick) == 4:
        gain = sum(POINTS[c] for _, c in trick) + 1 if rules.team_of(win_seat) == 0 else 0
        return gain + (minimax(hands, win_seat, [], trump) if any(hands) else 0)
    legal = legal_cards(hands[seat], led, win, partner_winning(win_seat, seat), trump)
    values = []
    for c in cards_of(legal):
        h = list(hands)
        h[seat] ^= 1 << c
        values.append(minimax(h, rules.next_seat(seat), [*trick, (seat, c)], trump))
    return max(values) if rules.team_of(seat) == 0 else min(values)


@pytest.mark.parametrize("seed", range(40))
def test_solver_folds_tricks_as_the_function_does(seed: int) -> None:
    """Random endgames of 2-3 tricks, every trump, 0-3 cards on the table: the solver's
    values (its inlined fold at every node) equal minimax on ``trick_state``."""
    rng = np.random.default_rng(500 + seed)
    dealer = seed % 4
    game = Game(Options(max_doubling_level=0), dealer, random_deal(rng, dealer))
    game.step(48 + seed % 5)  # a suit, or butifarra (52)
    while len(game.tricks) < 10 - seed % 2:  # 2 or 3 tricks left
        legal = game.legal_actions()
        game.step(legal[rng.integers(len(legal))])
    trick: list[tuple[int, int]] = []
    for _ in range((seed // 2) % 4):  # 0-3 cards of the trick on the table
        legal = game.legal_actions()
        trick.append((game.to_move, legal[rng.integers(len(legal))]))
        game.step(trick[-1][1])
    solver = Solver(game.trump)
    want = minimax(list(game.hands), game.to_move, trick, game.trump)
    assert solver.solve(game.hands, game.to_move, trick) == want
    moves = solver.best_moves(game.hands, game.to_move, trick)
    assert set(moves) == set(game.legal_actions())
    for c, value in moves.items():
        h = list(game.hands)
        h[game.to_move] ^= 1 << c
        after = [*trick, (game.to_move, c)]
        assert value == minimax(h, rules.next_seat(game.to_move), after, game.trump)
