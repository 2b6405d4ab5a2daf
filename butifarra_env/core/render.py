"""Text rendering of a hand: one seat's view (for human play) or the whole table."""

from __future__ import annotations

from butifarra_env.core.actions import DOUBLING_NAMES
from butifarra_env.core.cards import (
    NUMBER,
    SUIT_MASK,
    SUIT_NAMES,
    card_name,
    cards_of,
    sort_key,
)
from butifarra_env.core.game import Game
from butifarra_env.core.rules import (
    N_SEATS,
    NO_TRUMP,
    PHASE_NAMES,
    PHASE_PLAY,
    TRUMP_UNSET,
)

TEAM_NAMES = ("A (0+2)", "B (1+3)")


def trump_text(game: Game) -> str:
    if game.trump == TRUMP_UNSET:
        return "not chosen yet"
    name = "butifarra (no trump)" if game.trump == NO_TRUMP else SUIT_NAMES[game.trump]
    how = ", delegated" if game.delegated else ""
    return f"{name} (chosen by player_{game.chooser}{how})"


def hand_lines(hand: int, legal: int = 0) -> list[str]:
    """One line per suit, strongest first; legal cards marked with ``*``."""
    lines = []
    for s in range(len(SUIT_NAMES)):
        cards = sorted(cards_of(hand & SUIT_MASK[s]), key=sort_key)
        shown = " ".join(f"{NUMBER[c]}{'*' if (legal >> c) & 1 else ''}" for c in cards)
        lines.append(f"  {SUIT_NAMES[s]:<8}{shown or '-'}")
    return lines


def render_text(game: Game, seat: int | None = None, target_score: int | None = None) -> str:
    """A readable table. ``seat`` shows only that player's hand (legal cards starred);
    ``None`` shows all four hands (a spectator's or debugger's view)."""
    lines = [
        f"Butifarra · hand {game.hand_number + 1} · dealer player_{game.dealer} · "
        f"mano player_{(game.dealer + 1) % N_SEATS}",
        f"Trump: {trump_text(game)}",
        f"Multiplier: x{game.multiplier} ({DOUBLING_NAMES[game.level]})"
        if game.trump != TRUMP_UNSET
        else "Multiplier: -",
    ]
    to_move = "-" if game.to_move < 0 else f"player_{game.to_move}"
    lines.append(f"Phase: {PHASE_NAMES[game.phase]} · to move: {to_move}")
    lines.append(
        f"Tricks: {TEAM_NAMES[0]} {game.team_tricks[0]}, {TEAM_NAMES[1]} {game.team_tricks[1]} · "
        f"Points: A {game.team_points[0]}, B {game.team_points[1]}"
    )
    if target_score is not None:
        lines.append(
            f"Match: A {game.match_scores[0]}, B {game.match_scores[1]} (target {target_score})"
        )
    if game.phase == PHASE_PLAY:
        lines.append(f"Trick {len(game.tricks) + (game.phase == PHASE_PLAY)}: " + _trick(game))
    if game.tricks and game.cards_in_trick == 0:
        leader, cards, winner = game.tricks[-1]
        order = [(leader + i) % N_SEATS for i in range(N_SEATS)]
        shown = ", ".join(f"p{s} {card_name(cards[s])}" for s in order)
        lines.append(f"Last trick: {shown} -> won by player_{winner}")
    seats = range(N_SEATS) if seat is None else (seat,)
    for s in seats:
        legal = game.legal if s == game.to_move and game.phase == PHASE_PLAY else 0
        lines.append(f"Hand of player_{s} (team {'AB'[s & 1]}):")
        lines.extend(hand_lines(game.hands[s], legal))
    if game.scores is not None:
        a, b = game.scores
        lines.append(f"Hand over: scores A {a}, B {b}")
    return "\n".join(lines)


def _trick(game: Game) -> str:
    if game.cards_in_trick == 0:
        return "(empty)"
    out = []
    for i in range(game.cards_in_trick):
        s = (game.trick_leader + i) % N_SEATS
        c = game.trick_cards[s]
        mark = " (winning)" if s == game.win_seat else ""
        out.append(f"player_{s} {card_name(c)}{mark}")
    return ", ".join(out)


__all__ = ["render_text", "hand_lines", "trump_text"]
