"""Position builders shared by the rules and search tests, and the random deals and actions
that drive both batched engines in their differential tests."""

from __future__ import annotations

import numpy as np

from butifarra_env.core.actions import BUTIFARRA, DOUBLE, PASS, TRUMP_BASE
from butifarra_env.core.cards import N_CARDS, cards_of, mask_of, parse_card
from butifarra_env.core.game import Game
from butifarra_env.core.options import Options
from butifarra_env.core.rules import N_SEATS, NO_TRUMP, random_deal


def cards(text: str) -> list[int]:
    """'9o 1o 12c' -> card ids."""
    return [parse_card(t) for t in text.split()]


def play_position(
    trump: int, leader: int, trick: str = "", hands: dict[int, str] | None = None
) -> Game:
    """A game in the play phase: ``trump`` (0-3 or NO_TRUMP) chosen, ``leader`` has led and
    the cards of ``trick`` lie on the table in playing order; ``hands`` fixes the cards the
    given seats still hold (the seat to move is the one whose legal set a test checks).

    The trick is laid with the engine's own transition (``_play_card``), so winners, voids
    and turn order come from the code under test; only the hands are set by hand.
    """
    dealer = (leader - 1) % 4
    game = Game(Options(max_doubling_level=0), dealer, random_deal(np.random.default_rng(0), 0))
    game.step(BUTIFARRA if trump == NO_TRUMP else TRUMP_BASE + trump)
    on_table = cards(trick)
    for s, text in (hands or {}).items():
        game.hands[s] = mask_of(cards(text))
    for i, c in enumerate(on_table):
        seat = (leader + i) % 4
        game.hands[seat] |= 1 << c
        game.to_move = seat
        game._play_card(seat, c)
    game.legal = game.legal_cards(game.to_move)  # the hands were set after the engine's cache
    return game


def legal_cards(game: Game) -> set[int]:
    return set(cards_of(game.legal))


def endgame(seed: int, tricks_left: int) -> tuple[Game, list[tuple[int, int]]]:
    """A random hand played at random down to ``tricks_left`` tricks, with 0-3 cards of the
    current trick on the table."""
    rng = np.random.default_rng(seed)
    game = Game(Options(max_doubling_level=0), seed % 4, random_deal(rng, seed % 4))
    game.step(48 + seed % 5)  # every trump, butifarra (52) included
    while len(game.tricks) < 12 - tricks_left:
        legal = game.legal_actions()
        game.step(legal[rng.integers(len(legal))])
    trick = []
    for _ in range(seed % 4):
        seat, legal = game.to_move, game.legal_actions()
        card = legal[rng.integers(len(legal))]
        game.step(card)
        trick.append((seat, card))
    return game, trick


def random_deals(rng: np.random.Generator, k: int) -> np.ndarray:
    """``k`` uniform deals, ``(k, 4, 12)`` card ids."""
    return np.stack([rng.permutation(N_CARDS).reshape(N_SEATS, 12) for _ in range(k)])


def choose_batch_actions(rng: np.random.Generator, mask: np.ndarray, p_double: float) -> np.ndarray:
    """A random legal action per env; when doubling is open, double with ``p_double``."""
    keys = rng.random(mask.shape) * mask
    can = mask[:, DOUBLE] == 1
    dbl = rng.random(len(mask)) < p_double
    keys[can & dbl, DOUBLE] = 2.0
    keys[can & ~dbl, PASS] = 2.0
    return keys.argmax(axis=1)
