"""Card ids, strengths, points and the bitmask tables the rules are computed from.

A hand is a Python ``int`` whose bit ``c`` is set when the player holds card ``c``
(``c = suit * 12 + number - 1``, RULES.md). Every rule is then a handful of integer
operations on these masks; the batched engine uses the same tables as numpy arrays.
"""

from __future__ import annotations

import re

N_CARDS = 48
N_SUITS = 4
CARDS_PER_SUIT = 12
ALL_CARDS = (1 << N_CARDS) - 1

SUIT_NAMES = ("oros", "copas", "espadas", "bastos")
SUIT_LETTERS = ("o", "c", "e", "b")
SUIT_SYMBOLS = ("◆", "♥", "♠", "♣")  # only a visual cue in renders, not the real Spanish pips
NUMBER_NAMES = {1: "as", 9: "manilla", 10: "sota", 11: "caballo", 12: "rey"}

# Strength inside a suit, high to low (RULES.md): 9, 1, 12, 11, 10, 8, 7, 6, 5, 4, 3, 2.
STRENGTH_ORDER = (9, 1, 12, 11, 10, 8, 7, 6, 5, 4, 3, 2)
_NUMBER_STRENGTH = {n: len(STRENGTH_ORDER) - 1 - i for i, n in enumerate(STRENGTH_ORDER)}
_NUMBER_POINTS = {9: 5, 1: 4, 12: 3, 11: 2, 10: 1}

SUIT_MASK = tuple(((1 << CARDS_PER_SUIT) - 1) << (CARDS_PER_SUIT * s) for s in range(N_SUITS))


def card_id(suit: int, number: int) -> int:
    """The public id of ``number`` (1-12) of ``suit`` (0-3)."""
    if not 0 <= suit < N_SUITS:
        raise ValueError(f"suit must be 0-3 (oros, copas, espadas, bastos), got {suit!r}")
    if not 1 <= number <= CARDS_PER_SUIT:
        raise ValueError(f"number must be 1-12, got {number!r}")
    return suit * CARDS_PER_SUIT + number - 1


def suit_of(card: int) -> int:
    return card // CARDS_PER_SUIT


def number_of(card: int) -> int:
    return card % CARDS_PER_SUIT + 1


# Per-card tables (index = card id).
SUIT = tuple(c // CARDS_PER_SUIT for c in range(N_CARDS))
NUMBER = tuple(c % CARDS_PER_SUIT + 1 for c in range(N_CARDS))
STRENGTH = tuple(_NUMBER_STRENGTH[NUMBER[c]] for c in range(N_CARDS))
"""0 (the 2) .. 11 (the manilla), comparable only inside a suit."""
POINTS = tuple(_NUMBER_POINTS.get(NUMBER[c], 0) for c in range(N_CARDS))
BIT = tuple(1 << c for c in range(N_CARDS))
BEATS = tuple(
    sum(1 << d for d in range(N_CARDS) if SUIT[d] == SUIT[c] and STRENGTH[d] > STRENGTH[c])
    for c in range(N_CARDS)
)
"""``BEATS[c]``: the cards of c's own suit that are stronger than c."""
BELOW = tuple(
    sum(1 << d for d in range(N_CARDS) if SUIT[d] == SUIT[c] and STRENGTH[d] < STRENGTH[c])
    for c in range(N_CARDS)
)

TOTAL_CARD_POINTS = sum(POINTS)  # 60
N_TRICKS = 12
TOTAL_POINTS = TOTAL_CARD_POINTS + N_TRICKS  # 72
HALF_POINTS = TOTAL_POINTS // 2  # 36


def cards_of(mask: int) -> list[int]:
    """The card ids set in ``mask``, ascending."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def mask_of(cards: object) -> int:
    m = 0
    for c in cards:  # type: ignore[attr-defined]
        m |= 1 << int(c)
    return m


def sort_key(card: int) -> tuple[int, int]:
    """Suit order, then strongest first: how a player holds the cards in hand."""
    return (SUIT[card], -STRENGTH[card])


def card_name(card: int) -> str:
    """Short name used in renders and records, e.g. ``9o`` (manilla de oros), ``12b``."""
    if not 0 <= card < N_CARDS:
        raise ValueError(f"card id must be 0-47, got {card!r}")
    return f"{NUMBER[card]}{SUIT_LETTERS[SUIT[card]]}"


def card_long_name(card: int) -> str:
    n = NUMBER[card]
    word = NUMBER_NAMES.get(n, str(n))
    return f"{word} de {SUIT_NAMES[SUIT[card]]}"


_WORD_NUMBERS = {
    "as": 1,
    "ace": 1,
    "manilla": 9,
    "sota": 10,
    "caballo": 11,
    "cavall": 11,
    "rey": 12,
    "rei": 12,
    "dos": 2,
    "tres": 3,
    "cuatro": 4,
    "cinco": 5,
    "seis": 6,
    "siete": 7,
    "ocho": 8,
    "nueve": 9,
}
_SUIT_WORDS = {
    "o": 0,
    "oro": 0,
    "oros": 0,
    "c": 1,
    "copa": 1,
    "copas": 1,
    "e": 2,
    "espada": 2,
    "espadas": 2,
    "b": 3,
    "basto": 3,
    "bastos": 3,
}


def parse_card(text: str) -> int:
    """Read a card written as ``9o``, ``1c``, ``12 b``, ``rey de bastos`` or ``manilla oros``.

    Raises ValueError with the accepted forms when the text is not a card.
    """
    t = text.strip().lower()
    m = re.fullmatch(r"(\d{1,2})\s*(?:de\s+)?([a-z]+)", t) or re.fullmatch(
        r"([a-z]+)\s+(?:de\s+)?([a-z]+)", t
    )
    if m:
        num_txt, suit_txt = m.groups()
        number = int(num_txt) if num_txt.isdigit() else _WORD_NUMBERS.get(num_txt)
        suit = _SUIT_WORDS.get(suit_txt)
        if number is not None and suit is not None and 1 <= number <= 12:
            return card_id(suit, number)
    raise ValueError(
        f"not a card: {text!r}. Write number+suit letter (9o, 1c, 12b, 10e), or words "
        "('rey de bastos', 'manilla de oros'); suits: oros, copas, espadas, bastos"
    )
