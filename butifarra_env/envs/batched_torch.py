"""The batched engine as torch tensors on one device: :class:`BatchedEnv`'s rules, bytes and
rewards, with every hand's state in device memory and no host round trip inside ``step``.

:class:`TorchBatchedEnv` is the GPU twin of :class:`~butifarra_env.envs.batched.BatchedEnv`
(which stays the CPU engine; its ``device=`` only hands its numpy results over as tensors).
It takes the same constructor options and has the same methods; the differences are that
everything it returns is a tensor on its device, that it deals from a device
``torch.Generator`` (so a seed gives other deals than the numpy engine's), and the
``check`` switch below. ``tests/test_batched_torch.py`` drives both engines through the same
deals and actions and asserts identical observations (both formats), masks, seats, rewards,
episode ends and states at every step.

Design (the numpy engine's, re-cut for a device where arithmetic is cheap and every host
read stalls the queue):

* **One rules source.** The legal-card tables are the rules core's (``rules.WINNERS_FLAT``,
  ``FOLLOW``, obligada's ``LOWEST_TABLE``: what :func:`~butifarra_env.core.rules.legal_cards_array`
  reads), the others the numpy engine's (``_BIT``, the bidding-header tables, the deal
  order...), which it builds from :mod:`butifarra_env.core.rules`; the doubling cap, the
  multiplier and the hand scores are tabulated by calling
  :func:`~butifarra_env.core.rules.doubling_cap`, :func:`~butifarra_env.core.rules.multiplier`
  and :func:`~butifarra_env.core.rules.hand_scores` once per option set; seat arithmetic
  calls the rules functions on tensors. Nothing is re-derived here. Every option of
  ``butifarra_v0`` is played, the variants ``obligada``, ``linear_doubling`` and
  ``butifarra_max_doubling_level`` included.
* **Compact state, observations encoded on output.** A hand is a few int64 columns (hands and
  the cards on the trick as bitboards, void flags, bidding and trick registers): about 330
  bytes, against the numpy engine's four 491-byte rows. The mover's observation is built each
  step from them (bitboards unpacked to bytes, the header OR-ed from the three header tables,
  the team block gathered by seat parity), so a new deal only resets a few columns.
* **Observation versions.** ``obs_version`` (0 or 1) is the numpy engine's (validated by it):
  every observation returned is that layout, ``state()`` is v0's under both. A v1 engine
  keeps three more registers (72 bytes a hand): the trick leaders and winners as two 48-bit
  boards (bit seat * 12 + trick, rotated into the viewer's frame like the void nibbles and
  unpacked like the hands) and one byte per action id with the trick number of each card
  played (a scatter per step; the bidding ids' columns take the inert writes). A v0 engine
  has none of them and does none of that work.
* **Branch-free.** Every step runs the card play, the trick close, the bidding and the hand
  end over all hands, each selected with masks (``torch.where``); there is no Python loop over
  hands, no data-dependent shape and no ``.item()`` on the hot path, so a CUDA step only
  queues kernels.
* **Few, cheap ops per step** (on CPU every op costs a few microseconds however small):
  bitboards unpack to bytes through a 256-entry byte -> 8 bytes table (one gather), table
  lookups are ``take``/``index_select`` (not advanced indexing), index arithmetic is one
  ``torch.add(..., alpha=)`` per multiply-add, and registers are reset in place
  (``masked_fill_``). ``compile=True`` hands the whole rules step (:meth:`_advance`, one graph)
  to ``torch.compile``, which fuses it further; validation and the deal pool stay eager.
* **Dealing on the device.** Deals come from a pool of one fresh deal per env (argsort of
  random keys, dealt four at a time from the seat after the dealer, as ``rules.deal``),
  redrawn every 48 steps: a hand lasts at least 49 decisions, so no env uses a pool entry
  twice.

Validation: with ``check=True`` (the default) ``step`` refuses a wrong shape, a non-integer
dtype and any illegal action with the numpy engine's ValueError, leaving every env as it was;
the legality test costs one device-to-host read of a single bool per step (on CUDA a
synchronisation that stalls the launch queue; on CPU nothing). ``check=False`` never reads the
device: an illegal or out-of-range action is replaced by the lowest legal action id of its env
and counted in :attr:`TorchBatchedEnv.illegal_actions` (a device tensor), so the engine cannot
be put in an impossible state and a training loop can read the count when it syncs anyway.

Fixed deals: ``reset(dealers=..., hands=...)`` as the numpy engine, and
:meth:`TorchBatchedEnv.set_deal_fn` (a host callback, so a step that ends a hand synchronises;
for tests and duplicate-deal arenas, not for training speed).

Usage::

    from butifarra_env.envs.batched_torch import TorchBatchedEnv

    eng = TorchBatchedEnv(65536, seed=0, device="cuda", obs_format="float32")
    obs, mask, seat = eng.reset()                        # (N, 491), (N, 56) i8, (N,) i64
                                                         # (N, 638) with obs_version=1
    obs, mask, seat, rewards, done = eng.step(actions)  # actions: (N,) int tensor on the device
    critic_in = eng.state()                              # (N, 639)

This module imports torch at the top: import it only where torch is installed (the package
``butifarra_env.envs`` does not import it).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from typing import Any, cast

import numpy as np
import torch
from torch import Tensor

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
from butifarra_env.core.cards import N_CARDS, N_TRICKS, TOTAL_POINTS
from butifarra_env.core.observation import (
    CANONICAL_SIZE,
    CLIP,
    LAYOUT_V1,
    OBS_SIZE,
    OFFSETS,
    SIZES,
    STATE_SIZE,
)
from butifarra_env.core.options import Options
from butifarra_env.core.rules import (
    N_SEATS,
    NO_SUIT,
    NO_TRUMP,
    PHASE_CHOOSE_TRUMP,
    PHASE_CHOOSE_TRUMP_DELEGATED,
    PHASE_DOUBLING,
    PHASE_HAND_OVER,
    PHASE_NAMES,
    PHASE_PLAY,
    TRUMP_UNSET,
)
from butifarra_env.core.validate import check_int, check_seed
from butifarra_env.envs import batched as _np_engine
from butifarra_env.envs.batched import BatchedEnv

__all__ = ["TorchBatchedEnv", "TorchDealFn"]

TorchDealFn = Callable[[np.ndarray, np.ndarray], Any]
"""``deal_fn(env_ids, dealers)``: as :data:`butifarra_env.envs.batched.DealFn` (numpy in, the
(k, 4, 12) card ids out); with ``with_dealers=True`` it returns ``(dealers, hands)``."""

_IMPLEMENTED_OPTIONS = (
    "target_score",
    "max_doubling_level",
    "butifarra_base",
    "first_dealer",
    "obligada",
    "linear_doubling",
    "butifarra_max_doubling_level",
)
"""The Options fields this engine plays; any other field set away from its default is refused
(a variant added to the rules must be added here, not silently ignored)."""

_NO_CARD = _np_engine._NO_CARD
_INERT = _np_engine._INERT
_LEVELS = SIZES["doubling_level"]
_N_PHASES = len(PHASE_NAMES)
_TRUMPS = SIZES["trump"]
_HDR = OFFSETS["trump"]  # the bidding header, trump .. phase, contiguous
_HDR_END = OFFSETS["phase"] + SIZES["phase"]
_HDR_SIZE = _HDR_END - _HDR
_TEAM = OFFSETS["team_tricks"]
_BITS_END = OFFSETS["voids"] + SIZES["voids"]  # everything before the header is 0/1 bits
_TAIL = OFFSETS["target_score"]  # target_score, max_doubling_level, butifarra_base: constants
_REFILL = N_TRICKS * N_SEATS  # steps between pool redraws: < 49, the shortest hand
_POINTS = TOTAL_POINTS + 1  # team points 0..72
_SUIT_CARDS = N_CARDS // 4
_SUIT_BITS = (1 << _SUIT_CARDS) - 1
_LITTLE = sys.byteorder == "little"  # bitboards are read byte by byte through a uint8 view
_V1_TAIL = LAYOUT_V1.offsets["obligada"]  # obligada, linear_doubling, the cap: constants
_HISTORY_MASK = (1 << N_CARDS) - 1  # trick_led / trick_won: bit seat * 12 + trick, 48 bits

# The observation is built as [9 bitboards: hand, played x4, trick x4][leader | voids bits]
# [header][team][hand_number][match_scores][constants]: the layout must be exactly FIELDS'.
assert OFFSETS["played"] == N_CARDS and OFFSETS["trick_leader"] == 9 * N_CARDS
assert OFFSETS["voids"] == OFFSETS["trick_leader"] + N_SEATS and _BITS_END == _HDR
assert _HDR_END == _TEAM and OFFSETS["hand_number"] == _TEAM + 4
assert OFFSETS["match_scores"] == _TEAM + 5 and _TAIL == _TEAM + 7 and OBS_SIZE == _TAIL + 3
assert BUTIFARRA - TRUMP_BASE == NO_TRUMP  # choosing action a sets trump a - 48
assert STATE_SIZE == CANONICAL_SIZE + N_SEATS == N_SEATS * N_CARDS + OBS_SIZE - N_CARDS + N_SEATS
# v1 appends [trick_led | trick_won: 2 x 48 bits][card_trick: 48 bytes][3 constants].
_V1 = LAYOUT_V1.offsets
assert _V1["trick_led"] == OBS_SIZE and _V1["trick_won"] == OBS_SIZE + N_SEATS * N_TRICKS
assert _V1["card_trick"] == OBS_SIZE + 2 * N_SEATS * N_TRICKS and N_SEATS * N_TRICKS == N_CARDS
assert _V1["card_trick"] + N_CARDS == _V1_TAIL == LAYOUT_V1.size - 3


def _seats(f: Callable[[Any], Any], seat: Tensor) -> Tensor:
    """A seat function of the rules core (pure integer arithmetic) applied to a tensor."""
    return cast(Tensor, f(seat))


def _host(x: Any) -> np.ndarray:
    """A numpy view of ``x`` (a tensor anywhere, or anything numpy takes), for validation."""
    if isinstance(x, Tensor):
        return x.detach().to("cpu").numpy()
    return np.asarray(x)


class _Tables:
    """The numpy engine's tables, and the two rule tables of an option set, on one device."""

    def __init__(self, ref: BatchedEnv, device: torch.device) -> None:
        def put(x: np.ndarray) -> Tensor:
            x = np.ascontiguousarray(x)
            if x.dtype == np.uint64:  # every bitboard is below 2**56: the same values
                x = x.view(np.int64)
            return torch.from_numpy(x.copy()).to(device)

        e = _np_engine
        self.bit = put(e._BIT)
        self.pts = put(e._PTS)
        self.suit_of = put(e._SUIT_OF)
        self.suit_mask = put(rules.FOLLOW)
        self.winners = put(rules.WINNERS_FLAT)
        self.opp_mask = put(np.array([0, (1 << N_ACTIONS) - 1], dtype=np.uint64))  # by parity
        self.lowest = put(rules.LOWEST_TABLE)  # obligada: 12-bit suit pattern -> its weakest card
        self.header = [put(h.reshape(-1, _HDR_SIZE)) for h in (e._HEADER_1, e._HEADER_2)]
        self.header.append(put(e._HEADER_3.reshape(-1, _HDR_SIZE)))
        self.deal_pos = put(e._DEAL_POS)
        self.deal_rot = put(e._DEAL_ROT)
        self.team_perm = put(e._TEAM_PERM)  # by seat parity
        self.match_perm = put(e._MATCH_PERM)  # by viewer
        self.seat_sign = put(e._SEAT_SIGN)
        self.obs_scale = put(ref._obs_scale)  # of its observation version
        self.state_scale = put(e._STATE_SCALE)
        self.tail = put(ref._template[0, 0, _TAIL:OBS_SIZE])  # the options' constant bytes
        self.v1_tail = put(ref._template[0, 0, _V1_TAIL:])  # v1's variants (none in v0)
        o = ref.options
        # rules.doubling_cap by trump (unset: not read), as BatchedEnv._bid calls it.
        cap = rules.doubling_cap(
            np.arange(_TRUMPS), o.max_doubling_level, o.butifarra_max_doubling_level
        )
        self.cap = put(np.asarray(cap, dtype=np.int64))
        # rules.multiplier and rules.hand_scores, on every (trump, level) and team-A points
        # (a finished hand's points sum to TOTAL_POINTS): row (trump * 5 + level) * 73 + A.
        trump, level = np.divmod(np.arange(_TRUMPS * _LEVELS), _LEVELS)
        mult = rules.multiplier(trump, level, o.butifarra_base, o.linear_doubling)
        a = np.arange(_POINTS)
        points = np.stack([a, TOTAL_POINTS - a], axis=1)
        scores = rules.hand_scores(np.tile(points, (len(mult), 1)), np.repeat(mult, _POINTS))
        self.scores = put(np.asarray(scores, dtype=np.int64))
        self.seats = torch.arange(N_SEATS, device=device)
        # by viewer v: the columns of [hands, played, trick (by absolute seat), leader | voids]
        # that give [v's hand, played by v, v + 1, v + 2, v + 3, trick of v .. v + 3, leader
        # | voids]
        rel = (np.arange(N_SEATS)[:, None] + np.arange(N_SEATS)) % N_SEATS
        last = np.full((N_SEATS, 1), 3 * N_SEATS)
        self.board_pick = put(
            np.concatenate([rel[:, :1], N_SEATS + rel, 2 * N_SEATS + rel, last], 1)
        )
        # the void bit of (seat, led suit): row seat * 5 + suit; a trick not led yet has none
        void = np.array(
            [[1 << (4 * st + su) if su < 4 else 0 for su in range(5)] for st in range(4)]
        )
        self.void_bit = put(void.reshape(-1).astype(np.int64))
        # a trick's tally increments by (closed, winner's parity), the points column unscaled
        self.tally_unit = put(np.array([[0] * 4, [0] * 4, [1, 0, 1, 0], [0, 1, 0, 1]]))
        self.one = torch.ones((), dtype=torch.int64, device=device)
        self.byte_shift = torch.arange(0, 64, 8, device=device)
        # byte -> its 8 bits (low first) as the 8 bytes of one int64, native byte order
        self.byte_bits = put(_np_engine._BYTE_BITS.view(np.uint8).copy().view(np.int64)[:, 0])


class TorchBatchedEnv:
    """``num_envs`` independent Butifarra episodes stepped together on ``device`` (module docs).

    The constructor takes :class:`~butifarra_env.envs.batched.BatchedEnv`'s arguments and
    options (validated by it, with its messages), plus ``device`` (default ``"cpu"``),
    ``check`` (validate actions in :meth:`step`, one host read per step; see the module docs)
    and ``compile`` (run the step's rules through ``torch.compile``: on CPU a faster step for
    a long run, after a first step that compiles for tens of seconds; where compilation is
    unavailable it warns and steps eagerly). Every method returns torch tensors on ``device``.
    """

    def __init__(
        self,
        num_envs: int,
        seed: int | None = None,
        *,
        device: str | torch.device = "cpu",
        reward_scale: float = 1.0,
        obs_format: str = "uint8",
        keep_final_obs: bool = False,
        obs_version: int = 0,
        check: bool = True,
        compile: bool = False,
        **options: Any,
    ) -> None:
        self.num_envs: int = check_int("num_envs", num_envs, 1)
        # The numpy engine validates every shared argument (same messages) and owns the
        # option-dependent tables; a one-env instance is enough.
        ref = BatchedEnv(
            1,
            seed=0,
            reward_scale=reward_scale,
            obs_format=obs_format,
            keep_final_obs=keep_final_obs,
            obs_version=obs_version,
            **options,
        )
        if not isinstance(check, bool):
            raise ValueError(f"check must be True or False, got {check!r}")
        if not isinstance(compile, bool):
            raise ValueError(f"compile must be True or False, got {compile!r}")
        self.options: Options = ref.options
        defaults = Options()
        for name, value in self.options.to_dict().items():
            if name not in _IMPLEMENTED_OPTIONS and value != getattr(defaults, name):
                raise ValueError(
                    f"TorchBatchedEnv does not implement option {name!r} yet (got {value!r}); "
                    f"it plays {list(_IMPLEMENTED_OPTIONS)}: use BatchedEnv for this variant"
                )
        self.reward_scale: float = ref.reward_scale
        self.obs_format: str = ref.obs_format
        self.keep_final_obs: bool = ref.keep_final_obs
        self.obs_version: int = ref.obs_version
        self._history = ref.obs_version >= 1  # v1: the trick history registers below
        self.check: bool = check
        self.compile: bool = compile
        """Run the step's rules through ``torch.compile`` (see :meth:`_advance`); False again
        after a failed compilation (with a warning), the eager step in its place."""
        self._compiled: Callable[..., Any] | None = None
        self.observation_size: int = ref.observation_size
        self.state_size: int = STATE_SIZE
        self.action_size: int = N_ACTIONS
        try:
            self.device: torch.device = torch.empty(0, device=device).device
        except (RuntimeError, TypeError, ValueError, AssertionError) as err:
            raise ValueError(f"device {device!r} is not usable here: {err}") from err
        seed = check_seed(seed)
        self._gen = torch.Generator(device=self.device)
        if seed is None:
            self._gen.seed()
        else:
            self._gen.manual_seed(seed % 2**64)
        self._tb = _Tables(ref, self.device)
        # the options' constant bytes of every observation, materialised once (cat copies a
        # contiguous block faster than a broadcast one)
        self._tail = self._tb.tail.expand(self.num_envs, -1).contiguous()
        self._v1_tail = self._tb.v1_tail.expand(self.num_envs, -1).contiguous()
        self._deal_fn: TorchDealFn | None = None
        self._deal_fn_dealers = False
        self._started = False
        self._steps = 0
        self.illegal_actions: Tensor = torch.zeros((), dtype=torch.int64, device=self.device)
        """Illegal actions replaced by the lowest legal one since construction (check=False)."""

        n = self.num_envs
        dev = self.device

        def ints(*shape: int) -> Tensor:
            return torch.zeros((n, *shape), dtype=torch.int64, device=dev)

        # Bidding.
        self._phase, self._to_move, self._dealer = ints(), ints(), ints()
        self._trump, self._chooser, self._delegated = ints(), ints(), ints()
        self._level, self._second_asked = ints(), ints()
        self._in_play = torch.zeros(n, dtype=torch.bool, device=dev)
        # The trick in progress.
        self._cards_in_trick, self._trick_points, self._led_suit = ints(), ints(), ints()
        self._win_card, self._win_seat, self._leader = ints(), ints(), ints()
        self._trick_bb = ints(N_SEATS)  # the bit of the card each seat has on the trick
        self._voids = ints()  # bit seat * 4 + suit: that seat failed to follow that suit
        # The hand and the match.
        self._tricks_done, self._hand_number = ints(), ints()
        self._team_tally = ints(4)  # tricks (A, B), points (A, B)
        self._match_scores = ints(2)  # match scores before this hand
        self._hands, self._initial = ints(N_SEATS), ints(N_SEATS)  # bitboards by seat
        self._legal = ints()  # over the 56 action ids
        # The next deal of every env: bitboards in deal order (1st .. 4th after the dealer).
        self._pool_hands, self._pool_dealers = ints(N_SEATS), ints()
        if self._history:
            # v1: bit seat * 12 + t of trick_led / trick_won: that seat led / won trick t; the
            # trick number (1-12) of every card played, one byte per action id (the bidding
            # ids' columns take the inert writes of envs not playing a card; never read).
            self._trick_led, self._trick_won = ints(), ints()
            self._card_trick = torch.zeros((n, N_ACTIONS), dtype=torch.uint8, device=dev)
        # keep_final_obs: the finished positions of the episodes that ended on the last step.
        self._final_done = torch.zeros(n, dtype=torch.bool, device=dev)
        self._final: dict[str, Tensor] = {}
        if keep_final_obs:
            self._final = {k: v.clone() for k, v in self._position().items()}

    # ------------------------------------------------------------------ public API
    def reset(
        self, seed: int | None = None, *, dealers: Any = None, hands: Any = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Start a new episode in every env; returns ``(obs, mask, seat)``.

        ``seed`` reseeds the device generator. ``dealers`` (N,) and/or ``hands`` (N, 4, 12
        card ids, by absolute seat; numpy or tensors) fix the first deal of every env, as in
        :meth:`BatchedEnv.reset`; otherwise the dealer is drawn (or ``first_dealer``) and the
        hands come from the deal function if one is set, else from the generator.
        """
        seed = check_seed(seed)
        n = self.num_envs
        ids = np.arange(n, dtype=np.int64)
        d = None if dealers is None else BatchedEnv._check_dealers(_host(dealers), n)
        hb = None if hands is None else BatchedEnv._check_hands(_host(hands), ids, "hands")
        if seed is not None:
            self._gen.manual_seed(seed % 2**64)
        self._refill()
        dealer = self._pool_dealers if d is None else self._put(d)
        every = torch.ones(n, dtype=torch.bool, device=self.device)
        if hb is not None:
            new_hands = self._put(hb.view(np.int64))
        elif self._deal_fn is not None:
            dealer, new_hands = self._call_deal_fn(every, dealer, every)
        else:
            new_hands = self._pool_hands.gather(1, self._tb.deal_rot.index_select(0, dealer))
        self._match_scores = torch.zeros_like(self._match_scores)
        self._hand_number = torch.zeros_like(self._hand_number)
        self._start_hands(every, dealer, new_hands)
        self._started = True
        self._steps = 0
        self._final_done = torch.zeros_like(self._final_done)
        obs, mask, seat = self._outputs()
        return obs, mask, seat

    def step(
        self, actions: Any, active: Any = None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """Apply one action per env, for the seat to move there.

        Returns ``(obs, mask, seat, rewards, done)`` as :meth:`BatchedEnv.step` (after an
        auto-reset, the new episode's first decision; rewards (N, 4) float32 of all seats,
        done (N,) bool). ``actions``: (N,) integers, best a tensor on the engine's device
        (anything else is copied there). ``active`` (bool (N,), optional): only those envs
        move. With ``check`` a wrong shape or dtype, or an illegal action in a moving env,
        raises ValueError naming it and leaves every env as it was.
        """
        self._require_started()
        a = self._check_actions(actions)
        act = None if active is None else self._check_active(active)
        if act is not None:
            a = torch.where(act, a, _INERT)
        # legal: bit a + 1 of legal << 1; any id outside 0-55 lands on a zero bit (0 or 57-63)
        ok = (((self._legal << 1) >> (a.clamp(-1, 62) + 1)) & 1) == 1
        if act is not None:
            ok |= ~act
        if self.check:
            if not bool(ok.all()):  # the one host read of a checked step
                self._raise_illegal(a, int(torch.nonzero(~ok)[0, 0]))
        else:
            self.illegal_actions = self.illegal_actions + (~ok).sum()
            a = torch.where(ok, a, self._lowest_legal())

        if self._steps % _REFILL == 0:
            self._refill()
        self._steps += 1
        if act is None:
            isplay, bidding = self._in_play, ~self._in_play
        else:
            isplay, bidding = self._in_play & act, ~self._in_play & act
        if self.compile and self._deal_fn is None:
            out = self._compiled_advance(a, isplay, bidding, act)
            if out is not None:
                return out
        return self._advance(a, isplay, bidding, act)

    def _advance(
        self, a: Tensor, isplay: Tensor, bidding: Tensor, act: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """The rules of one step after validation: tensor ops only (no host read, no Python
        branch on tensor values), so ``torch.compile`` takes it as one graph."""
        legal = self._legal
        ended = self._play(a, isplay)
        if act is not None:
            self._legal = torch.where(act, self._legal, legal)  # _play redid every env's
        self._bid(bidding, a)
        rewards, done = self._end_hands(ended)
        obs, mask, seat = self._outputs()
        return obs, mask, seat, rewards, done

    def _compiled_advance(
        self, a: Tensor, isplay: Tensor, bidding: Tensor, act: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor] | None:
        """:meth:`_advance` through ``torch.compile`` (compiled on first use, one whole graph:
        ``fullgraph=True``, so a failure is raised before any of it runs). None, with a
        warning and ``compile`` switched off, when compilation is unavailable here."""
        try:
            if self._compiled is None:
                self._compiled = torch.compile(self._advance, fullgraph=True, dynamic=False)
            return cast(
                tuple[Tensor, Tensor, Tensor, Tensor, Tensor],
                self._compiled(a, isplay, bidding, act),
            )
        except Exception as err:  # no C++ compiler, no inductor for this device, ...
            self.compile = False
            self._compiled = None
            warnings.warn(
                f"TorchBatchedEnv(compile=True): torch.compile failed ({type(err).__name__}: "
                f"{err}); stepping eagerly instead",
                RuntimeWarning,
                stacklevel=3,
            )
            return None

    def final_observations(self) -> tuple[Tensor, Tensor]:
        """``(env_ids (k,), obs (k, 4, observation_size))``: as
        :meth:`BatchedEnv.final_observations`, the four seats' views of the episodes that ended on
        the last :meth:`step`. Needs ``keep_final_obs=True``; reads the device (the number of such
        episodes)."""
        if not self.keep_final_obs:
            raise RuntimeError(
                "final_observations() needs TorchBatchedEnv(..., keep_final_obs=True)"
            )
        self._require_started()
        ids = torch.nonzero(self._final_done).reshape(-1)
        pos = {k: v[ids] for k, v in self._final.items()}
        views = torch.stack(
            [self._encode(pos, torch.full_like(ids, v), self._history) for v in range(N_SEATS)],
            dim=1,
        )
        if self.obs_format == "float32":
            return ids, views * self._tb.obs_scale
        return ids, views

    def state(self) -> Tensor:
        """(N, STATE_SIZE) full information (all hands), as :meth:`BatchedEnv.state` (v0's
        under either ``obs_version``)."""
        self._require_started()
        pos = self._position()
        seat0 = self._encode(pos, torch.zeros_like(self._to_move), False)  # v0: the state
        to_move = (self._to_move[:, None] == self._tb.seats).to(torch.uint8)
        out = torch.cat([self._unpack(self._hands), seat0[:, N_CARDS:], to_move], dim=1)
        if self.obs_format == "float32":
            return out * self._tb.state_scale
        return out

    def set_deal_fn(self, deal_fn: TorchDealFn | None, *, with_dealers: bool = False) -> None:
        """Deal every later hand (auto-resets, and resets without ``hands``) with
        ``deal_fn(env_ids, dealers) -> (k, 4, 12) card ids`` (numpy arrays in, as
        :meth:`BatchedEnv.set_deal_fn`); None restores the device generator.

        ``with_dealers=True``: ``deal_fn`` returns ``(dealers (k,), hands)`` and its dealers
        replace the drawn ones for envs starting a new episode (those in a match keep the
        rotation, and a different dealer for them is refused). A host callback: every step
        that ends a hand reads the device. A deal function that fails or returns a bad deal
        during ``step`` raises there and leaves the engine mid-step: call :meth:`reset`.
        """
        if deal_fn is not None and not callable(deal_fn):
            raise ValueError(f"deal_fn must be callable or None, got {deal_fn!r}")
        if not isinstance(with_dealers, bool):
            raise ValueError(f"with_dealers must be True or False, got {with_dealers!r}")
        self._deal_fn = deal_fn
        self._deal_fn_dealers = with_dealers

    def current_deals(self) -> tuple[Tensor, Tensor]:
        """``(dealers (N,), hands (N, 4, 12))``: the dealer and initial hands (sorted card ids,
        by absolute seat) of the hand each env is playing, as :meth:`BatchedEnv.current_deals`."""
        self._require_started()
        cards = torch.arange(N_CARDS, device=self.device)
        held = ((self._initial[:, :, None] >> cards) & 1) == 1
        ids = torch.where(held, cards, N_CARDS).sort(dim=2).values[:, :, :N_TRICKS]
        return self._dealer.clone(), ids

    def match_info(self) -> tuple[Tensor, Tensor]:
        """``(hand_number (N,), match_scores (N, 2))``, as :meth:`BatchedEnv.match_info`."""
        self._require_started()
        return self._hand_number.clone(), self._match_scores.clone()

    def state_nbytes(self) -> int:
        """Bytes of the engine's state tensors (the per-hand columns and the deal pool), for
        memory-per-hand figures; the constant tables and a step's temporaries are not in it."""
        seen = {id(t): t for t in vars(self).values() if isinstance(t, Tensor)}
        seen.update({id(t): t for t in self._final.values()})
        return sum(t.numel() * t.element_size() for t in seen.values())

    # ------------------------------------------------------------------ card play
    def _play(self, a: Tensor, isplay: Tensor) -> Tensor:
        """Card play in the envs ``isplay``; the others (bidding, or held) pass through inert:
        their action has no card bit, no points and no suit, and their register writes are
        masked. Then the legal set of every env's next seat. Returns the hands just ended."""
        tb = self._tb
        s = self._to_move
        put = (s[:, None] == tb.seats) * tb.bit.take(a)[:, None]  # the card, in its seat
        self._hands = self._hands ^ put
        self._trick_bb = self._trick_bb | put  # the mover has no card on the trick yet
        first = self._cards_in_trick == 0
        suit = tb.suit_of.take(a)
        led = torch.where(first, suit, self._led_suit)
        self._leader = torch.where(first, s, self._leader)
        wrow = self._trump * rules.WINNERS_STRIDE  # the trump's row of the winners table
        takes = ((tb.winners.take(wrow + self._win_card) >> a) & 1) == 1
        self._win_card = win_card = torch.where(takes, a, self._win_card)
        win_seat = torch.where(takes, s, self._win_seat)
        self._win_seat = win_seat
        points = self._trick_points + tb.pts.take(a)
        in_trick = self._cards_in_trick + isplay
        void = isplay & (suit != led)  # did not follow: void in the led suit
        self._voids = self._voids | tb.void_bit.take(torch.add(led, s, alpha=N_SEATS + 1)) * void
        to_move = torch.where(isplay, _seats(rules.next_seat, s), s)

        closed = in_trick == N_SEATS
        if self._history:  # v1: the card's trick number; a closed trick's leader and winner
            t = self._tricks_done
            number = (t + 1).to(torch.uint8)[:, None]
            self._card_trick = self._card_trick.scatter(1, a[:, None], number)
            led_bit = tb.one << torch.add(t, self._leader, alpha=N_TRICKS)
            self._trick_led = self._trick_led | led_bit * closed
            won_bit = tb.one << torch.add(t, win_seat, alpha=N_TRICKS)
            self._trick_won = self._trick_won | won_bit * closed
        # a closed trick: one trick and its points (+1 per trick: the 72-point count) to the
        # winner's team, (tricks A, tricks B, points A, points B)
        gain = tb.tally_unit.index_select(0, (win_seat & 1) + 2 * closed)
        gain[:, 2:] *= (points + 1)[:, None]
        self._team_tally = self._team_tally + gain
        self._tricks_done = self._tricks_done + closed
        # the registers of a closed trick are cleared in place (all fresh tensors of this step)
        self._trick_bb.masked_fill_(closed[:, None], 0)
        self._to_move = to_move = torch.where(closed, win_seat, to_move)
        self._cards_in_trick = in_trick.masked_fill_(closed, 0)
        self._trick_points = points.masked_fill_(closed, 0)
        self._led_suit = led = led.masked_fill_(closed, NO_SUIT)
        win_card.masked_fill_(closed, _NO_CARD)

        # rules.legal_cards over columns (see batched.py): follow, else anything; beat an
        # opponent's winning card when able.
        hand = self._hands.gather(1, to_move[:, None]).squeeze(1)
        follow = hand & tb.suit_mask.take(led)
        base = torch.where(follow != 0, follow, hand)
        beat = base & tb.winners.take(wrow + win_card)
        beat &= tb.opp_mask.take((win_seat ^ to_move) & 1)
        self._legal = torch.where(beat != 0, beat, base)
        if self.options.obligada:
            # BatchedEnv._obligada: against an opponent, following suit without a card that
            # beats W leaves one legal card, the weakest of the led suit (rules.lowest_card).
            forced = (beat == 0) & (follow != 0) & (led != NO_SUIT)
            forced &= ((win_seat ^ to_move) & 1) == 1
            shift = led.clamp(max=3) * _SUIT_CARDS
            weakest = tb.lowest.take((follow >> shift) & _SUIT_BITS) << shift
            self._legal = torch.where(forced, weakest, self._legal)
        return closed & (self._tricks_done == N_TRICKS)

    # ------------------------------------------------------------------ bidding
    def _bid(self, b: Tensor, a: Tensor) -> None:
        """Trump choice, delegation and the doubling chain for the envs ``b``: the
        transitions of :meth:`BatchedEnv._bid`, each selected by a mask."""
        s = self._to_move
        deleg = b & (a == DELEGATE)
        choose = b & (a <= BUTIFARRA)  # 48-52; a bidding env's action is 48-55
        dbl = b & (a == DOUBLE)
        pas = b & (a == PASS)
        self._delegated = torch.where(deleg, 1, self._delegated)
        self._trump = torch.where(choose, a - TRUMP_BASE, self._trump)  # butifarra -> NO_TRUMP
        self._chooser = torch.where(choose, s, self._chooser)
        self._level = level = self._level + dbl
        cap = self._tb.cap.take(self._trump)  # rules.doubling_cap of each env's trump
        start = (choose & (cap == 0)) | (dbl & (level >= cap)) | (pas & (self._second_asked == 1))
        ask = (choose | dbl) & ~start
        to_move = torch.where(
            deleg | (pas & ~start), _seats(rules.partner_of, s), _seats(rules.next_seat, s)
        )
        to_move = torch.where(start, _seats(rules.mano, self._dealer), to_move)
        phase = torch.where(deleg, PHASE_CHOOSE_TRUMP_DELEGATED, self._phase)
        phase = torch.where(ask, PHASE_DOUBLING, phase)
        self._phase = phase = torch.where(start, PHASE_PLAY, phase)
        self._second_asked = torch.where(b, pas.long(), self._second_asked)
        self._in_play = self._in_play | start
        self._to_move = to_move = torch.where(b, to_move, s)
        asked = torch.where(phase == PHASE_DOUBLING, DOUBLING_MASK, TRUMP_CHOICE_MASK)
        hand = self._hands.gather(1, to_move[:, None]).squeeze(1)
        self._legal = torch.where(b, torch.where(start, hand, asked), self._legal)

    # ------------------------------------------------------------------ hand ends, deals
    def _end_hands(self, e: Tensor) -> tuple[Tensor, Tensor]:
        """Score the hands ``e``, deal the next hand or episode; returns (rewards, done)."""
        tb = self._tb
        row = torch.add(self._level, self._trump, alpha=_LEVELS)  # (trump * 5 + level) * 73 + A
        row = torch.add(self._team_tally[:, 2], row, alpha=_POINTS)
        scores = torch.where(e[:, None], tb.scores.index_select(0, row), 0)
        margin = scores[:, 0] - scores[:, 1]
        rewards = (margin[:, None] * tb.seat_sign).double() * self.reward_scale  # as numpy
        rewards = rewards.to(torch.float32)
        target = self.options.target_score
        fresh = self._pool_dealers
        if target is None:
            done = e
            dealer = fresh
        else:
            match_scores = self._match_scores + scores
            over = match_scores.amax(dim=1) >= target  # rules.match_over, on a tensor
            done = e & over
            dealer = torch.where(over, fresh, _seats(rules.next_dealer, self._dealer))
        if self.keep_final_obs:
            pos = self._position()
            pos["phase"] = torch.full_like(self._phase, PHASE_HAND_OVER)
            self._final = {k: torch.where(_col(done, v), v, self._final[k]) for k, v in pos.items()}
            self._final_done = done
        if target is not None:
            self._match_scores = torch.where(
                e[:, None], torch.where(over[:, None], 0, match_scores), self._match_scores
            )
            self._hand_number = torch.where(
                e, torch.where(over, 0, self._hand_number + 1), self._hand_number
            )
        if self._deal_fn is not None:
            dealer, hands = self._call_deal_fn(e, dealer, done)
        else:
            hands = self._pool_hands.gather(1, self._tb.deal_rot.index_select(0, dealer))
        self._start_hands(e, dealer, hands)
        return rewards, done

    def _start_hands(self, e: Tensor, dealer: Tensor, hands: Tensor) -> None:
        """Put the envs ``e`` at the first decision of a new hand: ``dealer`` deals ``hands``
        ((N, 4) bitboards by seat; rows outside ``e`` are ignored). In place (``masked_fill_``:
        one kernel per register, no temporary): no register tensor is handed out uncopied."""
        e1 = e[:, None]
        self._hands = torch.where(e1, hands, self._hands)
        self._initial = torch.where(e1, hands, self._initial)
        self._dealer = torch.where(e, dealer, self._dealer)
        self._to_move = torch.where(e, dealer, self._to_move)
        for reg, value in (
            (self._phase, PHASE_CHOOSE_TRUMP),
            (self._trump, TRUMP_UNSET),
            (self._chooser, -1),
            (self._delegated, 0),
            (self._level, 0),
            (self._second_asked, 0),
            (self._cards_in_trick, 0),
            (self._trick_points, 0),
            (self._led_suit, NO_SUIT),
            (self._win_card, _NO_CARD),
            (self._win_seat, 0),
            (self._leader, 0),
            (self._tricks_done, 0),
            (self._voids, 0),
            (self._legal, DEALER_ACTIONS_MASK),
            (self._in_play, False),
        ):
            reg.masked_fill_(e, value)
        self._team_tally.masked_fill_(e1, 0)
        self._trick_bb.masked_fill_(e1, 0)
        if self._history:
            self._trick_led.masked_fill_(e, 0)
            self._trick_won.masked_fill_(e, 0)
            self._card_trick.masked_fill_(e1, 0)

    def _refill(self) -> None:
        """Draw the next deal and dealer of every env: a uniform shuffle dealt four cards at
        a time from the seat after the dealer (``rules.DEAL_ORDER``)."""
        n, dev = self.num_envs, self.device
        keys = torch.rand((n, N_CARDS), generator=self._gen, device=dev, dtype=torch.float64)
        deck = keys.argsort(dim=1)
        by_turn = deck[:, self._tb.deal_pos].reshape(n, N_SEATS, N_TRICKS)
        self._pool_hands = (self._tb.one << by_turn).sum(dim=2)  # distinct bits: sum = OR
        first = self.options.first_dealer
        if first is None:
            self._pool_dealers = torch.randint(
                0, N_SEATS, (n,), generator=self._gen, device=dev, dtype=torch.int64
            )
        else:
            self._pool_dealers = torch.full((n,), first, dtype=torch.int64, device=dev)

    def _call_deal_fn(self, e: Tensor, dealer: Tensor, fresh: Tensor) -> tuple[Tensor, Tensor]:
        """(dealer, hands bitboards) for all envs, the rows of ``e`` from the deal function;
        ``fresh``: the envs of ``e`` that start a new episode (their dealer may be replaced)."""
        fn = self._deal_fn
        assert fn is not None
        idx = torch.nonzero(e).reshape(-1)
        hands = torch.zeros_like(self._hands)
        if idx.numel() == 0:
            return dealer, hands
        ids = idx.cpu().numpy()
        drawn = dealer[idx].cpu().numpy()
        out = fn(ids.copy(), drawn.copy())
        if self._deal_fn_dealers:
            if not isinstance(out, tuple) or len(out) != 2:
                raise ValueError(
                    "deal_fn(with_dealers=True) must return (dealers, hands), got "
                    f"{type(out).__name__}"
                )
            got, out = out
            got = BatchedEnv._check_dealers(_host(got), ids.size)
            keep = ~fresh[idx].cpu().numpy()
            if (got[keep] != drawn[keep]).any():
                i = int(np.flatnonzero(keep & (got != drawn))[0])
                raise ValueError(
                    f"deal_fn: env {ids[i]} is in a match whose next dealer is {drawn[i]}, "
                    f"got dealer {got[i]}"
                )
            dealer = dealer.index_put((idx,), self._put(got))
        bb = BatchedEnv._check_hands(_host(out), ids, "deal_fn")
        return dealer, hands.index_put((idx,), self._put(bb.view(np.int64)))

    # ------------------------------------------------------------------ observations
    def _position(self) -> dict[str, Tensor]:
        """The columns an observation is encoded from (:meth:`_encode`)."""
        pos = {
            "hands": self._hands,
            "initial": self._initial,
            "trick_bb": self._trick_bb,
            "voids": self._voids,
            "leader": self._leader,
            "cards_in_trick": self._cards_in_trick,
            "trump": self._trump,
            "chooser": self._chooser,
            "delegated": self._delegated,
            "dealer": self._dealer,
            "level": self._level,
            "phase": self._phase,
            "to_move": self._to_move,
            "team_tally": self._team_tally,
            "hand_number": self._hand_number,
            "match_scores": self._match_scores,
        }
        if self._history:
            pos["trick_led"], pos["trick_won"] = self._trick_led, self._trick_won
            pos["card_trick"] = self._card_trick
        return pos

    def _encode(self, p: dict[str, Tensor], v: Tensor, history: bool) -> Tensor:
        """(k, 491) uint8: the v0 observation of seat ``v`` (k,) in the positions ``p``, in
        ``observation.FIELDS`` order (asserted at import); with ``history`` (v1 engines only)
        (k, 638): the v1 observation, ``V1_FIELDS`` appended."""
        tb = self._tb
        k = v.shape[0]
        hands = p["hands"]
        shift = 4 * v  # the void nibbles rotated into v's frame
        voids = ((p["voids"] >> shift) | (p["voids"] << (16 - shift))) & 0xFFFF
        leader = torch.where(p["cards_in_trick"] > 0, tb.one << ((p["leader"] - v) & 3), 0)
        # [own hand, played x4, trick x4, leader | voids] in v's frame: one gather from
        # [hands, played, trick (by absolute seat), leader | voids]
        boards = torch.cat(
            [hands, p["initial"] ^ hands, p["trick_bb"], (leader | voids << N_SEATS)[:, None]], 1
        )
        boards = boards.gather(1, tb.board_pick.index_select(0, v))
        bits = self._unpack(boards)[:, :_BITS_END]
        phase = p["phase"]
        turn = torch.where(phase == PHASE_DOUBLING, p["to_move"] + 1, 0)
        h1, h2, h3 = tb.header
        # rows ((trump * 5 + chooser + 1) * 2 + delegated) * 4 + v, (dealer * 5 + level) * 4 + v,
        # (turn * 6 + phase) * 4 + v: each multiply-add one torch.add(..., alpha=)
        g1 = torch.add(p["chooser"], p["trump"], alpha=N_SEATS + 1)
        g1 = torch.add(p["delegated"], g1, alpha=2)
        g1 = torch.add(v, g1, alpha=N_SEATS).add_(2 * N_SEATS)  # the + 1 of chooser
        header = h1.index_select(0, g1)
        g2 = torch.add(p["level"], p["dealer"], alpha=_LEVELS)
        header |= h2.index_select(0, torch.add(v, g2, alpha=N_SEATS))
        g3 = torch.add(phase, turn, alpha=_N_PHASES)
        header |= h3.index_select(0, torch.add(v, g3, alpha=N_SEATS))
        team = p["team_tally"].gather(1, tb.team_perm.index_select(0, v & 1)).to(torch.uint8)
        hand_number = p["hand_number"].clamp(max=CLIP).to(torch.uint8)[:, None]
        match = (
            p["match_scores"]
            .clamp(max=CLIP)
            .gather(1, tb.match_perm.index_select(0, v))
            .to(torch.uint8)
        )
        parts = [bits, header, team, hand_number, match, self._const(self._tail, k)]
        if history:
            # bit seat * 12 + t -> relative seat (seat - v) % 4: the 48 bits rotated right by
            # 12 v, as the void nibbles by 4 v
            shift = (N_TRICKS * v)[:, None]
            hist = torch.stack([p["trick_led"], p["trick_won"]], 1)
            hist = ((hist >> shift) | (hist << (N_CARDS - shift))) & _HISTORY_MASK
            parts += [self._unpack(hist), p["card_trick"][:, :N_CARDS]]
            parts.append(self._const(self._v1_tail, k))
        return torch.cat(parts, dim=1)

    def _const(self, rows: Tensor, k: int) -> Tensor:
        """``k`` rows of constant bytes: the materialised block ``rows`` for all envs."""
        return rows if k == self.num_envs else rows[:1].expand(k, -1).contiguous()

    def _unpack(self, boards: Tensor, n_bytes: int = N_CARDS // 8) -> Tensor:
        """(k, m) int64 bitboards -> (k, m * 8 * n_bytes) uint8 0/1, low bit first: each byte
        looked up in a 256-entry table of its 8 bits packed as one int64 (one gather, where
        shifting every bit out costs a pass per bit)."""
        tb = self._tb
        k, m = boards.shape
        if _LITTLE:
            by = boards.contiguous().view(torch.uint8).reshape(k, m, 8)[:, :, :n_bytes]
        else:
            by = ((boards[:, :, None] >> tb.byte_shift[:n_bytes]) & 255).to(torch.uint8)
        bits = tb.byte_bits.index_select(0, by.reshape(-1).to(torch.int32))
        return bits.view(torch.uint8).reshape(k, m * 8 * n_bytes)

    def _outputs(self) -> tuple[Tensor, Tensor, Tensor]:
        """Fresh (obs, mask, seat) for the seat to move in every env."""
        seat = self._to_move.clone()
        obs = self._encode(self._position(), seat, self._history)
        if self.obs_format == "float32":
            obs = obs * self._tb.obs_scale
        mask = self._unpack(self._legal[:, None], N_ACTIONS // 8).view(torch.int8)
        return obs, mask, seat

    # ------------------------------------------------------------------ validation
    def _put(self, x: np.ndarray) -> Tensor:
        return torch.from_numpy(np.ascontiguousarray(x, dtype=np.int64)).to(self.device)

    def _check_actions(self, actions: Any) -> Tensor:
        n = self.num_envs
        if isinstance(actions, Tensor):
            if actions.dtype.is_floating_point or actions.dtype.is_complex:
                raise ValueError(f"actions must be integers, got torch dtype {actions.dtype}")
            if actions.dtype == torch.bool:
                raise ValueError("actions must be integers, got torch dtype torch.bool")
            if tuple(actions.shape) != (n,):
                raise ValueError(
                    f"actions must have shape ({n},), one per env; got {tuple(actions.shape)}"
                )
            return actions.to(device=self.device, dtype=torch.int64)
        a = np.asarray(actions)
        if a.shape != (n,):
            raise ValueError(f"actions must have shape ({n},), one per env; got {a.shape}")
        if a.dtype.kind not in "iu":
            raise ValueError(f"actions must be an integer array, got dtype {a.dtype}")
        if a.dtype == np.uint64:  # ids above 2**63 would wrap; they are illegal either way
            a = np.minimum(a, N_ACTIONS)
        return self._put(a)

    def _check_active(self, active: Any) -> Tensor:
        n = self.num_envs
        if isinstance(active, Tensor):
            if active.dtype != torch.bool or tuple(active.shape) != (n,):
                raise ValueError(
                    f"active must be a bool array of shape ({n},), got {active.dtype} "
                    f"{tuple(active.shape)}"
                )
            return active.to(self.device)
        m = np.asarray(active)
        if m.shape != (n,) or m.dtype != np.bool_:
            raise ValueError(
                f"active must be a bool array of shape ({n},), got {m.dtype} {m.shape}"
            )
        return torch.from_numpy(m.copy()).to(self.device)

    def _lowest_legal(self) -> Tensor:
        """The lowest legal action id of every env (the lowest set bit of its legal set)."""
        low = (self._legal & -self._legal).to(torch.float64)  # a power of two, exact
        # its exponent, read from the float's bits (frexp costs ~30x more on CPU)
        return ((low.view(torch.int64) >> 52) - 1023).clamp(0, N_ACTIONS - 1)

    def _require_started(self) -> None:
        if not self._started:
            raise RuntimeError("call reset() before step(), state() or current_deals()")

    def _raise_illegal(self, a: Tensor, i: int) -> None:
        legal = int(self._legal[i])
        names = ", ".join(f"{x} ({action_name(x)})" for x in range(N_ACTIONS) if legal >> x & 1)
        act = int(a[i])
        what = f"{act} ({action_name(act)})" if 0 <= act < N_ACTIONS else f"{act} (not 0-55)"
        raise ValueError(
            f"illegal action {what} in hand {i} for seat {int(self._to_move[i])} in phase "
            f"{PHASE_NAMES[int(self._phase[i])]!r}; legal actions: [{names}]"
        )


def _col(mask: Tensor, like: Tensor) -> Tensor:
    """``mask`` (N,) shaped to broadcast against ``like`` (N, ...)."""
    return mask.reshape(-1, *([1] * (like.dim() - 1)))
