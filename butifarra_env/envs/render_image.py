"""Pictures of the table: one RGB image of a hand in progress, for videos and notebooks.

:func:`render_table` draws, with Pillow, the four hands (face up, or face down for the seats a
player cannot see), the trick on the table (its winning card ringed), trump, the doubling
level and multiplier, team tricks and points, whose turn it is, the last trick, and the match
score in match mode. Cards show their number and Spanish suit letter (o, c, e, b) in the suit's
colour, with a drawn pip: a coin, a cup, a sword, a club.

Speed matters because a video records a frame per step: Pillow draws every piece once per
process (the felt with its fixed panels and captions, every card face, the card back, each
string and name plate the first time it is needed) and a frame is a few dozen numpy slice
copies of those pieces into a copy of the background, with no text rendering and no image
conversion (``benchmarks/bench_render.py`` measures ms per frame). Pillow is imported on first
use only, so environments that never render in ``rgb_array`` mode never load it.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from butifarra_env.core.actions import DOUBLING_NAMES
from butifarra_env.core.cards import (
    N_CARDS,
    NUMBER,
    SUIT,
    SUIT_LETTERS,
    SUIT_NAMES,
    cards_of,
    sort_key,
)
from butifarra_env.core.game import Game
from butifarra_env.core.rules import (
    N_SEATS,
    NO_TRUMP,
    PHASE_CHOOSE_TRUMP,
    PHASE_CHOOSE_TRUMP_DELEGATED,
    PHASE_DOUBLING,
    PHASE_PLAY,
    TRUMP_UNSET,
)

if TYPE_CHECKING:
    from PIL import Image, ImageFont

__all__ = ["HEIGHT", "WIDTH", "render_table"]

WIDTH, HEIGHT = 960, 720
"""Frame size: both multiples of 16, so video encoders take frames as they are."""

# Colours (RGB).
FELT = (22, 92, 60)
FELT_DARK = (14, 64, 42)
PANEL = (10, 48, 32)
TEXT = (236, 240, 232)
MUTED = (160, 190, 170)
HIGHLIGHT = (255, 208, 64)
SUIT_COLOURS = ((196, 140, 0), (198, 40, 40), (21, 101, 192), (46, 125, 50))  # o, c, e, b
TEAM_COLOURS = ((120, 190, 255), (255, 150, 120))  # A (0+2), B (1+3)
CARD_EDGE = (70, 70, 70)

CARD = (56, 84)  # hands and the trick
MINI = (34, 51)  # the last trick
STEP = 42  # horizontal distance between overlapping cards in the top and bottom hands
SIDE_STEP = 36  # ... in the side hands (two rows of six)
RAISE = 12  # legal cards of the seat to move stand out by this much

# Where each table position (0 bottom, 1 right, 2 top, 3 left) puts its hand, label and trick
# card. Position p shows seat (bottom_seat + p) % 4: play goes bottom, right, top, left.
_HAND_TOP_BOTTOM_X = (WIDTH - (11 * STEP + CARD[0])) // 2
_SIDE_W = 5 * SIDE_STEP + CARD[0]
_SIDE_ROW = CARD[1] + RAISE + 6  # the second row of a side hand
_HAND_ORIGIN = (
    (_HAND_TOP_BOTTOM_X, HEIGHT - CARD[1] - 14),
    (WIDTH - 16 - _SIDE_W, 290),
    (_HAND_TOP_BOTTOM_X, 72),
    (16, 290),
)
_LABEL_XY = (
    (_HAND_TOP_BOTTOM_X, HEIGHT - CARD[1] - 14 - RAISE - 24),
    (WIDTH - 16 - _SIDE_W, 256),
    (_HAND_TOP_BOTTOM_X, 44),
    (16, 256),
)
_CENTRE = (WIDTH // 2, 360)
_TRICK_XY = (
    (_CENTRE[0] - CARD[0] // 2, _CENTRE[1] + 8),
    (_CENTRE[0] + 40, _CENTRE[1] - CARD[1] // 2),
    (_CENTRE[0] - CARD[0] // 2, _CENTRE[1] - CARD[1] - 8),
    (_CENTRE[0] - 40 - CARD[0], _CENTRE[1] - CARD[1] // 2),
)
_POSITION_NAMES = ("you", "right", "partner", "left")
_INFO_BOX = (10, 46, _HAND_TOP_BOTTOM_X - 12, 250)  # trump, multiplier, phase
_MATCH_BOX = (WIDTH - _HAND_TOP_BOTTOM_X + 12, 46, WIDTH - 10, 250)  # tricks, points, match
_COL_TRICKS, _COL_POINTS = 132, 186  # right edges of the score columns in the right panel
_LAST_BOX = (10, HEIGHT - 122, _HAND_TOP_BOTTOM_X - 12, HEIGHT - 10)  # the last trick


def render_table(
    game: Game, seat: int | None = None, *, reveal: bool = False, target_score: int | None = None
) -> np.ndarray:
    """A ``(720, 960, 3)`` ``uint8`` picture of ``game`` (a fresh array).

    ``seat`` None: a spectator's view, ``player_0`` at the bottom and all four hands face up.
    ``seat`` s: that player's view, s at the bottom; the other hands are face down unless
    ``reveal``. ``target_score`` (match mode) adds the match score.
    """
    return _artist().draw(game, seat, reveal, target_score)


@functools.cache
def _artist() -> _Artist:
    return _Artist()


Sprite = tuple[np.ndarray, tuple[tuple[int, int, int, int], ...]]
"""A cached piece: RGB pixels (h, w, 3) and the rectangles (top, bottom, left, right) it
covers, which together are exactly its opaque pixels (a rounded card is one block and a few
rows per corner). Copying those rectangles is a few plain slice copies, where a masked copy
costs ten times more. Text is anti-aliased onto the plate it sits on when it is drawn, so no
frame blends colours."""


class _Artist:
    """The cached pieces and the drawing of a frame.

    Pillow draws every piece once (card faces and back, the background with its fixed panels
    and captions, each string on the plate it sits on, the seats' name plates); a frame is
    then numpy copies of those pieces into a copy of the background: about 60 small copies and
    no text rendering (FreeType costs ~0.4 ms a string) or image conversion."""

    def __init__(self) -> None:
        from PIL import Image, ImageDraw

        self.Image = Image
        self.ImageDraw = ImageDraw
        self.fonts = {"text": _font(15, False), "bold": _font(15, True), "big": _font(20, True)}
        face_fonts = _font(21, True), _font(13, True)
        mini_fonts = _font(14, True), _font(10, True)
        self.faces = [_sprite(_card_face(c, CARD, *face_fonts)) for c in range(N_CARDS)]
        self.minis = [_sprite(_card_face(c, MINI, *mini_fonts)) for c in range(N_CARDS)]
        self.back = _sprite(_card_back(CARD))
        self.pips = [_sprite(self._on_panel(_pip(s, 20))) for s in range(4)]
        self.ring = self._ring(CARD, 4, 9)
        self.mini_ring = self._ring(MINI, 3, 6)
        self.stamps: dict[tuple[Any, ...], Sprite] = {}
        self.plates: dict[tuple[Any, ...], Sprite] = {}
        self.background = self._background()

    def _on_panel(self, img: Image.Image) -> Image.Image:
        plate = self.Image.new("RGBA", img.size, PANEL + (255,))
        return self.Image.alpha_composite(plate, img)

    def _ring(self, size: tuple[int, int], pad: int, radius: int) -> Sprite:
        """The highlight behind a winning card: a rounded plate ``pad`` pixels wider."""
        w, h = size[0] + 2 * pad, size[1] + 2 * pad
        img = self.Image.new("RGBA", (w, h))
        self.ImageDraw.Draw(img).rounded_rectangle((0, 0, w - 1, h - 1), radius, fill=HIGHLIGHT)
        return _sprite(img)

    def _background(self) -> np.ndarray:
        img = self.Image.new("RGB", (WIDTH, HEIGHT), FELT)
        d = self.ImageDraw.Draw(img)
        d.ellipse((150, 150, WIDTH - 150, HEIGHT - 140), fill=FELT_DARK)
        d.rectangle((0, 0, WIDTH, 36), fill=PANEL)
        for box in (_INFO_BOX, _MATCH_BOX, _LAST_BOX):
            d.rounded_rectangle(box, radius=10, fill=PANEL)
        frame = np.array(img)
        x, y = _INFO_BOX[0] + 10, _INFO_BOX[1] + 8
        for dy, text in ((0, "Trump"), (76, "Multiplier"), (130, "Phase")):
            self.text(frame, (x, y + dy), text, "text", MUTED)
        x, y = _MATCH_BOX[0] + 10, _MATCH_BOX[1] + 8
        self.text(frame, (x, y), "This hand", "text", MUTED)
        self.text(frame, (x + _COL_TRICKS, y), "tricks", "text", MUTED, anchor="ra")
        self.text(frame, (x + _COL_POINTS, y), "points", "text", MUTED, anchor="ra")
        for team in range(2):
            team_name = f"Team {'AB'[team]}"
            self.text(frame, (x, y + 22 + team * 24), team_name, "bold", TEAM_COLOURS[team])
        self.text(frame, (x, y + 72), "A: player_0 + player_2", "text", MUTED)
        self.text(frame, (x, y + 90), "B: player_1 + player_3", "text", MUTED)
        self.text(frame, (_LAST_BOX[0] + 10, _LAST_BOX[1] + 6), "Last trick", "bold", MUTED)
        frame.flags.writeable = False  # every frame starts from a copy
        return frame

    def text(
        self,
        frame: np.ndarray,
        xy: tuple[float, float],
        text: str,
        font: str,
        colour: tuple[int, int, int],
        anchor: str = "la",
        plate: tuple[int, int, int] = PANEL,
    ) -> None:
        """Put ``text`` at ``xy`` on a ``plate``-coloured area: ``anchor`` "la" (left, top),
        "ra" (right, top) or "mm" (centred), as Pillow's anchors."""
        key = (text, font, colour, plate)
        stamp = self.stamps.get(key)
        if stamp is None:
            f = self.fonts[font]
            _, _, right, bottom = f.getbbox(text)
            img = self.Image.new("RGB", (max(1, int(right)), max(1, int(bottom))), plate)
            self.ImageDraw.Draw(img).text((0, 0), text, font=f, fill=colour)
            rgb = np.array(img)
            stamp = self.stamps[key] = (rgb, ((0, rgb.shape[0], 0, rgb.shape[1]),))
        h, w = stamp[0].shape[:2]
        x, y = xy
        if anchor == "ra":
            x -= w
        elif anchor == "mm":
            x -= w / 2
            y -= h / 2 + 1
        _blit(frame, int(x), int(y), stamp)

    # ------------------------------------------------------------------ a frame
    def draw(
        self, game: Game, seat: int | None, reveal: bool, target_score: int | None
    ) -> np.ndarray:
        frame = self.background.copy()
        bottom = 0 if seat is None else seat
        for pos in range(N_SEATS):
            s = (bottom + pos) % N_SEATS
            face_up = seat is None or reveal or s == seat
            self._hand(frame, game, s, pos, face_up)
            self._label(frame, game, s, pos, seat)
        self._trick(frame, game, bottom)
        self._header(frame, game)
        self._info(frame, game)
        self._scores(frame, game, target_score)
        self._last_trick(frame, game)
        return frame

    def _hand(self, frame: np.ndarray, game: Game, s: int, pos: int, face_up: bool) -> None:
        cards = sorted(cards_of(game.hands[s]), key=sort_key)
        legal = game.legal if s == game.to_move and game.phase == PHASE_PLAY else 0
        x0, y0 = _HAND_ORIGIN[pos]
        side = pos in (1, 3)
        for i, c in enumerate(cards):
            if side:
                x, y = x0 + (i % 6) * SIDE_STEP, y0 + (i // 6) * _SIDE_ROW
            else:
                x, y = x0 + i * STEP, y0
            if not face_up:
                _blit(frame, x, y, self.back)
            elif (legal >> c) & 1:
                _blit(frame, x, y - RAISE, self.faces[c])
            else:
                _blit(frame, x, y, self.faces[c])

    def _label(self, frame: np.ndarray, game: Game, s: int, pos: int, viewer: int | None) -> None:
        name = f"player_{s}" if viewer is None else f"{_POSITION_NAMES[pos]} (player_{s})"
        tags = []
        if s == game.dealer:
            tags.append("dealer")
        if s == game.chooser:
            tags.append("chose trump")
        text = name + ("  · " + ", ".join(tags) if tags else "")
        moving = s == game.to_move
        key = ("label", text, s & 1, moving)
        label = self.plates.get(key)
        if label is None:
            label = self.plates[key] = self._make_label(text, s & 1, moving)
        x, y = _LABEL_XY[pos]
        _blit(frame, min(x, WIDTH - 10 - label[0].shape[1]), y, label)  # inside the frame

    def _make_label(self, text: str, team: int, moving: bool) -> Sprite:
        """A seat's name plate: team badge, name, tags; yellow for the seat to move."""
        font = self.fonts["bold"]
        width = int(font.getlength(text)) + 36
        img = self.Image.new("RGBA", (width, 24))
        d = self.ImageDraw.Draw(img)
        d.rounded_rectangle((0, 0, width - 1, 23), radius=8, fill=HIGHLIGHT if moving else PANEL)
        d.rounded_rectangle((4, 4, 19, 19), radius=4, fill=TEAM_COLOURS[team])
        d.text((12, 12), "AB"[team], font=font, fill=PANEL, anchor="mm")
        d.text((27, 12), text, font=font, fill=PANEL if moving else TEXT, anchor="lm")
        return _sprite(img)

    def _box(self, frame: np.ndarray, text: str, fg: Any, bg: Any) -> None:
        """A message on a rounded plate in the middle of the table (bidding, the result)."""
        key = ("box", text, fg, bg)
        box = self.plates.get(key)
        if box is None:
            font = self.fonts["big"]
            w = int(font.getlength(text)) + 32
            img = self.Image.new("RGBA", (w, 40))
            d = self.ImageDraw.Draw(img)
            d.rounded_rectangle((0, 0, w - 1, 39), radius=10, fill=bg)
            d.text((w / 2, 20), text, font=font, fill=fg, anchor="mm")
            box = self.plates[key] = _sprite(img)
        h, w = box[0].shape[:2]
        _blit(frame, _CENTRE[0] - w // 2, _CENTRE[1] - h // 2, box)

    def _trick(self, frame: np.ndarray, game: Game, bottom: int) -> None:
        if game.scores is not None:
            a, b = game.scores
            self._box(frame, f"Hand over:  A {a}  ·  B {b}", PANEL, HIGHLIGHT)
            return
        if game.phase != PHASE_PLAY:
            self._box(frame, _bidding_message(game), HIGHLIGHT, PANEL)
            return
        for pos in range(N_SEATS):
            s = (bottom + pos) % N_SEATS
            c = game.trick_cards[s]
            if c < 0:
                continue
            x, y = _TRICK_XY[pos]
            if s == game.win_seat:
                _blit(frame, x - 4, y - 4, self.ring)
            _blit(frame, x, y, self.faces[c])

    def _header(self, frame: np.ndarray, game: Game) -> None:
        left = f"BUTIFARRA    hand {game.hand_number + 1}    dealer player_{game.dealer}"
        self.text(frame, (12, 10), left, "bold", TEXT)
        if game.to_move >= 0:
            right = f"to move: player_{game.to_move}"
            self.text(frame, (WIDTH - 12, 10), right, "bold", HIGHLIGHT, anchor="ra")

    def _info(self, frame: np.ndarray, game: Game) -> None:
        x, y = _INFO_BOX[0] + 10, _INFO_BOX[1] + 8
        if game.trump == TRUMP_UNSET:
            self.text(frame, (x, y + 22), "not chosen yet", "big", TEXT)
        elif game.trump == NO_TRUMP:
            self.text(frame, (x, y + 22), "BUTIFARRA", "big", HIGHLIGHT)
        else:
            _blit(frame, x, y + 23, self.pips[game.trump])
            suit = SUIT_NAMES[game.trump].upper()
            self.text(frame, (x + 26, y + 22), suit, "big", _light(game.trump))
        if game.chooser >= 0:
            how = " (delegated)" if game.delegated else ""
            self.text(frame, (x, y + 48), f"by player_{game.chooser}{how}", "text", TEXT)
        if game.trump == TRUMP_UNSET:
            self.text(frame, (x, y + 98), "-", "big", TEXT)
        else:
            self.text(frame, (x, y + 98), f"x{game.multiplier}", "big", TEXT)
            level = DOUBLING_NAMES[game.level] if game.level else "no doubling"
            self.text(frame, (x + 56, y + 102), level, "text", TEXT)
        phase = "hand over" if game.scores is not None else _PHASES[game.phase]
        self.text(frame, (x, y + 152), phase, "bold", TEXT)

    def _scores(self, frame: np.ndarray, game: Game, target_score: int | None) -> None:
        x, y = _MATCH_BOX[0] + 10, _MATCH_BOX[1] + 8
        for team in range(2):
            ty = y + 22 + team * 24
            tricks, points = str(game.team_tricks[team]), str(game.team_points[team])
            self.text(frame, (x + _COL_TRICKS, ty), tricks, "bold", TEXT, anchor="ra")
            self.text(frame, (x + _COL_POINTS, ty), points, "bold", TEXT, anchor="ra")
        if target_score is None:
            return
        self.text(frame, (x, y + 122), f"Match, to {target_score}", "text", MUTED)
        for team in range(2):
            ty = y + 144 + team * 24
            self.text(frame, (x, ty), f"Team {'AB'[team]}", "bold", TEAM_COLOURS[team])
            score = str(game.match_scores[team])
            self.text(frame, (x + _COL_TRICKS, ty), score, "bold", TEXT, anchor="ra")

    def _last_trick(self, frame: np.ndarray, game: Game) -> None:
        if not game.tricks:
            return
        leader, cards, winner = game.tricks[-1]
        x, y = _LAST_BOX[0] + 12, _LAST_BOX[1] + 30
        for i in range(N_SEATS):  # in playing order, the leader first
            s = (leader + i) % N_SEATS
            cx = x + i * (MINI[0] + 12)
            if s == winner:
                _blit(frame, cx - 3, y - 3, self.mini_ring)
            _blit(frame, cx, y, self.minis[cards[s]])
            self.text(frame, (cx + MINI[0] / 2, y + MINI[1] + 14), f"p{s}", "text", TEXT, "mm")


def _sprite(img: Image.Image) -> Sprite:
    """An RGBA piece as a :data:`Sprite`: covering where its alpha is not 0, which must be one
    run of columns per row (true of the rounded plates and cards drawn here)."""
    rgba = np.array(img.convert("RGBA"))
    rects: list[tuple[int, int, int, int]] = []
    for row, covered in enumerate(rgba[:, :, 3] > 0):
        cols = np.flatnonzero(covered)
        if cols.size == 0:
            continue
        left, right = int(cols[0]), int(cols[-1]) + 1
        if right - left != cols.size:
            raise ValueError("a sprite must cover one run of columns per row")
        if rects and rects[-1][1] == row and rects[-1][2:] == (left, right):
            rects[-1] = (rects[-1][0], row + 1, left, right)  # same run as the row above
        else:
            rects.append((row, row + 1, left, right))
    return np.ascontiguousarray(rgba[:, :, :3]), tuple(rects)


def _blit(frame: np.ndarray, x: int, y: int, sprite: Sprite) -> None:
    """Copy ``sprite`` into ``frame`` with its top-left corner at (x, y). Every position the
    layout uses lies inside the frame; anything else would be a layout bug, so it is not
    clipped but refused by numpy's shape check."""
    rgb, rects = sprite
    for top, bottom, left, right in rects:
        frame[y + top : y + bottom, x + left : x + right] = rgb[top:bottom, left:right]


_PHASES = {
    PHASE_CHOOSE_TRUMP: "choosing trump",
    PHASE_CHOOSE_TRUMP_DELEGATED: "trump (delegated)",
    PHASE_DOUBLING: "doubling",
    PHASE_PLAY: "play",
}


def _bidding_message(game: Game) -> str:
    if game.scores is not None:
        return ""
    if game.phase == PHASE_CHOOSE_TRUMP:
        return f"player_{game.to_move} chooses trump or delegates"
    if game.phase == PHASE_CHOOSE_TRUMP_DELEGATED:
        return f"player_{game.to_move} chooses trump (delegated)"
    if game.phase == PHASE_DOUBLING:
        nxt = DOUBLING_NAMES[game.level + 1]
        return f"player_{game.to_move}: {nxt} or pass?"
    return ""


def _light(suit: int) -> tuple[int, int, int]:
    """The suit colour lightened, readable on the dark panels."""
    r, g, b = SUIT_COLOURS[suit]
    return (min(255, r + 70), min(255, g + 70), min(255, b + 70))


# ---------------------------------------------------------------------- cached pieces
def _font(size: int, bold: bool) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """DejaVu Sans where the system has it, else the font bundled with Pillow."""
    from PIL import ImageFont

    name = "DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf"
    try:
        return ImageFont.truetype(name, size)
    except OSError:
        return ImageFont.load_default(size=size)


def _card_face(card: int, size: tuple[int, int], number_font: Any, letter_font: Any) -> Image.Image:
    """A white card: number and suit letter in the top-left corner (the part that shows when
    cards overlap), the suit's pip below them and the number again, upside down."""
    from PIL import Image, ImageDraw

    w, h = size
    img = Image.new("RGBA", size, (0, 0, 0, 0))
    d = ImageDraw.Draw(img)
    suit = SUIT[card]
    colour = SUIT_COLOURS[suit]
    radius = max(4, w // 8)
    d.rounded_rectangle(
        (0, 0, w - 1, h - 1), radius=radius, fill=(255, 255, 250), outline=CARD_EDGE
    )
    d.rounded_rectangle((2, 2, w - 3, h - 3), radius=radius - 1, outline=colour, width=2)
    number = str(NUMBER[card])
    d.text((5, 3), number, font=number_font, fill=colour)
    nh = number_font.size if hasattr(number_font, "size") else 12
    d.text((6, 4 + nh), SUIT_LETTERS[suit], font=letter_font, fill=colour)
    pip_size = w // 2
    pip = _pip(suit, pip_size)
    img.alpha_composite(pip, (w - pip_size - 4, h - pip_size - 6))
    return img


def _card_back(size: tuple[int, int]) -> Image.Image:
    """A red lattice in a white frame, cut to the card's rounded outline."""
    from PIL import Image, ImageDraw

    w, h = size
    radius = max(4, w // 8)
    img = Image.new("RGBA", size, (150, 30, 40, 255))
    d = ImageDraw.Draw(img)
    for k in range(-h, w, 8):  # a diagonal lattice
        d.line((k, 0, k + h, h), fill=(185, 70, 70), width=1)
        d.line((k + h, 0, k, h), fill=(185, 70, 70), width=1)
    d.rounded_rectangle((0, 0, w - 1, h - 1), radius=radius, outline=(250, 250, 245), width=5)
    d.rounded_rectangle((0, 0, w - 1, h - 1), radius=radius, outline=CARD_EDGE)
    outline = Image.new("L", size, 0)
    ImageDraw.Draw(outline).rounded_rectangle((0, 0, w - 1, h - 1), radius=radius, fill=255)
    img.putalpha(outline)
    return img


def _pip(suit: int, size: int) -> Image.Image:
    """The suit's sign drawn in its colour: oros a coin, copas a cup, espadas a sword,
    bastos a club. Drawn at 4x and scaled down, for smooth edges."""
    from PIL import Image, ImageDraw

    k = 4
    s = size * k
    img = Image.new("RGBA", (s, s), (0, 0, 0, 0))
    d = ImageDraw.Draw(img)
    c = SUIT_COLOURS[suit] + (255,)
    dark = tuple(int(v * 0.6) for v in SUIT_COLOURS[suit]) + (255,)
    if suit == 0:  # oros: a coin with a ring
        d.ellipse((s * 0.06, s * 0.06, s * 0.94, s * 0.94), fill=c, outline=dark, width=s // 14)
        d.ellipse((s * 0.3, s * 0.3, s * 0.7, s * 0.7), outline=dark, width=s // 16)
    elif suit == 1:  # copas: bowl, stem, foot
        d.pieslice((s * 0.1, -s * 0.25, s * 0.9, s * 0.6), 0, 180, fill=c)
        d.rectangle((s * 0.1, s * 0.08, s * 0.9, s * 0.17), fill=dark)
        d.rectangle((s * 0.44, s * 0.55, s * 0.56, s * 0.8), fill=c)
        d.ellipse((s * 0.25, s * 0.76, s * 0.75, s * 0.94), fill=c)
    elif suit == 2:  # espadas: blade, guard, grip
        d.polygon([(s * 0.5, s * 0.02), (s * 0.58, s * 0.14), (s * 0.58, s * 0.66),
                   (s * 0.42, s * 0.66), (s * 0.42, s * 0.14)], fill=c)  # fmt: skip
        d.rectangle((s * 0.22, s * 0.66, s * 0.78, s * 0.74), fill=dark)
        d.rectangle((s * 0.45, s * 0.74, s * 0.55, s * 0.9), fill=dark)
        d.ellipse((s * 0.4, s * 0.86, s * 0.6, s * 0.99), fill=dark)
    else:  # bastos: a knotty club, thick at the top
        d.polygon([(s * 0.3, s * 0.05), (s * 0.62, s * 0.02), (s * 0.6, s * 0.95),
                   (s * 0.44, s * 0.97)], fill=c)  # fmt: skip
        for kx, ky in ((0.3, 0.28), (0.6, 0.45), (0.38, 0.62)):
            d.ellipse(
                (s * (kx - 0.09), s * (ky - 0.06), s * (kx + 0.09), s * (ky + 0.06)), fill=dark
            )
    return img.resize((size, size), Image.Resampling.LANCZOS)
