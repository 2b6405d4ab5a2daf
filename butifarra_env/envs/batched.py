"""N independent Butifarra hands advanced at once with numpy array operations.

:class:`BatchedEnv` is the training-speed twin of ``butifarra_v0``: the same rules, the same
491-byte observations (``observation.FIELDS``; 638 bytes with ``obs_version=1``, below), the
same 56-wide legal masks and the same rewards, for thousands of hands per call with no Python
loop over hands. Its lookup tables are built from the rules core
(:func:`butifarra_env.core.rules.winners`, ``DEAL_ORDER``) and its scoring and match steps call
the same functions (:func:`~butifarra_env.core.rules.hand_scores`,
:func:`~butifarra_env.core.rules.multiplier`, :func:`~butifarra_env.core.rules.doubling_cap`,
:func:`~butifarra_env.core.rules.match_over`...) on arrays, under the same options (the
variants ``obligada``, ``linear_doubling`` and ``butifarra_max_doubling_level`` included);
``tests/test_batched.py`` drives it and ``butifarra_v0`` through identical deals and actions
and asserts equality at every step.

Design, each choice because profiling said so (``benchmarks/bench_batched.py``):

* **Bitboards.** A hand is one ``uint64`` per seat (bit ``c`` = card ``c``), the legal set of
  the seat to move one ``uint64`` over the 56 action ids. The legal-card rules of RULES.md
  are then a few integer operations on whole columns, the rules core's
  :func:`~butifarra_env.core.rules.legal_cards_array`::

      follow = hand & FOLLOW[led]               # led = "none" (every suit) when leading
      base   = follow if follow else hand       # follow suit when able
      beat   = base & WINNERS[trump, W] if an opponent holds W else 0
      legal  = beat if beat else base           # beat W when able; never forced to under-trump

  which is :func:`butifarra_env.core.rules.legal_cards` over columns (with ``obligada``, the
  weakest card of the led suit where an opponent holds W and the mover follows suit without
  beating it, from a 4096-entry table). ``WINNERS[t, W]``
  (:data:`~butifarra_env.core.rules.WINNERS_FLAT`) is
  :func:`butifarra_env.core.rules.winners` tabulated: the cards that take the trick from
  ``W`` under trump ``t``. The same table decides who wins each trick.
* **Relative observation rows, updated in place.** Each hand keeps its four seat-relative
  observation rows (4 x 491 bytes; 4 x 638 in v1, the write offsets tabulated per version by
  ``_Rows``). A card play clears one byte (the card leaves the mover's hand) and sets 8 (its
  played and trick bits in all four views: one gather from a small (seat, card) offset table,
  one fancy assignment), plus the trick-leader bits when it opens a trick and the void bits
  when it does not follow suit, on those subsets only. A trick end clears the trick bits of
  the four cards kept per seat, and the leader bits; a bidding move rewrites the 29-byte
  bidding header (the OR of three small tables, copied as one 29-byte item per row); a new
  deal copies a template row. The team block (tricks, points) is pasted into the returned rows
  from an array kept by team parity instead of being written into four views per trick. v1's
  trick history is written the same way, only in v1 engines: a card play also sets its
  ``card_trick`` byte (the trick number) in the four views, a trick end its ``trick_led`` and
  ``trick_won`` bits (one gather from a (leader, winner) table); the variant fields are
  constants of the template row. Returning an observation is then one row gather of the
  mover's view: no re-encoding, no per-seat permutation.
* **Branch-free play step.** All hands run the card-play update every step. Hands that are
  bidding pass through inert (non-card actions have no bit, no points and win no trick) and
  their observation writes go to a scratch block. The rarer events -- bidding moves (~6 % of
  decisions), trick ends (25 %), hand ends and re-deals (~2 %) -- run on index subsets.
* **Masks** come from the ``uint64`` legal sets through a byte -> 8 bits lookup table.
* **State** (:meth:`BatchedEnv.state`) is built on demand: seat 0's view already has the
  seat-absolute layout of ``observation.encode_state``; the other three hands are added.

Usage::

    eng = BatchedEnv(4096, seed=0, max_doubling_level=4)     # options as butifarra_v0
    obs, mask, seat = eng.reset()                             # (N, 491) u8, (N, 56) i8, (N,) i64
                                                              # (N, 638) with obs_version=1
    obs, mask, seat, rewards, done = eng.step(actions)       # rewards (N, 4) f32, done (N,) bool
    critic_in = eng.state()                                   # (N, 639) u8, all hands
    dealers, hands = eng.current_deals()                      # replay any hand in butifarra_v0

``mask`` is the legal set of the seat to move (``seat``) in each env; rewards are those of
all four seats, non-zero only on a step that ends a hand. Fixed deals: ``reset(dealers=...,
hands=...)`` and :meth:`BatchedEnv.set_deal_fn` (for every later deal, auto-resets included).

``obs_version`` (0 default, or 1; validated by ``observation.check_version``) chooses the
observation layout of every row returned (``step``, ``reset``, ``final_observations``):
0 is ``observation.LAYOUT_V0`` (491 values, ``butifarra_v0``'s), 1 is ``LAYOUT_V1`` (638:
the same 491 values, then the trick history and the variants, ``observation.V1_FIELDS``),
equal to ``observation.encode(game, seat, 1)``; :attr:`BatchedEnv.observation_size` says
which. ``state()`` is the v0 state (639, ``observation.encode_state``, which has no v1
layout) under both: a critic that wants the history reads it from the rows. A v0 engine does
none of v1's writes: its rows, bytes and speed are what they were.

``obs_format="float32"`` returns observations (and ``state()``) as ``float32`` in [0, 1], each
entry times ``observation.layout(obs_version).scale_vector()`` (``state_scale_vector()``); the
engine keeps its bytes either way. ``step(actions, active=mask)`` advances only the envs where
``mask`` is True; the others keep their position exactly (their actions are not looked at),
which is how the Gymnasium vector env lets the opponents of a learner move while the learner
waits. ``keep_final_obs=True`` keeps the four views of every episode's last position
(:meth:`BatchedEnv.final_observations`), which an auto-reset would otherwise overwrite.

Every array returned is freshly allocated (safe to keep or modify); none aliases internal
buffers. With ``device`` set, or torch actions given to :meth:`BatchedEnv.step`, outputs are
torch tensors: ``torch.from_numpy`` (zero-copy) on CPU, a copy on CUDA. torch is imported
only then; the engine itself needs numpy alone.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from butifarra_env.core import rules
from butifarra_env.core.actions import (
    BUTIFARRA,
    DEALER_ACTIONS_MASK,
    DELEGATE,
    DOUBLE,
    DOUBLING_MASK,
    N_ACTIONS,
    PASS,
    TRUMP_BASE,
    TRUMP_CHOICE_MASK,
    action_name,
)
from butifarra_env.core.cards import N_CARDS, N_SUITS, N_TRICKS, POINTS, SUIT, SUIT_MASK
from butifarra_env.core.game import Game
from butifarra_env.core.observation import (
    CANONICAL_SIZE,
    CLIP,
    OBS_SIZE,
    OFFSETS,
    SIZES,
    STATE_SIZE,
    VERSIONS,
    Layout,
    check_version,
    encode,
    layout,
    state_scale_vector,
)
from butifarra_env.core.options import Options
from butifarra_env.core.rules import (
    DEAL_ORDER,
    N_SEATS,
    NO_SUIT,
    PHASE_CHOOSE_TRUMP,
    PHASE_CHOOSE_TRUMP_DELEGATED,
    PHASE_DOUBLING,
    PHASE_HAND_OVER,
    PHASE_NAMES,
    PHASE_PLAY,
    SEAT_SIGN,
    TRUMP_UNSET,
)
from butifarra_env.core.validate import check_int, check_obs_format, check_reward_scale, check_seed

__all__ = ["BatchedEnv", "DealFn"]

DealFn = Callable[[np.ndarray, np.ndarray], Any]
"""``deal_fn(env_ids, dealers) -> hands``: the (k, 4, 12) card ids of the hands about to be
dealt in envs ``env_ids`` (int64, ascending), whose dealers are ``dealers`` (int64)."""

# --------------------------------------------------------------------------- tables
_U64 = np.uint64
_LITTLE = sys.byteorder == "little"  # bitboards are unpacked through byte views
_NO_CARD = N_CARDS  # winning-card value while the trick is empty (the last column of WINNERS)
_TRUMP_VALUES = SIZES["trump"]  # suits 0-3, NO_TRUMP, TRUMP_UNSET

# Per action id: its card bit, points and suit; the bidding actions (48-55) are inert.
_IDS = np.arange(N_ACTIONS)
_IS_CARD = _IDS < N_CARDS
_BIT = np.array([1 << a if a < N_CARDS else 0 for a in _IDS], dtype=_U64)
_PTS = np.array([POINTS[a] if a < N_CARDS else 0 for a in _IDS], dtype=np.int64)
_SUIT_OF = np.array([SUIT[a] if a < N_CARDS else NO_SUIT for a in _IDS], dtype=np.int64)
_WINNERS = rules.WINNERS_FLAT  # row trump * WINNERS_STRIDE + winning card: rules.winners
# byte -> its 8 bits, low bit first: legal sets unpack to masks by one lookup
_BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little")
_BYTE_BITS = _BYTE_BITS.view(np.int8)


class _Rows:
    """Where the engine's writes land inside one hand's block of four observation rows of one
    version (491 bytes wide in v0, 638 in v1; offsets from ``observation.layout``): what a
    card play, a trick's opening and its close set or clear in all four views, by table row."""

    def __init__(self, lay: Layout) -> None:
        o, w = lay.offsets, lay.size
        self.width = w
        """Bytes of one observation row."""
        self.hand_bytes = N_SEATS * w
        """Bytes of one hand's four rows."""
        v = np.arange(N_SEATS, dtype=np.int64)
        seats = v[:, None]  # the acting seat (rows) against the viewer v (columns)
        rel = (seats - v) % N_SEATS  # that seat relative to each viewer
        views = v * w  # each view's row inside the block
        card = np.where(_IS_CARD, _IDS, -1)[None, :, None]  # (seat, action id, viewer)
        cards = (rel * N_CARDS + views)[:, None, :] + card
        play = np.concatenate([cards + o["played"], cards + o["trick"]], axis=2)
        self.play = np.where(card >= 0, play, 0).reshape(N_SEATS * N_ACTIONS, 2 * N_SEATS)
        """Row seat * 56 + action id: the 8 bytes a card play sets to 1, the played and trick
        bits of (seat, card) in each view; 0 for the bidding actions (never written through)."""
        self.trick_clear = np.ascontiguousarray(self.play[:, N_SEATS:])
        """The trick bits alone, cleared when the trick closes."""
        self.leader = views + o["trick_leader"] + rel
        """Row leader: the trick-leader bit of each view."""
        suits = np.arange(N_SUITS)[None, :, None]  # (seat, suit, viewer)
        self.void = (views + o["voids"] + (rel * N_SUITS)[:, None, :] + suits).reshape(-1, N_SEATS)
        """Row seat * 4 + suit: the void bit of each view."""
        own = seats * w + o["hand"] + _IDS  # the mover's own row: its hand bit of each card
        self.hand_bit = np.where(_IS_CARD, own, 0).reshape(-1)
        """Row seat * 56 + action id: the card's bit in the mover's own hand."""
        if lay.version < 1:
            return
        self.card_trick = np.where(_IS_CARD[:, None], views + o["card_trick"] + _IDS[:, None], 0)
        """v1, row action id: the card's ``card_trick`` byte in each view (shared, unrotated;
        0 for the bidding actions)."""
        led = views + o["trick_led"] + rel * N_TRICKS  # (leader, viewer): bit 0 of the block
        won = views + o["trick_won"] + rel * N_TRICKS
        pairs = np.concatenate(np.broadcast_arrays(led[:, None], won[None, :]), axis=2)
        self.history = pairs.reshape(N_SEATS * N_SEATS, 2 * N_SEATS)
        """v1, row leader * 4 + winner: the ``trick_led`` and ``trick_won`` bytes of trick 0 in
        each view; trick ``t``'s are ``t`` further."""


_ROWS = {version: _Rows(layout(version)) for version in VERSIONS}
_SEAT_ROWS = np.arange(N_SEATS, dtype=np.int64) * N_ACTIONS

_HDR = OFFSETS["trump"]  # the bidding header, trump .. phase, is contiguous
_HDR_END = OFFSETS["phase"] + SIZES["phase"]


def _header_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The bidding header of all four views is the OR of one row from each table:
    (trump, chooser + 1, delegated), (dealer, doubling level), (doubling turn + 1, phase).
    Seats are absolute here; the tables rotate them into each viewer's frame."""
    size = _HDR_END - _HDR
    levels = SIZES["doubling_level"]
    t1 = np.zeros((_TRUMP_VALUES, N_SEATS + 1, 2, N_SEATS, size), dtype=np.uint8)
    t2 = np.zeros((N_SEATS, levels, N_SEATS, size), dtype=np.uint8)
    t3 = np.zeros((N_SEATS + 1, len(PHASE_NAMES), N_SEATS, size), dtype=np.uint8)
    for v in range(N_SEATS):
        for trump in range(_TRUMP_VALUES):
            for ch in range(-1, N_SEATS):
                for dl in range(2):
                    row = t1[trump, ch + 1, dl, v]
                    row[OFFSETS["trump"] - _HDR + trump] = 1
                    if ch >= 0:
                        row[OFFSETS["chooser"] - _HDR + (ch - v) % N_SEATS] = 1
                    row[OFFSETS["delegated"] - _HDR] = dl
        for d in range(N_SEATS):
            for lv in range(levels):
                t2[d, lv, v, OFFSETS["dealer"] - _HDR + (d - v) % N_SEATS] = 1
                t2[d, lv, v, OFFSETS["doubling_level"] - _HDR + lv] = 1
        for turn in range(-1, N_SEATS):
            for ph in range(len(PHASE_NAMES)):
                if turn >= 0:
                    t3[turn + 1, ph, v, OFFSETS["doubling_turn"] - _HDR + (turn - v) % N_SEATS] = 1
                t3[turn + 1, ph, v, OFFSETS["phase"] - _HDR + ph] = 1
    return tuple(t.reshape(-1, N_SEATS, size) for t in (t1, t2, t3))  # type: ignore[return-value]


_HEADER_1, _HEADER_2, _HEADER_3 = _header_tables()
_LEVELS = SIZES["doubling_level"]
_TEAM_BLOCK = OFFSETS["team_tricks"]  # team_tricks (2) + team_points (2), contiguous
_TEAM_PERM = np.array([[0, 1, 2, 3], [1, 0, 3, 2]])  # by seat parity: (mine, theirs)
_SEAT_SIGN = np.array(SEAT_SIGN, dtype=np.int64)  # each seat's share of A's margin
_MATCH_PERM = np.array([[0, 1], [1, 0]] * 2)  # by viewer: match scores (mine, theirs)
_MATCH = OFFSETS["match_scores"]
_STATE_TEAM = (N_SEATS - 1) * N_CARDS + _TEAM_BLOCK  # the team block inside the state
_STATE_SCALE = state_scale_vector()
_SUIT_HANDS = [int(m) for m in SUIT_MASK]  # a deal for the fresh-deal rows (hands not kept)
_INERT = PASS  # what a held env "plays" in step(active=...): no card bit, points or suit

# Dealing as ``rules.deal``: _DEAL_POS lists the deck positions of the 1st, 2nd, 3rd, 4th seat
# after the dealer (rules.DEAL_ORDER); _DEAL_ROT[dealer] says which of those each seat is.
_DEAL_POS = np.array(DEAL_ORDER).reshape(-1)
_DEAL_ROT = (np.arange(N_SEATS)[None, :] - np.arange(N_SEATS)[:, None] - 1) % N_SEATS


def _torch() -> Any:
    import torch  # optional: only when tensors are asked for

    return torch


def _is_tensor(x: object) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _field_view(buf: np.ndarray, rows: int, offset: int, size: int, width: int) -> np.ndarray:
    """One field of every observation row (``width`` bytes) in ``buf`` as a (rows,) array of
    ``size``-byte items: copying a field is then one item copy per row, not ``size`` byte
    copies."""
    return np.ndarray(shape=(rows,), dtype=f"V{size}", buffer=buf, offset=offset, strides=(width,))


def _bitboards(cards: np.ndarray) -> np.ndarray:
    """(k, 4, 12) card ids -> (k, 4) uint64 hands."""
    return np.bitwise_or.reduce(_U64(1) << cards.astype(_U64), axis=2)


class BatchedEnv:
    """``num_envs`` independent Butifarra episodes stepped together (see the module docs).

    An episode is one hand, or a whole match when ``target_score`` is set. Finished episodes
    are dealt again at once, so every env always has a seat to move; the rewards of the
    finishing step are still reported. ``options`` are those of ``butifarra_v0``
    (``Options`` fields), validated the same way. ``device`` (e.g. ``"cpu"``, ``"cuda"``)
    makes every method return torch tensors there; without it, numpy arrays, except that
    :meth:`step` given torch actions answers with tensors on the actions' device.
    ``obs_version`` (0 or 1) is the observation layout of every row returned (module docs).
    """

    def __init__(
        self,
        num_envs: int,
        seed: int | None = None,
        *,
        device: str | None = None,
        reward_scale: float = 1.0,
        obs_format: str = "uint8",
        keep_final_obs: bool = False,
        obs_version: int = 0,
        **options: Any,
    ) -> None:
        self.num_envs: int = check_int("num_envs", num_envs, 1)
        self.obs_version: int = check_version(obs_version)
        self.reward_scale: float = check_reward_scale(reward_scale)
        self.obs_format: str = check_obs_format(obs_format)
        if not isinstance(keep_final_obs, bool):
            raise ValueError(f"keep_final_obs must be True or False, got {keep_final_obs!r}")
        self.keep_final_obs = keep_final_obs
        self.options: Options = Options.from_dict(options)
        lay = layout(self.obs_version)
        self.observation_size: int = lay.size
        self.state_size: int = STATE_SIZE
        self.action_size: int = N_ACTIONS
        self.device: str | None = None if device is None else str(device)
        if self.device is not None:
            _torch().empty(0, device=self.device)  # a bad device fails here, not mid-run
        self._rng = np.random.default_rng(seed)
        self._deal_fn: DealFn | None = None
        self._started = False
        self._final_ids = np.zeros(0, dtype=np.int64)  # keep_final_obs: episodes ended last step
        self._final_views = np.zeros((0, N_SEATS, lay.size), dtype=np.uint8)
        self._obs_scale = lay.scale_vector()
        # v1: the trick history is written as the cards fall (card_trick) and the tricks close
        # (trick_led, trick_won); v0 rows are never touched by it.
        self._history = self.obs_version >= 1
        self._rt = rt = _ROWS[self.obs_version]
        w, block = rt.width, rt.hand_bytes

        n = self.num_envs
        self._parity_base = np.arange(n, dtype=np.int64) * 2
        self._seat_base = np.arange(n, dtype=np.int64) * N_SEATS
        self._base = np.arange(n, dtype=np.int64) * block
        self._scratch = n * block  # where the card-play writes of bidding hands land
        self._buf = np.zeros(n * block + block, dtype=np.uint8)
        self._rows = self._buf[: n * block].reshape(n * N_SEATS, w)  # [hand*4 + viewer]
        self._views = self._buf[: n * block].reshape(n, N_SEATS, w)
        # The bidding header of every row as one 29-byte item: whole-header copies.
        self._headers = _field_view(self._buf, n * N_SEATS, _HDR, _HDR_END - _HDR, w)

        def ints() -> np.ndarray:
            return np.zeros(n, dtype=np.int64)

        # Bidding.
        self._phase, self._to_move, self._dealer = ints(), ints(), ints()
        self._trump, self._chooser, self._delegated = ints(), ints(), ints()
        self._level = ints()
        self._second_asked = ints()  # 1: the first of the team asked has passed
        self._winners_row = ints()  # trump * WINNERS_STRIDE: the row block of _WINNERS
        self._in_play = np.zeros(n, dtype=bool)
        # The trick in progress.
        self._cards_in_trick, self._trick_points, self._led_suit = ints(), ints(), ints()
        self._win_card, self._win_seat, self._leader = ints(), ints(), ints()
        self._trick_cards = np.zeros((n, N_SEATS), dtype=np.int64)  # by seat
        self._trick_flat = self._trick_cards.reshape(-1)
        # The hand and the match.
        self._tricks_done, self._hand_number = ints(), ints()
        self._team_tally = np.zeros((n, 4), dtype=np.int64)  # tricks (A, B), points (A, B)
        # The observation's team block (tricks, points as mine/theirs) by seat parity: 8 bytes
        # per env, seen as one item per env (writes) and one per parity (reads).
        self._team_bytes = np.zeros((n, 2, 4), dtype=np.uint8)
        self._team_env = self._team_bytes.reshape(n, 8).view("V8").reshape(n)
        self._team_parity = self._team_bytes.reshape(n * 2, 4).view("V4").reshape(n * 2)
        self._match_scores = np.zeros((n, 2), dtype=np.int64)  # match scores before this hand
        self._hands = np.zeros((n, N_SEATS), dtype=_U64)
        self._hands_flat = self._hands.reshape(-1)
        self._initial = np.zeros((n, N_SEATS), dtype=_U64)
        self._legal = np.zeros(n, dtype=_U64)

        # The rows of a fresh deal, per dealer and viewer: the opening position as
        # observation.encode defines it (header, options, v1's variants, an empty history),
        # without the hand, which is pasted per deal. Match fields are written per hand.
        t = np.stack(
            [
                [
                    encode(Game(self.options, d, _SUIT_HANDS), v, self.obs_version)
                    for v in range(N_SEATS)
                ]
                for d in range(N_SEATS)
            ]
        )
        t[:, :, :N_CARDS] = 0
        self._template = t

    # ------------------------------------------------------------------ public API
    def reset(
        self, seed: int | None = None, *, dealers: Any = None, hands: Any = None
    ) -> tuple[Any, Any, Any]:
        """Start a new episode in every env; returns ``(obs, mask, seat)``.

        ``seed`` reseeds the engine's generator (deals, dealers). ``dealers`` (N,) and/or
        ``hands`` (N, 4, 12 card ids, by absolute seat) fix the first deal of every env
        (tests, duplicate play); otherwise the dealer is drawn (or ``first_dealer``) and the
        hands come from the deal function if one is set, else from the generator.
        """
        seed = check_seed(seed)
        n = self.num_envs
        d = None if dealers is None else self._check_dealers(dealers, n)
        ids = np.arange(n, dtype=np.int64)
        hb = None if hands is None else self._check_hands(hands, ids, "hands")
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        if d is None:
            d = self._draw_dealers(n)
        self._match_scores[:] = 0
        self._hand_number[:] = 0
        self._start_hands(ids, d, hb)
        self._started = True
        self._final_ids = self._final_ids[:0]
        self._final_views = self._final_views[:0]
        mask, obs, seat = self._outputs()
        return self._out((self._formatted(obs), mask, seat), self.device)

    def step(self, actions: Any, active: Any = None) -> tuple[Any, Any, Any, Any, Any]:
        """Apply one action per env, for the seat to move there.

        Returns ``(obs, mask, seat, rewards, done)``: the next decision of every env (after an
        auto-reset, the new episode's first), the rewards of all four seats for this step and
        whether the episode ended on it. ``active`` (bool (N,), optional): only those envs
        move; the others stay exactly where they are (their actions are ignored, their
        rewards 0). A wrong shape or dtype, or an illegal action in any moving env, raises
        ValueError naming it, and leaves every env as it was.
        """
        self._require_started()
        device = self.device
        if _is_tensor(actions):
            if device is None:
                device = str(actions.device)
            if actions.dtype.is_floating_point or actions.dtype.is_complex:
                raise ValueError(f"actions must be integers, got torch dtype {actions.dtype}")
            actions = actions.detach().to("cpu").numpy()
        a = np.asarray(actions)
        n = self.num_envs
        if a.shape != (n,):
            raise ValueError(f"actions must have shape ({n},), one per env; got {a.shape}")
        if a.dtype.kind not in "iu":
            raise ValueError(f"actions must be an integer array, got dtype {a.dtype}")
        a = a.astype(np.int64, copy=False)
        held = None
        if active is not None:
            act = self._check_active(active)
            if not act.all():
                held = np.flatnonzero(~act)
                a = np.where(act, a, _INERT)
        au = a.astype(_U64)  # negative ids wrap to huge shifts, which give 0: illegal
        ok = (self._legal >> au) & _U64(1)
        if held is not None:
            ok[held] = 1
        if not ok.all():
            self._raise_illegal(a, int(np.flatnonzero(ok == 0)[0]))

        rewards = np.zeros((n, N_SEATS), dtype=np.float32)
        done = np.zeros(n, dtype=bool)
        if held is None:
            bidding = np.flatnonzero(~self._in_play)
            ended = self._play(a, au, self._in_play)
        else:
            moving = np.ones(n, dtype=bool)
            moving[held] = False
            bidding = np.flatnonzero(~self._in_play & moving)
            legal = self._legal[held]
            ended = self._play(a, au, self._in_play & moving)
            self._legal[held] = legal  # _play recomputes every env's legal set
        if bidding.size:
            self._bid(bidding, a[bidding])
        if self.keep_final_obs:
            self._final_ids = self._final_ids[:0]
            self._final_views = self._final_views[:0]
        if ended.size:
            self._end_hands(ended, rewards, done)
        mask, obs, seat = self._outputs()
        return self._out((self._formatted(obs), mask, seat, rewards, done), device)

    def final_observations(self) -> tuple[np.ndarray, Any]:
        """``(env_ids (k,), obs (k, 4, observation_size))``: for the episodes that ended on the last
        :meth:`step`, every seat's observation (by absolute seat) of the finished position, as
        ``butifarra_v0`` shows it once the episode is over (phase ``hand_over``), before the
        auto-reset dealt the next one. Needs ``keep_final_obs=True``."""
        if not self.keep_final_obs:
            raise RuntimeError("final_observations() needs BatchedEnv(..., keep_final_obs=True)")
        self._require_started()
        views = self._final_views
        if self.obs_format == "float32":
            views = views * self._obs_scale
        return self._final_ids.copy(), self._out((views,), self.device)[0]

    def state(self) -> Any:
        """(N, STATE_SIZE) uint8 full information (all hands), as ``observation.encode_state``:
        for centralised critics. The v0 state under either ``obs_version`` (module docs)."""
        self._require_started()
        n = self.num_envs
        out = np.zeros((n, STATE_SIZE), dtype=np.uint8)
        out[:, : N_SEATS * N_CARDS] = self._views[:, :, :N_CARDS].reshape(n, N_SEATS * N_CARDS)
        out[:, N_SEATS * N_CARDS : CANONICAL_SIZE] = self._views[:, 0, N_CARDS:OBS_SIZE]
        out[:, _STATE_TEAM : _STATE_TEAM + 4] = self._team_bytes[:, 0]
        out[np.arange(n), CANONICAL_SIZE + self._to_move] = 1
        if self.obs_format == "float32":
            return self._out((out * _STATE_SCALE,), self.device)[0]
        return self._out((out,), self.device)[0]

    def set_deal_fn(self, deal_fn: DealFn | None) -> None:
        """Deal every later hand (auto-resets, and resets without ``hands``) with
        ``deal_fn(env_ids, dealers) -> (k, 4, 12) card ids``; None restores random deals.

        Dealers still come from the generator, ``first_dealer`` or the match rotation. For
        duplicate-deal arenas and for replaying auto-reset hands in a reference. A deal
        function that fails or returns a bad deal during ``step`` raises there and leaves
        the engine mid-step: call :meth:`reset` after such an error.
        """
        if deal_fn is not None and not callable(deal_fn):
            raise ValueError(f"deal_fn must be callable or None, got {deal_fn!r}")
        self._deal_fn = deal_fn

    def current_deals(self) -> tuple[np.ndarray, np.ndarray]:
        """``(dealers (N,), hands (N, 4, 12))``: the dealer and initial hands (sorted card ids,
        by absolute seat) of the hand each env is playing, so any hand can be replayed."""
        self._require_started()
        n = self.num_envs
        cards = np.nonzero(rules.card_bits_array(self._initial))[2].reshape(n, N_SEATS, N_TRICKS)
        return self._dealer.copy(), cards.astype(np.int64)

    def match_info(self) -> tuple[np.ndarray, np.ndarray]:
        """``(hand_number (N,), match_scores (N, 2))`` of the hand each env is playing (scores
        before it, team A then B); all zeros when an episode is one hand."""
        self._require_started()
        return self._hand_number.copy(), self._match_scores.copy()

    # ------------------------------------------------------------------ card play
    def _play(self, a: np.ndarray, au: np.ndarray, isplay: np.ndarray) -> np.ndarray:
        """Card play in the envs ``isplay`` (bool (N,)); the others, bidding or held, pass
        through inert (their action has no card bit, no points and no suit; their writes go to
        the scratch block). Then the legal set of every env's next seat. Returns the envs
        whose hand just ended."""
        s = self._to_move
        hidx = self._seat_base + s
        self._hands_flat[hidx] ^= np.take(_BIT, a)
        self._trick_flat[hidx] = a
        first = self._cards_in_trick == 0
        suit = np.take(_SUIT_OF, a)
        led = np.where(first, suit, self._led_suit)
        leader = np.where(first, s, self._leader)
        self._led_suit = led
        self._leader = leader
        takes = (np.take(_WINNERS, self._winners_row + self._win_card) >> au) & _U64(1)
        takes = takes.view(bool)[::8] if _LITTLE else takes.astype(bool)  # low byte of each
        np.copyto(self._win_card, a, where=takes)
        np.copyto(self._win_seat, s, where=takes)
        self._trick_points += np.take(_PTS, a)
        self._cards_in_trick += isplay

        rt = self._rt
        base = np.where(isplay, self._base, self._scratch)
        self._buf[base + np.take(rt.hand_bit, s * N_ACTIONS + a)] = 0
        idx = np.take(rt.play, s * N_ACTIONS + a, axis=0)
        idx += base[:, None]
        self._buf[idx.reshape(-1)] = 1
        if self._history:  # v1: the card's trick number (1-12) in the four views
            idx = np.take(rt.card_trick, a, axis=0)
            idx += base[:, None]
            self._buf[idx] = (self._tricks_done + 1).astype(np.uint8)[:, None]
        lead = np.flatnonzero(first & isplay)  # a new trick: mark its leader
        if lead.size:
            idx = np.take(rt.leader, np.take(s, lead), axis=0)
            idx += np.take(self._base, lead)[:, None]
            self._buf[idx.reshape(-1)] = 1
        void = np.flatnonzero(suit != led)  # did not follow: void in the led suit
        if void.size:
            void = void[np.take(isplay, void)]  # not a held env's inert action mid-trick
        if void.size:
            code = np.take(s, void) * N_SUITS + np.take(led, void)
            idx = np.take(rt.void, code, axis=0)
            idx += np.take(self._base, void)[:, None]
            self._buf[idx.reshape(-1)] = 1

        self._to_move = np.where(isplay, (s + 1) & 3, s)
        closed = np.flatnonzero(self._cards_in_trick == N_SEATS)
        ended = self._close_tricks(closed) if closed.size else closed

        to_move = self._to_move  # bidding envs: overwritten by _bid
        self._legal = rules.legal_cards_array(
            np.take(self._hands_flat, self._seat_base + to_move),
            self._led_suit,
            self._win_card,
            ((self._win_seat ^ to_move) & 1) == 1,
            self._trump,
            self.options.obligada,
        )
        return ended

    def _close_tricks(self, c: np.ndarray) -> np.ndarray:
        """Score the finished tricks of envs ``c`` and clear the table; returns the envs whose
        hand is over."""
        w = np.take(self._win_seat, c)
        tt = self._team_tally.reshape(-1)
        team = c * 4 + (w & 1)
        tt[team] += 1
        tt[team + 2] += np.take(self._trick_points, c) + 1
        done_tricks = np.take(self._tricks_done, c) + 1
        self._tricks_done[c] = done_tricks
        view = np.take(self._team_tally, c, axis=0)[:, _TEAM_PERM].astype(np.uint8)
        self._team_env[c] = view.reshape(-1).view("V8")
        rt = self._rt
        base = np.take(self._base, c)[:, None]
        cards = np.take(self._trick_cards, c, axis=0)
        cards += _SEAT_ROWS
        clear = np.take(rt.trick_clear, cards.reshape(-1), axis=0).reshape(c.size, -1)
        clear += base
        self._buf[clear.reshape(-1)] = 0
        leader = np.take(self._leader, c)
        clear = np.take(rt.leader, leader, axis=0)
        clear += base
        self._buf[clear.reshape(-1)] = 0
        if self._history:  # v1: who led and who won this trick (done_tricks - 1)
            idx = np.take(rt.history, leader * N_SEATS + w, axis=0)
            idx += base + (done_tricks - 1)[:, None]
            self._buf[idx.reshape(-1)] = 1
        self._to_move[c] = w
        self._cards_in_trick[c] = 0
        self._trick_points[c] = 0
        self._led_suit[c] = NO_SUIT
        self._win_card[c] = _NO_CARD
        return c[done_tricks == N_TRICKS]

    # ------------------------------------------------------------------ bidding
    def _bid(self, b: np.ndarray, a: np.ndarray) -> None:
        """Trump choice, delegation and the doubling chain, for the envs in ``b``.

        Every env in ``b`` takes exactly one of four transitions, decided column-wise:

        * delegate: the partner must choose (phase ``choose_trump_delegated``);
        * choose a suit or butifarra: the next seat is asked to double, or play starts when
          doubling is off (a cap of 0 for that trump);
        * double: the level rises; the next seat (the other team) is asked, or play starts
          at the top level (:func:`rules.doubling_cap`: ``max_doubling_level``, or
          ``butifarra_max_doubling_level`` for a butifarra);
        * pass: the passer's partner is asked; a second pass in a row (``_second_asked``)
          starts the play. ``_second_asked`` is reset by any other move, so it always
          refers to the team being asked now.

        Play starts with the mano (the player after the dealer) to lead.
        """
        s = self._to_move[b]
        o = self.options
        deleg = a == DELEGATE
        choose = a <= BUTIFARRA  # 48-52
        dbl = a == DOUBLE
        pas = a == PASS
        if deleg.any():
            self._delegated[b[deleg]] = 1
        if choose.any():
            bc = b[choose]
            trump = a[choose] - TRUMP_BASE  # butifarra (52) -> 4 = NO_TRUMP
            self._trump[bc] = trump
            self._winners_row[bc] = trump * rules.WINNERS_STRIDE
            self._chooser[bc] = s[choose]
        level = self._level[b] + dbl
        self._level[b] = level
        # the top of the chain for the trump each env has (unset while choosing: not read)
        cap = rules.doubling_cap(
            self._trump[b], o.max_doubling_level, o.butifarra_max_doubling_level
        )
        start = (
            (choose & (cap == 0)) | (dbl & (level >= cap)) | (pas & (self._second_asked[b] == 1))
        )
        ask = (choose | dbl) & ~start  # the next seat is asked to double
        # choose -> first_asked_to_double, double -> asked_after_double (both the next seat);
        # delegate -> the partner; a first pass -> asked_after_pass (the partner).
        to_move = np.where(deleg | (pas & ~start), rules.partner_of(s), rules.next_seat(s))
        to_move = np.where(start, rules.mano(self._dealer[b]), to_move)
        phase = np.where(deleg, PHASE_CHOOSE_TRUMP_DELEGATED, self._phase[b])
        phase = np.where(ask, PHASE_DOUBLING, phase)
        phase = np.where(start, PHASE_PLAY, phase)
        self._second_asked[b] = pas
        self._phase[b] = phase
        self._in_play[b] = start
        self._to_move[b] = to_move
        asked = np.where(phase == PHASE_DOUBLING, _U64(DOUBLING_MASK), _U64(TRUMP_CHOICE_MASK))
        self._legal[b] = np.where(start, self._hands_flat[b * N_SEATS + to_move], asked)
        self._write_header(b)

    def _write_header(self, b: np.ndarray) -> None:
        """Rewrite the bidding header (trump .. phase) of the four views of envs ``b``."""
        phase = self._phase[b]
        turn = np.where(phase == PHASE_DOUBLING, self._to_move[b] + 1, 0)
        g1 = (self._trump[b] * (N_SEATS + 1) + self._chooser[b] + 1) * 2 + self._delegated[b]
        header = np.take(_HEADER_1, g1, axis=0)
        header |= np.take(_HEADER_2, self._dealer[b] * _LEVELS + self._level[b], axis=0)
        header |= np.take(_HEADER_3, turn * len(PHASE_NAMES) + phase, axis=0)
        rows = (b * N_SEATS)[:, None] + np.arange(N_SEATS)
        self._headers[rows.reshape(-1)] = header.reshape(-1).view(self._headers.dtype)

    # ------------------------------------------------------------------ hand ends, deals
    def _end_hands(self, e: np.ndarray, rewards: np.ndarray, done: np.ndarray) -> None:
        """Score the hands of envs ``e``, report rewards, deal the next hand or episode."""
        o = self.options
        mult = rules.multiplier(self._trump[e], self._level[e], o.butifarra_base, o.linear_doubling)
        scores = rules.hand_scores(self._team_tally[e, 2:4], mult)
        margin = (scores[:, 0] - scores[:, 1])[:, None] * _SEAT_SIGN
        rewards[e] = margin * self.reward_scale  # float64 product, then float32: as the env
        target = self.options.target_score
        fresh = self._draw_dealers(e.size)
        if target is None:
            done[e] = True
            if self.keep_final_obs:
                self._keep_final(e)
            self._start_hands(e, fresh, None)
            return
        match_scores = self._match_scores[e] + scores
        over = rules.match_over(match_scores, target)
        done[e] = over
        if self.keep_final_obs and over.any():
            self._keep_final(e[over])
        self._match_scores[e] = np.where(over[:, None], 0, match_scores)
        self._hand_number[e] = np.where(over, 0, self._hand_number[e] + 1)
        self._start_hands(e, np.where(over, fresh, rules.next_dealer(self._dealer[e])), None)

    def _keep_final(self, e: np.ndarray) -> None:
        """Keep the four views of the finished hands of envs ``e`` (before they are dealt
        again), completed as the reference shows them: the team block pasted in, the phase
        ``hand_over``."""
        views = self._views[e]
        views[:, :, OFFSETS["phase"] + PHASE_PLAY] = 0
        views[:, :, OFFSETS["phase"] + PHASE_HAND_OVER] = 1
        views[:, :, _TEAM_BLOCK : _TEAM_BLOCK + 4] = self._team_bytes[e][:, [0, 1, 0, 1]]
        self._final_ids = np.concatenate([self._final_ids, e])
        self._final_views = np.concatenate([self._final_views, views])

    def _draw_dealers(self, k: int) -> np.ndarray:
        if self.options.first_dealer is not None:
            return np.full(k, self.options.first_dealer, dtype=np.int64)
        return self._rng.integers(0, N_SEATS, size=k, dtype=np.int64)

    def _deal(self, ids: np.ndarray, dealers: np.ndarray) -> np.ndarray:
        """(k, 4) uint64 hands for envs ``ids``: from the deal function, or a uniform shuffle
        dealt four cards at a time from the seat after the dealer, as ``game.deal``."""
        if self._deal_fn is not None:
            return self._check_hands(self._deal_fn(ids.copy(), dealers.copy()), ids, "deal_fn")
        k = ids.size
        deck = self._rng.random((k, N_CARDS)).argsort(axis=1)
        by_turn = _bitboards(deck[:, _DEAL_POS].reshape(k, N_SEATS, N_TRICKS))
        pick = np.take(_DEAL_ROT, dealers, axis=0) + (np.arange(k) * N_SEATS)[:, None]
        return np.take(by_turn, pick)

    def _start_hands(self, e: np.ndarray, dealers: np.ndarray, hands: np.ndarray | None) -> None:
        """Put envs ``e`` at the first decision of a new hand dealt by ``dealers`` (their hand
        number and match scores already set)."""
        if hands is None:
            hands = self._deal(e, dealers)
        self._hands[e] = hands
        self._initial[e] = hands
        self._dealer[e] = dealers
        self._to_move[e] = dealers
        for arr, value in (
            (self._phase, PHASE_CHOOSE_TRUMP),
            (self._trump, TRUMP_UNSET),
            (self._winners_row, TRUMP_UNSET * rules.WINNERS_STRIDE),
            (self._chooser, -1),
            (self._delegated, 0),
            (self._level, 0),
            (self._second_asked, 0),
            (self._in_play, False),
            (self._cards_in_trick, 0),
            (self._trick_points, 0),
            (self._led_suit, NO_SUIT),
            (self._win_card, _NO_CARD),
            (self._win_seat, 0),
            (self._leader, 0),
            (self._tricks_done, 0),
            (self._team_tally, 0),
        ):
            arr[e] = value
        self._team_bytes[e] = 0
        self._legal[e] = DEALER_ACTIONS_MASK
        rows = self._template[dealers]
        rows[:, :, :N_CARDS] = rules.card_bits_array(hands)
        if self.options.target_score is not None:
            rows[:, :, OFFSETS["hand_number"]] = np.minimum(self._hand_number[e], CLIP)[:, None]
            scores = np.minimum(self._match_scores[e], CLIP)
            rows[:, :, _MATCH : _MATCH + 2] = scores[:, _MATCH_PERM]
        self._views[e] = rows

    # ------------------------------------------------------------------ helpers
    def _outputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fresh (mask, obs, seat) for the seat to move in every env."""
        n = self.num_envs
        legal = self._legal if _LITTLE else self._legal.astype("<u8")
        mask = np.take(_BYTE_BITS, legal.view(np.uint8).reshape(n, 8)[:, :7], axis=0)
        seat = self._to_move.copy()
        obs = np.take(self._rows, self._seat_base + seat, axis=0)
        team = _field_view(obs, n, _TEAM_BLOCK, 4, self._rt.width)
        team[...] = np.take(self._team_parity, self._parity_base + (seat & 1))
        return mask.reshape(n, N_ACTIONS), obs, seat

    @staticmethod
    def _out(arrays: tuple[np.ndarray, ...], device: str | None) -> tuple[Any, ...]:
        if device is None:
            return arrays
        torch = _torch()
        out = tuple(torch.from_numpy(x) for x in arrays)
        if torch.device(device).type != "cpu":
            out = tuple(t.to(device) for t in out)
        return out

    def _formatted(self, obs: np.ndarray) -> np.ndarray:
        """Observations in ``obs_format``: the bytes, or float32 scaled into [0, 1]."""
        return obs * self._obs_scale if self.obs_format == "float32" else obs

    def _check_active(self, active: Any) -> np.ndarray:
        if _is_tensor(active):
            active = active.detach().to("cpu").numpy()
        m = np.asarray(active)
        if m.shape != (self.num_envs,) or m.dtype != np.bool_:
            raise ValueError(
                f"active must be a bool array of shape ({self.num_envs},), got {m.dtype} {m.shape}"
            )
        return m

    def _require_started(self) -> None:
        if not self._started:
            raise RuntimeError("call reset() before step(), state() or current_deals()")

    def _raise_illegal(self, a: np.ndarray, i: int) -> None:
        legal = int(self._legal[i])
        names = ", ".join(f"{x} ({action_name(x)})" for x in range(N_ACTIONS) if legal >> x & 1)
        act = int(a[i])
        what = f"{act} ({action_name(act)})" if 0 <= act < N_ACTIONS else f"{act} (not 0-55)"
        raise ValueError(
            f"illegal action {what} in hand {i} for seat {int(self._to_move[i])} in phase "
            f"{PHASE_NAMES[int(self._phase[i])]!r}; legal actions: [{names}]"
        )

    @staticmethod
    def _check_dealers(dealers: Any, n: int) -> np.ndarray:
        d = np.asarray(dealers)
        if d.shape != (n,) or d.dtype.kind not in "iu":
            raise ValueError(f"dealers must be ints of shape ({n},), got {d.dtype} {d.shape}")
        bad = np.flatnonzero((d < 0) | (d >= N_SEATS))
        if bad.size:
            raise ValueError(f"dealers must be seats 0-3; hand {bad[0]} has {d[bad[0]]}")
        return d.astype(np.int64)

    @staticmethod
    def _check_hands(hands: Any, ids: np.ndarray, what: str) -> np.ndarray:
        """(k, 4, 12) card ids for envs ``ids`` (each the 48 cards once) -> (k, 4) uint64."""
        h = np.asarray(hands)
        k = ids.size
        if h.shape != (k, N_SEATS, N_TRICKS) or h.dtype.kind not in "iu":
            raise ValueError(
                f"{what} must be card ids of shape ({k}, 4, 12), got {h.dtype} {h.shape}"
            )
        flat = np.sort(h.reshape(k, N_CARDS), axis=1)
        bad = np.flatnonzero((flat != np.arange(N_CARDS)).any(axis=1))
        if bad.size:
            raise ValueError(
                f"{what}: hand {ids[bad[0]]} does not hold the 48 cards (ids 0-47) exactly once"
            )
        return _bitboards(h.astype(np.int64))
