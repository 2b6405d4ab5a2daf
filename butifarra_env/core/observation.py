"""What one player may know, as a flat ``uint8`` vector relative to that player's seat.

Relative seats: 0 = me, 1 = the next player (on my right), 2 = my partner, 3 = the
previous player. Team pairs are (my team, the other team). Every entry is 0/1 except
the counts (tricks, points, hand number, match scores, options), which are small
integers (clipped at 255). The layout is :data:`FIELDS`, in order; :func:`decode`
turns a vector back into named fields.

Two encoders live here on purpose: :func:`encode` is the plain definition, written
directly from a :class:`~butifarra_env.core.game.Game`; :class:`Observer` is the fast
path used by the environment (it keeps one seat-absolute vector up to date with a few
writes per move and rotates it per seat with one gather). Tests hold them equal.

Versions: the layout above is ``butifarra_v0``'s (:data:`FIELDS`, 491 values). ``butifarra_v1``
appends :data:`V1_FIELDS` (the trick history and the regional variants, 147 values) and keeps
every v0 entry where it was, so ``obs_v1[..., :OBS_SIZE]`` is the v0 observation and the v0
views (:class:`View`, :func:`field`) read it unchanged. :func:`layout` gives each version's
fields, offsets, scales and suit permutation; :func:`encode` and :class:`Observer` take the
version.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from butifarra_env.core.cards import ALL_CARDS, N_CARDS, N_SUITS, N_TRICKS, SUIT, TOTAL_POINTS
from butifarra_env.core.game import Game
from butifarra_env.core.options import MAX_DOUBLING_LEVEL
from butifarra_env.core.rules import (
    N_SEATS,
    NO_TRUMP,
    PHASE_DOUBLING,
    PHASE_NAMES,
    TRUMP_UNSET,
)
from butifarra_env.core.validate import is_int

CLIP = 255

# (name, size, kind). kind: "hand" = own hand (private), "seat" = one block per
# relative seat, "team" = (my team, other team), "shared" = the same for everyone.
FIELDS: tuple[tuple[str, int, str], ...] = (
    ("hand", N_CARDS, "hand"),
    ("played", N_SEATS * N_CARDS, "seat"),  # every card each seat has played this hand
    ("trick", N_SEATS * N_CARDS, "seat"),  # the card each seat has put on the current trick
    ("trick_leader", N_SEATS, "seat"),  # who led the current trick (all 0 when it is empty)
    ("voids", N_SEATS * N_SUITS, "seat"),  # seat failed to follow that suit
    ("trump", TRUMP_UNSET + 1, "shared"),  # oros, copas, espadas, bastos, butifarra, unset
    ("chooser", N_SEATS, "seat"),  # who chose trump (all 0 before)
    ("delegated", 1, "shared"),
    ("dealer", N_SEATS, "seat"),
    ("doubling_level", MAX_DOUBLING_LEVEL + 1, "shared"),  # 0 none .. 4 Verraca, one-hot
    ("doubling_turn", N_SEATS, "seat"),  # who is asked to double now (all 0 outside doubling)
    ("phase", len(PHASE_NAMES), "shared"),  # one-hot over PHASE_NAMES
    ("team_tricks", 2, "team"),  # counts 0-12
    ("team_points", 2, "team"),  # card points + 1 per trick, counts 0-72
    ("hand_number", 1, "shared"),  # 0-based hand of the match (0 in one-hand episodes)
    ("match_scores", 2, "team"),  # match scores before this hand (0 in one-hand episodes)
    ("target_score", 1, "shared"),  # 0 in one-hand episodes
    ("max_doubling_level", 1, "shared"),
    ("butifarra_base", 1, "shared"),
)

V1_FIELDS: tuple[tuple[str, int, str], ...] = (
    ("trick_led", N_SEATS * N_TRICKS, "seat"),  # bit t of seat r's block: r led finished trick t
    ("trick_won", N_SEATS * N_TRICKS, "seat"),  # bit t of seat r's block: r won finished trick t
    ("card_trick", N_CARDS, "shared"),  # 1-12: the trick the card was played in; 0 not played
    ("obligada", 1, "shared"),  # the variants of Options, 0/1
    ("linear_doubling", 1, "shared"),
    ("butifarra_max_doubling_level", 1, "shared"),  # the effective top level in a butifarra
)
"""What ``butifarra_v1`` appends to :data:`FIELDS`: with ``played`` (who played each card)
the two trick blocks and ``card_trick`` give the whole play history (who led, who played
what, who won, trick by trick); the three variant fields tell a learner which rules hold."""

_FIELD_MAX: dict[str, int] = {
    "team_tricks": N_TRICKS,
    "team_points": TOTAL_POINTS,
    "hand_number": CLIP,
    "match_scores": CLIP,
    "target_score": CLIP,
    "max_doubling_level": MAX_DOUBLING_LEVEL,
    "butifarra_base": 2,
    "card_trick": N_TRICKS,
    "butifarra_max_doubling_level": MAX_DOUBLING_LEVEL,
}


class Layout:
    """One observation version: its fields in order, where each lies, the largest value it
    holds, and the gathers that rotate a seat-absolute vector into a seat's view."""

    def __init__(self, version: int, fields: tuple[tuple[str, int, str], ...]) -> None:
        self.version = version
        self.fields = fields
        self.offsets: dict[str, int] = {}
        self.canonical_offsets: dict[str, int] = {}
        o = c = 0
        for name, size, kind in fields:
            self.offsets[name] = o
            self.canonical_offsets[name] = c
            o += size
            c += N_SEATS * N_CARDS if kind == "hand" else size
        self.size = o
        """Length of the observation vector."""
        self.canonical_size = c
        """Length of the seat-absolute vector (all four hands, seat blocks by absolute seat)."""
        self.sizes = {name: size for name, size, _ in fields}
        self.field_max = {name: _FIELD_MAX.get(name, 1) for name, _, _ in fields}
        """The largest value each field can hold (1 for the 0/1 fields): dividing by it puts
        every entry in [0, 1] (:meth:`scale_vector`)."""
        self.card_fields = tuple(n for n in (*CARD_FIELDS, "card_trick") if n in self.sizes)
        """Fields made of 48-card blocks (one block, or one per relative seat)."""
        self.permutation: np.ndarray = np.stack([self._permutation(s) for s in range(N_SEATS)])
        """(4, size): ``canonical[permutation[seat]]`` is ``seat``'s view."""

    def field_slice(self, name: str) -> slice:
        """Where field ``name`` lies in the vector."""
        if name not in self.offsets:
            raise ValueError(
                f"unknown observation field {name!r} in v{self.version}; fields: "
                f"{list(self.offsets)}"
            )
        return slice(self.offsets[name], self.offsets[name] + self.sizes[name])

    def scale_vector(self) -> np.ndarray:
        """``float32`` multipliers that map every entry into [0, 1] (1 / ``field_max``)."""
        scale = np.ones(self.size, np.float32)
        for name, _, _ in self.fields:
            scale[self.field_slice(name)] = 1.0 / self.field_max[name]
        return scale

    def suit_permutation(self, order: tuple[int, ...] | list[int]) -> np.ndarray:
        """Gather indices that relabel suits: suit ``k`` of the result is suit ``order[k]`` of
        the input, in every card block, the void flags and the trump one-hot."""
        idx = np.arange(self.size)
        cards = np.array([order[k] * 12 + n for k in range(N_SUITS) for n in range(12)])
        for name in self.card_fields:
            for block in range(self.offsets[name], self.offsets[name] + self.sizes[name], N_CARDS):
                idx[block : block + N_CARDS] = block + cards
        voids = self.offsets["voids"]
        for block in range(voids, voids + self.sizes["voids"], N_SUITS):
            idx[block : block + N_SUITS] = block + np.asarray(order)
        trump = self.offsets["trump"]
        idx[trump : trump + N_SUITS] = trump + np.asarray(order)
        return idx

    def _permutation(self, seat: int) -> np.ndarray:
        idx: list[int] = []
        for name, size, kind in self.fields:
            base = self.canonical_offsets[name]
            if kind == "hand":
                idx.extend(base + seat * N_CARDS + i for i in range(size))
            elif kind == "seat":
                k = size // N_SEATS
                for r in range(N_SEATS):
                    a = (seat + r) % N_SEATS
                    idx.extend(base + a * k + i for i in range(k))
            elif kind == "team":
                mine = seat & 1
                idx.extend((base + mine, base + 1 - mine))
            else:
                idx.extend(base + i for i in range(size))
        return np.asarray(idx, dtype=np.intp)


CARD_FIELDS = ("hand", "played", "trick")
"""Fields of v0 made of 48-card blocks (one block, or one per relative seat)."""
LAYOUT_V0 = Layout(0, FIELDS)
LAYOUT_V1 = Layout(1, FIELDS + V1_FIELDS)
LAYOUTS = {0: LAYOUT_V0, 1: LAYOUT_V1}
VERSIONS = tuple(LAYOUTS)
"""The observation versions: 0 (``butifarra_v0``) and 1 (``butifarra_v1``)."""


def check_version(version: object) -> int:
    """The observation version as an int, or ValueError naming the allowed ones."""
    if not is_int(version) or int(version) not in LAYOUTS:  # type: ignore[call-overload]
        raise ValueError(f"obs_version must be one of {list(VERSIONS)}, got {version!r}")
    return int(version)  # type: ignore[call-overload]  # True and 1.0 were refused above


def layout(version: int = 0) -> Layout:
    """The :class:`Layout` of observation ``version`` (0 or 1)."""
    return LAYOUTS[check_version(version)]


OFFSETS: dict[str, int] = LAYOUT_V0.offsets
OBS_SIZE = LAYOUT_V0.size
"""Length of the v0 observation vector."""
OBS_SIZE_V1 = LAYOUT_V1.size
"""Length of the v1 observation vector (v0's 491 values, then :data:`V1_FIELDS`)."""
SIZES = LAYOUT_V0.sizes
FIELD_MAX: dict[str, int] = LAYOUT_V0.field_max
"""The largest value each v0 field can hold (1 for the 0/1 fields): dividing by it puts every
entry in [0, 1] (:func:`scale_vector`)."""
BINARY_PREFIX = OFFSETS["team_tricks"]
"""Every entry before this offset is 0 or 1 (cards, seats, one-hots): it packs into bits."""


def field_slice(name: str) -> slice:
    """Where v0 field ``name`` lies in the vector (also in a v1 vector: v1 starts with v0)."""
    return LAYOUT_V0.field_slice(name)


def field(obs: np.ndarray, name: str) -> np.ndarray:
    """Field ``name`` of one observation or a batch ``(..., size)`` (a view). v0 fields are
    found in v0 and v1 vectors alike; a v1 field needs a v1 vector."""
    sl = LAYOUT_V0.field_slice(name) if name in OFFSETS else LAYOUT_V1.field_slice(name)
    arr = np.asarray(obs)
    if sl.stop > arr.shape[-1]:
        raise ValueError(
            f"field {name!r} is in v1 observations ({OBS_SIZE_V1} values), got {arr.shape[-1]}"
        )
    return arr[..., sl]


def scale_vector(version: int = 0) -> np.ndarray:
    """``float32`` multipliers that map every entry of a ``version`` observation into [0, 1]
    (1 / the field's largest value; 491 for v0)."""
    return layout(version).scale_vector()


def suit_permutation(order: tuple[int, ...] | list[int], version: int = 0) -> np.ndarray:
    """Gather indices that relabel suits in a ``version`` observation: suit ``k`` of the
    result is suit ``order[k]`` of the input, in every card block, the void flags and the
    trump one-hot."""
    return layout(version).suit_permutation(order)


def _clip(x: int) -> int:
    return CLIP if x > CLIP else x


def _rel(seat: int, me: int) -> int:
    return (seat - me) % N_SEATS


def encode(game: Game, seat: int, version: int = 0) -> np.ndarray:
    """The ``version`` observation of ``seat``, built from scratch (the reference definition)."""
    lay = layout(version)
    v = np.zeros(lay.size, dtype=np.uint8)
    o = lay.offsets
    for c in range(N_CARDS):
        if (game.hands[seat] >> c) & 1:
            v[o["hand"] + c] = 1
    for s in range(N_SEATS):
        r = _rel(s, seat)
        for c in range(N_CARDS):
            if (game.played[s] >> c) & 1:
                v[o["played"] + r * N_CARDS + c] = 1
        if game.trick_cards[s] >= 0:
            v[o["trick"] + r * N_CARDS + game.trick_cards[s]] = 1
        for su in range(N_SUITS):
            if (game.voids[s] >> su) & 1:
                v[o["voids"] + r * N_SUITS + su] = 1
    if game.trick_leader >= 0:
        v[o["trick_leader"] + _rel(game.trick_leader, seat)] = 1
    v[o["trump"] + game.trump] = 1
    if game.chooser >= 0:
        v[o["chooser"] + _rel(game.chooser, seat)] = 1
    v[o["delegated"]] = game.delegated
    v[o["dealer"] + _rel(game.dealer, seat)] = 1
    v[o["doubling_level"] + game.level] = 1
    if game.phase == PHASE_DOUBLING:
        v[o["doubling_turn"] + _rel(game.to_move, seat)] = 1
    v[o["phase"] + game.phase] = 1
    mine = seat & 1
    for i, team in enumerate((mine, 1 - mine)):
        v[o["team_tricks"] + i] = game.team_tricks[team]
        v[o["team_points"] + i] = game.team_points[team]
        v[o["match_scores"] + i] = _clip(game.match_scores[team])
    v[o["hand_number"]] = _clip(game.hand_number)
    v[o["target_score"]] = _clip(game.options.target_score or 0)
    v[o["max_doubling_level"]] = game.options.max_doubling_level
    v[o["butifarra_base"]] = game.options.butifarra_base
    if lay.version >= 1:
        for t, (leader, cards, winner) in enumerate(game.tricks):
            v[o["trick_led"] + _rel(leader, seat) * N_TRICKS + t] = 1
            v[o["trick_won"] + _rel(winner, seat) * N_TRICKS + t] = 1
            for card in cards:
                v[o["card_trick"] + card] = t + 1
        for card in game.trick_cards:
            if card >= 0:
                v[o["card_trick"] + card] = len(game.tricks) + 1
        _write_variants(v, o, game)
    return v


def _write_variants(v: np.ndarray, o: dict[str, int], game: Game) -> None:
    opts = game.options
    v[o["obligada"]] = opts.obligada
    v[o["linear_doubling"]] = opts.linear_doubling
    v[o["butifarra_max_doubling_level"]] = opts.doubling_cap(NO_TRUMP)


def decode(obs: Any) -> dict[str, Any]:
    """Named, readable fields of one observation vector, v0 or v1 (told apart by length; for
    notebooks and debugging).

    Card fields come back as sorted lists of card ids; seat fields are relative seats. A v1
    vector adds ``tricks``: one dict per finished trick (``leader``, ``winner``: relative
    seats; ``cards``: the card of each relative seat) and the three variant fields.
    """
    v = np.asarray(obs)
    if v.shape not in ((OBS_SIZE,), (OBS_SIZE_V1,)):
        raise ValueError(
            f"expected an observation of shape ({OBS_SIZE},) (v0) or ({OBS_SIZE_V1},) (v1), "
            f"got {v.shape}"
        )

    def field(name: str) -> np.ndarray:
        return v[OFFSETS[name] : OFFSETS[name] + SIZES[name]]

    def one_hot(name: str) -> int | None:
        nz = np.flatnonzero(field(name))
        return int(nz[0]) if len(nz) else None

    played = field("played").reshape(N_SEATS, N_CARDS)
    trick = field("trick").reshape(N_SEATS, N_CARDS)
    voids = field("voids").reshape(N_SEATS, N_SUITS)
    trump = one_hot("trump")
    out = {
        "hand": [int(c) for c in np.flatnonzero(field("hand"))],
        "played": [[int(c) for c in np.flatnonzero(row)] for row in played],
        "trick": [int(np.flatnonzero(row)[0]) if row.any() else None for row in trick],
        "trick_leader": one_hot("trick_leader"),
        "voids": [[int(s) for s in np.flatnonzero(row)] for row in voids],
        "trump": None if trump == TRUMP_UNSET else trump,
        "butifarra": trump == NO_TRUMP,
        "chooser": one_hot("chooser"),
        "delegated": bool(field("delegated")[0]),
        "dealer": one_hot("dealer"),
        "doubling_level": one_hot("doubling_level"),
        "doubling_turn": one_hot("doubling_turn"),
        "phase": PHASE_NAMES[one_hot("phase") or 0],
        "team_tricks": [int(x) for x in field("team_tricks")],
        "team_points": [int(x) for x in field("team_points")],
        "hand_number": int(field("hand_number")[0]),
        "match_scores": [int(x) for x in field("match_scores")],
        "target_score": int(field("target_score")[0]) or None,
        "max_doubling_level": int(field("max_doubling_level")[0]),
        "butifarra_base": int(field("butifarra_base")[0]),
    }
    if len(v) == OBS_SIZE_V1:
        out.update(_decode_v1(v, played))
    return out


def _decode_v1(v: np.ndarray, played: np.ndarray) -> dict[str, Any]:
    def field(name: str) -> np.ndarray:
        return v[LAYOUT_V1.field_slice(name)]

    led = field("trick_led").reshape(N_SEATS, N_TRICKS)
    won = field("trick_won").reshape(N_SEATS, N_TRICKS)
    card_trick = field("card_trick")
    tricks = []
    for t in range(N_TRICKS):
        if not led[:, t].any():
            break
        cards = [
            int(np.flatnonzero((card_trick == t + 1) & (played[r] == 1))[0]) for r in range(N_SEATS)
        ]
        tricks.append(
            {
                "leader": int(np.argmax(led[:, t])),
                "winner": int(np.argmax(won[:, t])),
                "cards": cards,
            }
        )
    return {
        "tricks": tricks,
        "obligada": bool(field("obligada")[0]),
        "linear_doubling": bool(field("linear_doubling")[0]),
        "butifarra_max_doubling_level": int(field("butifarra_max_doubling_level")[0]),
    }


# --------------------------------------------------------------------------- bit views
_BINARY_BYTES = (BINARY_PREFIX + 7) // 8


def pack_bits(observation: np.ndarray) -> int:
    """The 0/1 prefix of one observation as a Python int (bit i = entry i)."""
    prefix = np.asarray(observation[:BINARY_PREFIX], dtype=np.uint8)
    return int.from_bytes(np.packbits(prefix, bitorder="little").tobytes(), "little")


def pack_bits_batch(observations: np.ndarray) -> list[int]:
    """:func:`pack_bits` of every row of an ``(N, 491)`` batch."""
    obs = np.asarray(observations)[:, :BINARY_PREFIX].astype(np.uint8, copy=False)
    packed = np.packbits(obs, axis=1, bitorder="little")
    raw, w = packed.tobytes(), packed.shape[1]
    return [int.from_bytes(raw[i * w : (i + 1) * w], "little") for i in range(len(obs))]


def _one_hot(bits: int, size: int) -> int:
    b = bits & ((1 << size) - 1)
    return b.bit_length() - 1 if b else -1


class View:
    """One observation as bitmasks and small ints, for agents that reason about cards.

    Seats are relative (0 me, 1 next, 2 partner, 3 previous). Built from
    :func:`pack_bits` with shifts alone, so it is cheap enough for every decision.
    """

    __slots__ = (
        "hand",
        "played",
        "trick",
        "leader",
        "voids",
        "trump",
        "chooser",
        "dealer",
        "level",
        "phase",
        "unseen",
        "n_trick",
        "sizes",
    )

    def __init__(self, bits: int) -> None:
        self.hand: int = bits & ALL_CARDS
        """My cards."""
        played = [(bits >> (_PLAYED_REL + N_CARDS * r)) & ALL_CARDS for r in range(N_SEATS)]
        self.played: list[int] = played
        """Cards each relative seat has played this hand."""
        trick = [(bits >> (_TRICK_REL + N_CARDS * r)) & ALL_CARDS for r in range(N_SEATS)]
        self.trick: list[int] = [t.bit_length() - 1 if t else -1 for t in trick]
        """The card each relative seat has on the current trick (-1: none yet)."""
        self.n_trick: int = N_SEATS - trick.count(0)
        self.leader: int = _one_hot(bits >> _LEADER_REL, N_SEATS)
        v = bits >> _VOIDS_REL
        self.voids: list[int] = [(v >> (N_SUITS * r)) & 15 for r in range(N_SEATS)]
        """Bit s: that relative seat has shown it holds no card of suit s."""
        trump = _one_hot(bits >> _TRUMP_REL, _TRUMP_SIZE)
        self.trump: int = TRUMP_UNSET if trump < 0 else trump
        self.chooser: int = _one_hot(bits >> _CHOOSER_REL, N_SEATS)
        self.dealer: int = _one_hot(bits >> _DEALER_REL, N_SEATS)
        self.level: int = max(_one_hot(bits >> _LEVEL_REL, _LEVEL_SIZE), 0)
        self.phase: int = _one_hot(bits >> _PHASE_REL, _PHASE_SIZE)
        self.unseen: int = ALL_CARDS & ~(self.hand | played[0] | played[1] | played[2] | played[3])
        """Cards I have not seen: in the other three hands."""
        self.sizes: list[int] = [N_TRICKS - p.bit_count() for p in played]
        """Cards left in each relative seat's hand."""


def read_view(observation: np.ndarray) -> View:
    """Parse one observation vector into a :class:`View`."""
    return View(pack_bits(observation))


_PLAYED_REL = OFFSETS["played"]
_TRICK_REL = OFFSETS["trick"]
_LEADER_REL = OFFSETS["trick_leader"]
_VOIDS_REL = OFFSETS["voids"]
_TRUMP_REL = OFFSETS["trump"]
_CHOOSER_REL = OFFSETS["chooser"]
_DEALER_REL = OFFSETS["dealer"]
_LEVEL_REL = OFFSETS["doubling_level"]
_PHASE_REL = OFFSETS["phase"]
_TRUMP_SIZE = SIZES["trump"]
_LEVEL_SIZE = SIZES["doubling_level"]
_PHASE_SIZE = SIZES["phase"]


# --------------------------------------------------------------------------- fast path
# The seat-absolute ("canonical") vector has the same fields, with all four hands and
# every seat/team block stored by absolute seat/team. PERMUTATION[seat] gathers it into
# that seat's relative layout.
_CANON: dict[str, int] = LAYOUT_V0.canonical_offsets
CANONICAL_SIZE = LAYOUT_V0.canonical_size
PERMUTATION = LAYOUT_V0.permutation


class Observer:
    """Keeps the seat-absolute vector of a :class:`Game` current, a few writes per move."""

    __slots__ = ("canon",)

    def __init__(self) -> None:
        self.canon = np.zeros(CANONICAL_SIZE, dtype=np.uint8)

    def reset(self, game: Game) -> None:
        c = self.canon
        c[:] = 0
        hands = _CANON["hand"]
        for s in range(N_SEATS):
            h = game.hands[s]
            for card in range(N_CARDS):
                if (h >> card) & 1:
                    c[hands + s * N_CARDS + card] = 1
        c[_CANON["dealer"] + game.dealer] = 1
        c[_CANON["hand_number"]] = _clip(game.hand_number)
        c[_CANON["match_scores"]] = _clip(game.match_scores[0])
        c[_CANON["match_scores"] + 1] = _clip(game.match_scores[1])
        c[_CANON["target_score"]] = _clip(game.options.target_score or 0)
        c[_CANON["max_doubling_level"]] = game.options.max_doubling_level
        c[_CANON["butifarra_base"]] = game.options.butifarra_base
        self._header(game)

    def _header(self, game: Game) -> None:
        """Rewrite the bidding fields (rare moves: at most a dozen per hand)."""
        c = self.canon
        t = _CANON["trump"]
        c[t : t + SIZES["trump"]] = 0
        c[t + game.trump] = 1
        if game.chooser >= 0:
            c[_CANON["chooser"] + game.chooser] = 1
        c[_CANON["delegated"]] = game.delegated
        lv = _CANON["doubling_level"]
        c[lv : lv + SIZES["doubling_level"]] = 0
        c[lv + game.level] = 1
        dt = _CANON["doubling_turn"]
        c[dt : dt + N_SEATS] = 0
        if game.phase == PHASE_DOUBLING:
            c[dt + game.to_move] = 1
        ph = _CANON["phase"]
        c[ph : ph + len(PHASE_NAMES)] = 0
        c[ph + game.phase] = 1

    def update(self, game: Game, seat: int, action: int) -> None:
        """Bring the vector up to date after ``seat`` played ``action`` in ``game``."""
        if action >= N_CARDS:
            self._header(game)
            return
        c = self.canon
        c[_HANDS + seat * N_CARDS + action] = 0
        c[_PLAYED + seat * N_CARDS + action] = 1
        if game.cards_in_trick:
            c[_TRICK + seat * N_CARDS + action] = 1
            if game.cards_in_trick == 1:
                c[_LEADER + seat] = 1
                return
            led = game.led_suit
        else:  # this card closed the trick: clear the table, count it
            leader, cards, _winner = game.tricks[-1]
            for s in range(N_SEATS):
                c[_TRICK + s * N_CARDS + cards[s]] = 0
            c[_LEADER + leader] = 0
            c[_TRICKS] = game.team_tricks[0]
            c[_TRICKS + 1] = game.team_tricks[1]
            c[_POINTS] = game.team_points[0]
            c[_POINTS + 1] = game.team_points[1]
            if game.is_over:
                self._header(game)
            led = SUIT[cards[leader]]
        if SUIT[action] != led:
            c[_VOIDS + seat * N_SUITS + led] = 1

    def observe(self, seat: int) -> np.ndarray:
        """A fresh array (safe to keep) with ``seat``'s relative view."""
        return self.canon[PERMUTATION[seat]]


_HANDS = _CANON["hand"]
_PLAYED = _CANON["played"]
_TRICK = _CANON["trick"]
_LEADER = _CANON["trick_leader"]
_VOIDS = _CANON["voids"]
_TRICKS = _CANON["team_tricks"]
_POINTS = _CANON["team_points"]


_V1 = LAYOUT_V1.canonical_offsets
_LED, _WON, _CARD_TRICK = _V1["trick_led"], _V1["trick_won"], _V1["card_trick"]
_V1_OFFSETS = {name: _V1[name] for name, _, _ in V1_FIELDS}


class ObserverV1(Observer):
    """:class:`Observer` for ``butifarra_v1``: the seat-absolute vector also holds the trick
    history and the variants (:data:`V1_FIELDS`); :meth:`observe` gives the v1 view. Its
    first :data:`CANONICAL_SIZE` entries are the v0 seat-absolute vector."""

    __slots__ = ()

    def __init__(self) -> None:
        self.canon = np.zeros(LAYOUT_V1.canonical_size, dtype=np.uint8)

    def reset(self, game: Game) -> None:
        super().reset(game)
        _write_variants(self.canon, _V1_OFFSETS, game)

    def update(self, game: Game, seat: int, action: int) -> None:
        super().update(game, seat, action)
        if action >= N_CARDS:
            return
        c = self.canon
        if game.cards_in_trick:
            c[_CARD_TRICK + action] = len(game.tricks) + 1
        else:
            t = len(game.tricks) - 1
            leader, _cards, winner = game.tricks[t]
            c[_CARD_TRICK + action] = t + 1
            c[_LED + leader * N_TRICKS + t] = 1
            c[_WON + winner * N_TRICKS + t] = 1

    def observe(self, seat: int) -> np.ndarray:
        return self.canon[LAYOUT_V1.permutation[seat]]


def make_observer(version: int = 0) -> Observer:
    """The fast observer of observation ``version``."""
    return ObserverV1() if check_version(version) == 1 else Observer()


STATE_SIZE = CANONICAL_SIZE + N_SEATS
"""Length of the full-information state: the seat-absolute vector (all four hands, every
seat and team block by absolute seat/team) followed by a one-hot of the seat to move."""


def canonical(game: Game) -> np.ndarray:
    """The seat-absolute vector built from scratch: each seat's view scattered back."""
    out = np.zeros(CANONICAL_SIZE, dtype=np.uint8)
    for s in range(N_SEATS):
        out[PERMUTATION[s]] = encode(game, s)
    return out


def encode_state(game: Game, canonical_vector: np.ndarray | None = None) -> np.ndarray:
    """Full information for centralised critics (not relative to any seat).

    Pass ``Observer.canon`` as ``canonical_vector`` to skip rebuilding it.
    """
    out = np.zeros(STATE_SIZE, dtype=np.uint8)
    if canonical_vector is None:
        canonical_vector = canonical(game)
    out[:CANONICAL_SIZE] = canonical_vector[:CANONICAL_SIZE]  # a v1 observer's starts with v0's
    if game.to_move >= 0:
        out[CANONICAL_SIZE + game.to_move] = 1
    return out


def state_scale_vector() -> np.ndarray:
    """``float32`` (STATE_SIZE,) multipliers that map every entry of :func:`encode_state` into
    [0, 1]: the :data:`FIELD_MAX` of each field in the seat-absolute layout, 1 for the
    one-hot of the seat to move (the float32 ``state()`` of the environments)."""
    scale = np.ones(STATE_SIZE, np.float32)
    for name, _, kind in FIELDS:
        size = N_SEATS * N_CARDS if kind == "hand" else SIZES[name]
        scale[_CANON[name] : _CANON[name] + size] = 1.0 / FIELD_MAX[name]
    return scale
