"""Self-play PPO for Butifarra, in one file (in the spirit of CleanRL's ``ppo.py``).

It reads top to bottom: config (:mod:`train.ppo_config`) -> env -> network
(:mod:`agents.ppo_net`) -> rollout -> per-seat GAE -> PPO update -> the training loop
(:func:`train`) -> ``main``. The defaults are the recipe of the shipped checkpoint:
``python -m train.ppo --seed 1``.

Four seats act in turn inside each hand, so the bookkeeping is per seat: a transition's "next
state" is the same seat's next decision in the same hand, and the hand's (scaled) team score
difference is that seat's reward on its last decision of the hand (:func:`per_seat_gae`).

Each hand of the batched engine pits the learner's team against an :class:`Opponent` drawn
per hand: the current policy (pure self-play: all four seats learn), a past snapshot, a
fixed agent (the rule-based one by default; any registry agent with ``--opponent-agent``,
e.g. to train a best response against it) or the random agent. Only learner decisions enter
the PPO buffer. Hands still in progress when a rollout ends are carried into the next rollout
(their stored log-probs make the one-update staleness harmless under PPO's ratio clipping).
``--init-from`` starts the network from an agent checkpoint (``shipped``: the shipped one).

What is not the algorithm lives beside it: :mod:`train.ppo_checkpoint` (the checks before a
run starts, resume, checkpoints, export, milestones), :mod:`train.ppo_metrics` (metrics.csv,
TensorBoard, the interval evaluation), :mod:`train.ppo_settings` (the settings' rules) and
:mod:`train.run_folder` (never overwrite, atomic files, Ctrl-C).

Usage (``docs/ppo.md`` has more)::

    python -m train.ppo --help
    python -m train.ppo --seed 1 --total-minutes 60 --export-path my_agent.pt
    python -m train.ppo --run-name NAME --resume      # continue an interrupted run

Bad flags and runs that cannot start as asked (a run name that holds a run, an export path
holding another run's file) are one ``error:`` line and exit status 2, before anything is
touched. Ctrl-C saves a checkpoint and exits with status 130.
"""

from __future__ import annotations

import copy
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

try:
    import numpy as np
    import torch
    import torch.nn as nn
except ImportError as exc:  # ``python -m train.ppo`` without torch: one line, not a traceback
    if __name__ != "__main__":
        raise
    print(f"error: python -m train.ppo needs the 'train' extra ({exc}): "
          "pip install 'butifarra-rl[train]'", file=sys.stderr)  # fmt: skip
    raise SystemExit(2) from None

from agents import Agent
from agents.base import obs_version_of
from agents.ppo_agent import PPOAgent
from agents.ppo_net import (
    _HAND_COLUMNS,
    HIDDEN_HANDS_SIZE,
    ActorCritic,
    NetInputs,
    hidden_hands,
    masked_entropy,
    masked_log_probs,
    sample_masked,
)
from agents.search_agent import DEFAULT_POLICY, SearchAgent, SearchConfig, best_cards_on_deal
from butifarra_env.core.actions import (
    N_ACTIONS,
    N_CARDS,
    bits_from_mask,
    masks_from_bits,
    random_legal_actions,
)
from butifarra_env.core.observation import OBS_SIZE, layout, read_view
from butifarra_env.core.observation import field as obs_field
from butifarra_env.core.rules import multiplier
from butifarra_env.envs.batched import BatchedEnv
from butifarra_env.envs.batched_torch import TorchBatchedEnv
from train import ppo_checkpoint as checkpoint
from train.ppo_config import OPPONENTS, Config, Opponent, distill_search_config
from train.ppo_metrics import MetricsLog, evaluate
from train.ppo_settings import (
    ARCH_FIELDS,
    annealed_lr,
    bidding_rows,
    budget_progress,
    init_arch,
    make_opponent_agent,
)
from train.run_folder import RunRefused, TrainingInterrupted, deferred_interrupt

__all__ = ["OPPONENTS", "Config", "Opponent", "main", "per_seat_gae", "train"]


def setup_torch(cfg: Config) -> torch.device:
    """Threads, determinism and seed of torch; returns the device to train on."""
    torch.set_num_threads(cfg.torch_threads or min(2, os.cpu_count() or 1))
    if cfg.deterministic:
        torch.use_deterministic_algorithms(True)
    torch.manual_seed(cfg.seed)
    if cfg.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(cfg.device)


# ----------------------------------------------------------------------------- env
EnvFactory = Callable[[int, int], Any]
"""``factory(num_envs, seed)`` -> a batched engine (tests swap in their own)."""


def make_env(num_envs: int, seed: int, obs_version: int = 0) -> BatchedEnv:
    """The batched engine (one hand per episode, raw rewards; we scale them ourselves)."""
    return BatchedEnv(num_envs, seed=seed, obs_version=obs_version)


class NumpyArrays:
    """The rollout's arrays with the numpy :class:`BatchedEnv` (``--engine numpy``, the
    shipped recipe): buffers on the host, each kind of player acts on its own rows (an index
    array: :meth:`select`), the networks' outputs copied back each step."""

    legal_cards = True
    """Run the learner's card head on the legal cards only (``ActorCritic.inputs``)."""

    def __init__(self, device: torch.device, obs_version: int = 0) -> None:
        self.device = device
        self.obs_version = obs_version
        self.obs_size = layout(obs_version).size  # the learner's rows (v1: v0's, then more)

    def make_env(self, num_envs: int, seed: int) -> Any:
        return make_env(num_envs, seed, self.obs_version)

    def buffers(self, n: int, hidden_size: int, num_steps: int) -> HandBuffers:
        """The buffers of the hands in progress at ``n`` engine slots."""
        return HandBuffers.empty(n, hidden_size, self)

    def asarray(self, x: Any) -> Any:
        return np.asarray(x)

    def put(self, x: np.ndarray) -> Any:
        """A host array (drawn by the numpy generator) as an engine array."""
        return x

    def out(self, t: torch.Tensor) -> Any:
        """A network output as an engine array."""
        return t.cpu().numpy()

    def zeros(self, shape: tuple[int, ...], dtype: str) -> Any:
        return np.zeros(shape, np.dtype(dtype))

    def full(self, shape: tuple[int, ...], value: int, dtype: str) -> Any:
        return np.full(shape, value, np.dtype(dtype))

    def select(self, b: Any) -> Any:
        """The rows where ``b`` holds, as :meth:`rows`, :meth:`assign` and :meth:`act` take
        them: here their indices."""
        return np.flatnonzero(b)

    def some(self, sel: Any) -> bool:
        """``sel`` may hold a row (here: it does), so its player must act."""
        return len(sel) > 0

    def rows(self, x: Any, sel: Any) -> Any:
        """What the player of ``sel`` reads of the per-slot array ``x``: here those rows."""
        return x[sel]

    def assign(self, target: Any, sel: Any, values: Any) -> Any:
        """``target`` with ``values`` (computed on :meth:`rows`) at the rows of ``sel``."""
        target[sel] = values
        return target

    def act(self, agent: Any, obs: Any, mask: Any, sel: Any) -> Any:
        """``agent``'s actions at ``sel`` (``obs`` and ``mask``: every slot's)."""
        return agent.act_batch(v0_rows(obs[sel], agent), mask[sel])

    def teach(self, teacher: Any, obs: Any, mask: Any, sel: Any, bids_only: bool) -> Any:
        """The teacher's action at each learner decision (``obs``, ``mask``: :meth:`rows`
        of ``sel``), or at its bids and doublings only, -1 elsewhere."""
        obs = v0_rows(obs, teacher)
        if not bids_only:
            return teacher.act_batch(obs, mask)
        bids = bidding_rows(mask)
        teach = np.full(len(obs), -1, np.int64)
        if bids.any():
            teach[bids] = teacher.act_batch(obs[bids], mask[bids])
        return teach

    def hidden(self, state: Any, seat: Any) -> Any:
        return hidden_hands(np.asarray(state), seat)

    def random_actions(self, mask: Any, rng: np.random.Generator) -> Any:
        return random_legal_actions(mask, rng)


class TorchArrays(NumpyArrays):
    """The same arrays as torch tensors with :class:`TorchBatchedEnv` on ``device``
    (``--engine torch``): rollout, opponents, buffers, GAE and update stay there, and a
    rollout step reads nothing back from the device. Each kind of player acts on every row
    and :meth:`assign` keeps its rows (``torch.where``); the hands that end stay in their
    buffers until the rollout ends (:class:`HandStore`); the hands dealt in their place draw
    their seating and opponent from torch's generator on the device
    (:func:`end_hands_on_device`)."""

    legal_cards = False
    """The card head on every held card: the legal ones' list is a ``nonzero`` (a host read)."""

    def __init__(self, device: torch.device, obs_version: int = 0) -> None:
        super().__init__(device, obs_version)
        self.hand_columns = torch.as_tensor(_HAND_COLUMNS, device=device)  # copied once

    def make_env(self, num_envs: int, seed: int) -> Any:
        return TorchBatchedEnv(
            num_envs, seed=seed, device=self.device, check=False, obs_version=self.obs_version
        )

    def buffers(self, n: int, hidden_size: int, num_steps: int) -> HandBuffers:
        return HandStore.create(n, hidden_size, num_steps, self)

    def asarray(self, x: Any) -> Any:
        return x

    def put(self, x: np.ndarray) -> Any:
        return torch.as_tensor(x).to(self.device, non_blocking=True)

    def out(self, t: torch.Tensor) -> Any:
        return t

    def zeros(self, shape: tuple[int, ...], dtype: str) -> Any:
        return torch.zeros(shape, dtype=getattr(torch, dtype), device=self.device)

    def full(self, shape: tuple[int, ...], value: int, dtype: str) -> Any:
        return torch.full(shape, value, dtype=getattr(torch, dtype), device=self.device)

    def select(self, b: Any) -> Any:
        return b  # the mask itself: its player acts on every row

    def some(self, sel: Any) -> bool:
        return True  # knowing would read the device

    def rows(self, x: Any, sel: Any) -> Any:
        return x

    def assign(self, target: Any, sel: Any, values: Any) -> Any:
        return torch.where(sel, values, target)

    def act(self, agent: Any, obs: Any, mask: Any, sel: Any) -> Any:
        return agent.act_rows(obs, mask, sel)

    def teach(self, teacher: Any, obs: Any, mask: Any, sel: Any, bids_only: bool) -> Any:
        asked = sel & bidding_rows(mask) if bids_only else sel
        return torch.where(asked, self.act(teacher, obs, mask, asked), -1)

    def hidden(self, state: Any, seat: Any) -> Any:
        rel = (seat.long()[:, None] + torch.arange(1, 4, device=state.device)[None, :]) % 4
        rows = torch.arange(len(state), device=state.device)[:, None, None]
        return state[rows, self.hand_columns[rel]].reshape(len(state), HIDDEN_HANDS_SIZE)

    def random_actions(self, mask: Any, rng: np.random.Generator) -> Any:
        return torch.multinomial(mask.float(), 1).squeeze(-1)


class DeviceRuleAgent:
    """The rule-based player on the rollout's tensors (:func:`agents.rule_torch.decide_batch_torch`,
    the same decisions as the numpy rule-based agent), on every row: no host read."""

    def __init__(self) -> None:
        self._last: tuple[torch.Tensor, int, torch.Tensor, int, torch.Tensor] | None = None

    def reset(self, seed: int | None = None) -> None:
        self._last = None

    def act_rows(self, obs: torch.Tensor, mask: torch.Tensor, sel: torch.Tensor) -> torch.Tensor:
        """The action of every row (those outside ``sel`` are not used). Asked again about
        the same, unchanged tensors (as the teacher, then as the opponent, in one step), it
        answers from the first call: it is a thousand small kernels on every row."""
        last = self._last
        same = last is not None and last[0] is obs and last[2] is mask
        if last is not None and same and (last[1], last[3]) == (obs._version, mask._version):
            return last[4]
        from agents.rule_torch import decide_batch_torch

        actions = decide_batch_torch(obs[:, :OBS_SIZE], mask)  # it reads v0
        self._last = (obs, obs._version, mask, mask._version, actions)
        return actions


class HostAgent:
    """Any other registry agent with the torch engine: its rows are copied to the host and
    its actions back (the one fallback, and a host read each step; ``train`` says so in a
    log line)."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def reset(self, seed: int | None = None) -> None:
        self.agent.reset(seed=seed)

    def act_rows(self, obs: torch.Tensor, mask: torch.Tensor, sel: torch.Tensor) -> torch.Tensor:
        """The actions at ``sel`` (0 elsewhere), from the wrapped agent on those rows only."""
        idx = torch.nonzero(sel).squeeze(-1)
        actions = torch.zeros(len(sel), dtype=torch.int64, device=obs.device)
        if len(idx):
            rows = v0_rows(obs[idx].cpu().numpy(), self.agent)
            got = self.agent.act_batch(rows, mask[idx].cpu().numpy())
            actions[idx] = torch.as_tensor(np.asarray(got, np.int64), device=obs.device)
        return actions


def v0_rows(obs: Any, agent: Any) -> Any:
    """The learner's observation rows as ``agent`` reads them: a fixed agent (rule, random,
    ...) reads v0, the first 491 values of a v1 row."""
    return obs[:, : layout(obs_version_of(agent)).size]


def on_device(agent: Agent | None, role: str) -> Any:
    """``agent`` for the torch engine: the rule-based one on the device, others on the host."""
    from agents.rule_based import RuleBasedAgent

    if agent is None or type(agent) is RuleBasedAgent:
        return None if agent is None else DeviceRuleAgent()
    print(f"train.ppo: the {role} {type(agent).__name__} runs on the host (only the "
          "rule-based agent runs on the device); its rows are copied each step",
          file=sys.stderr)  # fmt: skip
    return HostAgent(agent)


def device_players(opponent: Agent | None, teacher: Agent | None) -> tuple[Any, Any]:
    """The fixed opponent and the teacher for the torch engine (:func:`on_device`): one
    rule-based player for both roles when both are rule-based, which answers a step once."""
    dev_opponent, dev_teacher = on_device(opponent, "opponent"), on_device(teacher, "teacher")
    if isinstance(dev_opponent, DeviceRuleAgent) and isinstance(dev_teacher, DeviceRuleAgent):
        return dev_opponent, dev_opponent
    return dev_opponent, dev_teacher


# ----------------------------------------------------------------------------- network
def model_for(cfg: Config) -> ActorCritic:
    """The network a config asks for (:mod:`agents.ppo_net`: suit-canonical inputs, legal-mask
    input, centralised critic, belief and card heads; shared with the PPO agent)."""
    return ActorCritic(**{k: getattr(cfg, k) for k in ARCH_FIELDS})


# ----------------------------------------------------------------------------- rollout
MAX_LEARNER_STEPS_PER_HAND = 64
"""Room for the decisions of one hand (at most ``ppo_settings.MAX_HAND_STEPS``, 58)."""

Batch = dict[str, np.ndarray]
"""Learner decisions of finished hands, padded to ``(hands, MAX_LEARNER_STEPS_PER_HAND)``:
the :class:`HandBuffers` fields, plus ``rew`` (hands, 4): each seat's scaled hand reward."""


@dataclass
class HandBuffers:
    """The learner decisions of the hand in progress at each engine slot (padded rows)."""

    obs: np.ndarray  # (N, L, 491) uint8 observations
    mask: np.ndarray  # (N, L, 56) int8 legal-action masks (reused by the update)
    act: np.ndarray  # (N, L) int64 actions taken
    logp: np.ndarray  # (N, L) float32 their log-probabilities under the policy that acted
    val: np.ndarray  # (N, L) float32 value estimates
    seat: np.ndarray  # (N, L) int8 seat of each decision
    hid: np.ndarray  # (N, L, 144) uint8 hidden hands for the critic ((N, L, 0) without one)
    teach: np.ndarray  # (N, L) int64 the teacher's action (-1 where it was not asked)
    len: np.ndarray  # (N,) int64 decisions stored so far in each slot's hand

    @classmethod
    def empty(cls, n: int, hidden_size: int, xp: NumpyArrays | None = None) -> HandBuffers:
        """Empty buffers, numpy arrays (or ``xp``'s: torch tensors on the device)."""
        xp = xp or NumpyArrays(torch.device("cpu"))
        steps = MAX_LEARNER_STEPS_PER_HAND
        return cls(
            obs=xp.zeros((n, steps, xp.obs_size), "uint8"),
            mask=xp.zeros((n, steps, N_ACTIONS), "int8"),
            act=xp.zeros((n, steps), "int64"),
            logp=xp.zeros((n, steps), "float32"),
            val=xp.zeros((n, steps), "float32"),
            seat=xp.zeros((n, steps), "int8"),
            hid=xp.zeros((n, steps, hidden_size), "uint8"),
            teach=xp.full((n, steps), -1, "int64"),
            len=xp.zeros((n,), "int64"),
        )

    def append(self, slots: Any, decision: Mapping[str, Any]) -> None:
        """Store one decision per slot in ``slots`` (``decision``: one row per slot)."""
        pos = self.len[slots]
        for name, rows in decision.items():
            getattr(self, name)[slots, pos] = rows
        self.len[slots] += 1

    def take(self, slots: np.ndarray) -> Batch:
        """Copies of the hands at ``slots``, every field."""
        return {name: getattr(self, name)[slots] for name in HAND_FIELDS}

    def collect(self, finished: list[Batch]) -> Batch | None:
        """One batch of a rollout's ``finished`` hands (taken out as they ended), ``rew`` in
        float64; None if there are none."""
        if not finished:
            return None
        batch = {k: np.concatenate([h[k] for h in finished]) for k in finished[0]}
        batch["rew"] = batch["rew"].astype(np.float64)
        return batch


HAND_FIELDS = tuple(f.name for f in fields(HandBuffers))
"""The fields of a hand's buffers, as every :data:`Batch` holds them."""

MIN_HAND_STEPS = N_CARDS + 1
"""Fewest engine steps of a hand: its 48 cards and the trump choice."""


def hands_per_slot(num_steps: int) -> int:
    """Most hands one engine slot can end in a rollout of ``num_steps`` steps: the one in
    progress when it starts, then one per :data:`MIN_HAND_STEPS` at most."""
    return 1 + (num_steps - 1) // MIN_HAND_STEPS


@dataclass
class HandStore(HandBuffers):
    """The torch engine's hand buffers (tensors on the device): room for every hand an
    engine slot can play in one rollout, so that a hand that ends stays where it is and a
    step reads nothing back. A slot's ``k``-th hand of the rollout is row ``k * N + slot``
    (``row``); the finished ones are collected when the rollout ends (:meth:`collect`), and
    the hands still in progress then move to rows ``0..N-1``."""

    rew: Any  # (R, 4) float32 each seat's scaled reward, set where the hand ended
    ended: Any  # (R,) bool the hand has ended
    row: Any  # (N,) int64 the row of each slot's hand in progress

    @classmethod
    def create(cls, n: int, hidden_size: int, num_steps: int, xp: NumpyArrays) -> HandStore:
        """Room for ``1 + hands_per_slot(num_steps)`` hands per slot, every row empty."""
        base = HandBuffers.empty(n * (1 + hands_per_slot(num_steps)), hidden_size, xp)
        rows = len(base.len)
        return cls(
            **{name: getattr(base, name) for name in HAND_FIELDS},
            rew=xp.zeros((rows, 4), "float32"),
            ended=xp.zeros((rows,), "bool"),
            row=torch.arange(n, device=base.len.device),
        )

    def append(self, slots: Any, decision: Mapping[str, Any]) -> None:
        """Store every slot's row of ``decision`` at the next position of its hand; only the
        rows of ``slots`` (a mask: the learner's) count. The others lie beyond the hand's
        length until its next learner decision overwrites them."""
        row = self.row
        pos = self.len[row]
        for name, values in decision.items():
            dest = getattr(self, name)
            dest[row, pos] = values.to(dest.dtype)
        if "teach" not in decision:  # every counted position says whether the teacher spoke
            self.teach[row, pos] = -1
        self.len[row] = pos + slots

    def end(self, done: torch.Tensor, rewards: torch.Tensor) -> None:
        """The hands of the slots in ``done`` ended with (scaled) ``rewards``: keep them, and
        give those slots the next row (empty since :meth:`collect`)."""
        row = self.row
        self.rew[row] = torch.where(done[:, None], rewards, self.rew[row])
        self.ended[row] = self.ended[row] | done
        self.row = row + done * len(row)

    def collect(self, finished: list[Batch]) -> Batch | None:
        """The rollout's finished hands with learner decisions (``finished`` is empty: they
        are all here), then the hands in progress move to rows ``0..N-1`` and the rest is
        emptied. Reads the device once: how many hands there are."""
        keep = torch.nonzero(self.ended & (self.len > 0)).squeeze(-1)
        batch = None
        if len(keep):
            batch = {name: getattr(self, name)[keep] for name in HAND_FIELDS}
            batch["rew"] = self.rew[keep].double()
        n = len(self.row)
        for name in HAND_FIELDS:
            field_ = getattr(self, name)
            field_[:n] = field_[self.row]
        self.len[n:] = 0
        self.ended.zero_()
        self.row = torch.arange(n, device=self.row.device)
        return batch


@dataclass
class OpponentPool:
    """The players the learner's team can face besides itself (see :class:`Opponent`)."""

    snapshot_model: ActorCritic  # plays for the snapshot drawn for the current rollout
    fixed: Agent | None  # the ``opponent_agent`` (None when no hand is drawn against it)
    teacher: Agent | None = None  # the agent the learner imitates (``Config.teacher``)
    snapshots: list[dict[str, torch.Tensor]] = field(default_factory=list)  # oldest first

    def add_snapshot(self, model: ActorCritic, keep: int) -> None:
        """Add a copy of ``model``'s weights; keep the newest ``keep``."""
        sd = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
        self.snapshots = (self.snapshots + [sd])[-keep:]

    def draw_snapshot(self, rng: np.random.Generator) -> None:
        """Load one snapshot, drawn uniformly, into ``snapshot_model`` (for one rollout)."""
        if self.snapshots:
            pick = int(rng.integers(len(self.snapshots)))
            self.snapshot_model.load_state_dict(self.snapshots[pick])


@dataclass
class RolloutState:
    """The engine and the hands in progress; rebuilt at every checkpoint boundary."""

    env: BatchedEnv
    obs: np.ndarray  # (N, 491) observation of the seat to move in each slot
    mask: np.ndarray  # (N, 56) its legal actions
    seat: np.ndarray  # (N,) the seat to move
    buffers: HandBuffers
    learner_team: Any  # (N,) the learner's team in each hand (0: seats 0 and 2)
    opponent: Any  # (N,) the :class:`Opponent` of each hand
    probs: np.ndarray  # per-:class:`Opponent` probabilities for the hands dealt now
    ask_teacher: bool = False  # record the teacher's action at each learner decision...
    teach_bids_only: bool = False  # ...at bids and doublings only (just the floor weighs)
    xp: NumpyArrays = field(default_factory=lambda: NumpyArrays(torch.device("cpu")))
    may_face: np.ndarray = field(default_factory=lambda: np.ones(len(Opponent), bool))
    """Per :class:`Opponent`: some hand may face it (drawn, or drawable, since the deal):
    the torch engine, which cannot tell which rows hold it, runs only these players."""
    new_hands_cdf: Any = None
    """The torch engine's cumulative :func:`new_hand_probs` for this rollout, on the device."""


@dataclass
class RolloutStats:
    """Hands finished in one rollout, and the learner team's raw points, per opponent (on the
    device with the torch engine until :meth:`host`, once per rollout)."""

    hands: Any = field(default_factory=lambda: np.zeros(len(Opponent)))
    points: Any = field(default_factory=lambda: np.zeros(len(Opponent)))

    def host(self) -> RolloutStats:
        """The counts as numpy arrays."""
        if isinstance(self.hands, torch.Tensor):
            return RolloutStats(self.hands.cpu().numpy(), self.points.cpu().numpy())
        return self

    def metrics(self) -> dict[str, float]:
        """``train_vs_{opponent}``: points/hand of the sampled policy (self-play excluded)."""
        return {
            f"train_vs_{OPPONENTS[opp]}": float(self.points[opp] / self.hands[opp])
            for opp in Opponent
            if opp != Opponent.SELF and self.hands[opp]
        }


def draw_opponents(
    rng: np.random.Generator, n: int, probs: np.ndarray, have_snapshots: bool
) -> np.ndarray:
    """One :class:`Opponent` per new hand (self-play stands in for snapshots until one exists)."""
    opp = rng.choice(len(Opponent), size=n, p=probs)
    if not have_snapshots:
        opp[opp == Opponent.SNAPSHOT] = Opponent.SELF
    return opp


def new_hand_probs(probs: np.ndarray, have_snapshots: bool) -> np.ndarray:
    """The chance of each :class:`Opponent` for a hand dealt now, as :func:`draw_opponents`
    draws it (the snapshots' share goes to self-play until a snapshot exists)."""
    p = np.array(probs, np.float64)
    if not have_snapshots:
        p[Opponent.SELF] += p[Opponent.SNAPSHOT]
        p[Opponent.SNAPSHOT] = 0.0
    return p


def start_rollouts(
    cfg: Config,
    update: int,
    env_factory: EnvFactory,
    rng: np.random.Generator,
    pool: OpponentPool,
    progress: float = 0.0,
    xp: NumpyArrays | None = None,
) -> RolloutState:
    """Fresh engine and empty buffers, seeded from ``(seed, update)``, so that a resumed run
    replays exactly what an uninterrupted one does (in-progress hands of the previous
    interval are dropped: at most one per engine slot per checkpoint interval)."""
    xp = xp or NumpyArrays(torch.device("cpu"))
    n = cfg.num_envs
    env_seed = int(np.random.SeedSequence([cfg.seed, update]).generate_state(1)[0])
    env = env_factory(n, env_seed)
    obs, mask, seat = env.reset(seed=env_seed)
    if pool.fixed is not None:
        pool.fixed.reset(seed=env_seed)
    buffers = xp.buffers(n, HIDDEN_HANDS_SIZE if needs_hidden(cfg) else 0, cfg.num_steps)
    learner_team = xp.put(rng.integers(0, 2, n))
    probs = cfg.opponent_probs(progress)
    drawn = draw_opponents(rng, n, probs, bool(pool.snapshots))
    return RolloutState(
        env, xp.asarray(obs), xp.asarray(mask), xp.asarray(seat), buffers, learner_team,
        xp.put(drawn), probs, xp=xp, may_face=np.bincount(drawn, minlength=len(Opponent)) > 0,
    )  # fmt: skip


def learner_acts(
    st: RolloutState,
    slots: Any,
    model: ActorCritic,
    with_hidden: bool,
    device: torch.device,
    teacher: Any = None,
    teach_bids_only: bool = False,
) -> Any:
    """Sample the learner's actions at ``slots`` (:meth:`NumpyArrays.select`) and store the
    decisions in the buffers (with ``teacher``'s choices, when given: at every decision, or
    at the bidding and doubling ones only with ``teach_bids_only``)."""
    xp = st.xp
    obs, mask, seat = xp.rows(st.obs, slots), xp.rows(st.mask, slots), xp.rows(st.seat, slots)
    hid = xp.hidden(xp.rows(st.env.state(), slots), seat) if with_hidden else None
    o, m = torch.as_tensor(obs).to(device), torch.as_tensor(mask).to(device)
    h = None if hid is None else torch.as_tensor(hid).to(device)
    with torch.inference_mode():  # acting needs no autograd (nor the belief head)
        inputs = model.inputs(o, m, legal_cards=xp.legal_cards)
        logits, values, _ = model.forward_inputs(inputs, h, belief=False)
        actions, logp = sample_masked(logits, m)
    act = xp.out(actions)
    decision = {"obs": obs, "mask": mask, "act": act, "logp": xp.out(logp)}
    decision |= {"val": xp.out(values), "seat": seat}
    if hid is not None:
        decision["hid"] = hid
    if teacher is not None:
        decision["teach"] = xp.teach(teacher, obs, mask, slots, teach_bids_only)
    st.buffers.append(slots, decision)
    return act


def policy_samples(model: ActorCritic, obs: Any, mask: Any, device: torch.device) -> torch.Tensor:
    """Actions sampled from ``model``'s masked policy (for the snapshot opponent)."""
    with torch.inference_mode():
        m = torch.as_tensor(mask).to(device)
        actions, _ = sample_masked(model.logits(torch.as_tensor(obs).to(device), m), m)
    return actions


def choose_actions(
    st: RolloutState,
    model: ActorCritic,
    pool: OpponentPool,
    cfg: Config,
    rng: np.random.Generator,
    device: torch.device,
) -> Any:
    """One action per engine slot: the learner's seats sample from the current policy (and
    their decisions are stored), the other team plays as the hand's opponent does. Each
    player acts on its rows (:meth:`NumpyArrays.select`; with the torch engine on every
    row, of which :meth:`~TorchArrays.assign` keeps its own)."""
    xp, opp, face = st.xp, st.opponent, st.may_face
    learner = (opp == Opponent.SELF) | ((st.seat & 1) == st.learner_team)
    forced = None
    if cfg.skip_forced:  # the only legal action, played without the network or a record
        forced = learner & (st.mask.sum(1) == 1)
        learner = learner & ~forced
    mine = xp.select(learner)
    snap = xp.select(~learner & (opp == Opponent.SNAPSHOT))
    fixed = xp.select(~learner & (opp == Opponent.RULE))
    rand = xp.select(~learner & (opp == Opponent.RANDOM))
    actions = xp.zeros((len(opp),), "int64")
    if xp.some(mine):
        teacher = pool.teacher if st.ask_teacher else None
        act = learner_acts(st, mine, model, needs_hidden(cfg), device, teacher, st.teach_bids_only)
        actions = xp.assign(actions, mine, act)
    if face[Opponent.SNAPSHOT] and xp.some(snap):
        obs, mask = xp.rows(st.obs, snap), xp.rows(st.mask, snap)
        actions = xp.assign(
            actions, snap, xp.out(policy_samples(pool.snapshot_model, obs, mask, device))
        )
    if face[Opponent.RULE] and xp.some(fixed):
        assert pool.fixed is not None, "the fixed agent is drawn only when opp_rule > 0"
        actions = xp.assign(actions, fixed, xp.act(pool.fixed, st.obs, st.mask, fixed))
    if face[Opponent.RANDOM] and xp.some(rand):
        actions = xp.assign(actions, rand, xp.random_actions(xp.rows(st.mask, rand), rng))
    if forced is not None and xp.some(only := xp.select(forced)):
        actions = xp.assign(actions, only, xp.rows(st.mask, only).argmax(1))
    return actions


def finish_hands(
    st: RolloutState,
    done: np.ndarray,
    rewards: np.ndarray,
    cfg: Config,
    rng: np.random.Generator,
    pool: OpponentPool,
    stats: RolloutStats,
) -> Batch | None:
    """The numpy engine's ended hands: take them out of the buffers (None if the learner
    made no decision in them), count them, and draw the seating and opponent of the hands
    that replace them."""
    ended = np.flatnonzero(done)
    with_decisions = ended[st.buffers.len[ended] > 0]
    hands = None
    if len(with_decisions):
        hands = st.buffers.take(with_decisions)
        hands["rew"] = rewards[with_decisions] * cfg.reward_scale
    np.add.at(stats.points, st.opponent[ended], rewards[ended, st.learner_team[ended]])
    np.add.at(stats.hands, st.opponent[ended], np.ones(len(ended)))
    st.buffers.len[ended] = 0
    st.buffers.teach[ended] = -1
    st.learner_team[ended] = rng.integers(0, 2, len(ended))
    st.opponent[ended] = draw_opponents(rng, len(ended), st.probs, bool(pool.snapshots))
    return hands


def end_hands_on_device(
    st: RolloutState, done: torch.Tensor, rewards: torch.Tensor, cfg: Config, stats: RolloutStats
) -> None:
    """:func:`finish_hands` for the torch engine, on every row and without a host read: the
    ended hands stay in the :class:`HandStore`, their results are counted (rows that did not
    end add 0), and each slot whose hand ended takes a seating and an opponent drawn by
    torch's generator on the device (``new_hands_cdf``)."""
    n, dev = len(done), done.device
    kinds = (st.opponent[:, None] == torch.arange(len(Opponent), device=dev)) & done[:, None]
    learner_points = rewards.gather(1, st.learner_team[:, None]).double()
    stats.hands += kinds.sum(0)
    stats.points += (kinds * learner_points).sum(0)
    store = st.buffers
    assert isinstance(store, HandStore)
    store.end(done, rewards * cfg.reward_scale)
    team = torch.randint(0, 2, (n,), device=dev)
    drawn = torch.searchsorted(
        st.new_hands_cdf, torch.rand(n, dtype=torch.float64, device=dev), right=True
    )
    st.learner_team = torch.where(done, team, st.learner_team)
    st.opponent = torch.where(done, drawn, st.opponent)


def rollout_step(
    st: RolloutState,
    model: ActorCritic,
    pool: OpponentPool,
    cfg: Config,
    rng: np.random.Generator,
    device: torch.device,
    stats: RolloutStats,
) -> Batch | None:
    """One engine step: every seat to move acts, and the hands that end are counted and
    replaced. Returns the numpy engine's ended hands with learner decisions (None if none);
    the torch engine keeps them in its :class:`HandStore`, and its step reads nothing back
    from the device (``tests/test_ppo_device.py`` holds it to that)."""
    xp = st.xp
    actions = choose_actions(st, model, pool, cfg, rng, device)
    obs, mask, seat, rewards, done = st.env.step(actions)
    st.obs, st.mask, st.seat = xp.asarray(obs), xp.asarray(mask), xp.asarray(seat)
    done, rewards = xp.asarray(done), xp.asarray(rewards)
    if isinstance(st.buffers, HandStore):
        end_hands_on_device(st, done, rewards, cfg, stats)
    elif done.any():
        return finish_hands(st, done, rewards, cfg, rng, pool, stats)
    return None


def begin_rollout(st: RolloutState, pool: OpponentPool, rng: np.random.Generator) -> RolloutStats:
    """Before a rollout's steps: the snapshot its hands face, the chances of the opponents of
    the hands it deals, and empty per-opponent counts."""
    xp = st.xp
    pool.draw_snapshot(rng)
    probs = new_hand_probs(st.probs, bool(pool.snapshots))
    st.may_face |= probs > 0
    cdf = np.cumsum(probs)
    st.new_hands_cdf = xp.put(cdf / cdf[-1])  # as numpy's choice: the last is exactly 1
    return RolloutStats(
        xp.zeros((len(Opponent),), "float64"), xp.zeros((len(Opponent),), "float64")
    )


def collect_rollout(
    st: RolloutState,
    model: ActorCritic,
    pool: OpponentPool,
    cfg: Config,
    rng: np.random.Generator,
    device: torch.device,
) -> tuple[Batch | None, RolloutStats]:
    """``num_steps`` engine steps; returns the learner decisions of the hands that ended
    (None if none did) and the rollout's per-opponent results."""
    stats = begin_rollout(st, pool, rng)
    finished: list[Batch] = []
    model.eval()
    for _ in range(cfg.num_steps):
        hands = rollout_step(st, model, pool, cfg, rng, device, stats)
        if hands is not None:
            finished.append(hands)
    return st.buffers.collect(finished), stats.host()


# ----------------------------------------------------------------------------- per-seat GAE
def per_seat_gae(
    values: np.ndarray,
    seats: np.ndarray,
    lengths: np.ndarray,
    final_rewards: np.ndarray,
    gamma: float,
    gae_lambda: float,
) -> tuple[np.ndarray, np.ndarray]:
    """GAE over finished hands where four seats interleave their decisions.

    ``values`` (H, L): value estimates of the learner decisions of H hands, in play order,
    valid for positions ``< lengths[h]``; ``seats`` (H, L) the seat of each decision;
    ``final_rewards`` (H, 4) each seat's (scaled) reward at hand end. A decision's successor
    is the same seat's next decision in that hand; a seat's last decision gets its reward
    and a terminal next value of 0. Every other reward is 0 (scores arrive at hand end).
    Returns (advantages, returns), both (H, L), 0 on padding.
    """
    n_hands, length = values.shape
    rows = np.arange(n_hands)
    next_value = np.zeros((n_hands, 4), np.float64)
    next_adv = np.zeros((n_hands, 4), np.float64)
    seen = np.zeros((n_hands, 4), bool)
    adv = np.zeros((n_hands, length), np.float64)
    for t in range(length - 1, -1, -1):
        valid = t < lengths
        s = seats[:, t].astype(np.int64) % 4
        last = ~seen[rows, s]
        reward = np.where(last, final_rewards[rows, s], 0.0)
        nv = np.where(last, 0.0, next_value[rows, s])
        delta = reward + gamma * nv - values[:, t]
        a = delta + gamma * gae_lambda * np.where(last, 0.0, next_adv[rows, s])
        a = np.where(valid, a, 0.0)
        adv[:, t] = a
        r, sv = rows[valid], s[valid]
        next_value[r, sv] = values[valid, t]
        next_adv[r, sv] = a[valid]
        seen[r, sv] = True
    returns = np.where(np.arange(length)[None, :] < lengths[:, None], adv + values, 0.0)
    return adv.astype(np.float32), returns.astype(np.float32)


def per_seat_gae_torch(
    values: torch.Tensor,
    seats: torch.Tensor,
    lengths: torch.Tensor,
    final_rewards: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`per_seat_gae` on torch tensors, on their device (the torch engine's batches;
    float64 inside, as the numpy one; tests hold the two equal)."""
    n_hands, length = values.shape
    dev = values.device
    rows = torch.arange(n_hands, device=dev)
    next_value = torch.zeros((n_hands, 4), dtype=torch.float64, device=dev)
    next_adv = torch.zeros_like(next_value)
    seen = torch.zeros((n_hands, 4), dtype=torch.bool, device=dev)
    adv = torch.zeros((n_hands, length), dtype=torch.float64, device=dev)
    vals = values.double()
    rewards = final_rewards.double()
    zero = torch.zeros((), dtype=torch.float64, device=dev)
    for t in range(length - 1, -1, -1):
        valid = t < lengths
        s = seats[:, t].long() % 4
        last = ~seen[rows, s]
        reward = torch.where(last, rewards[rows, s], zero)
        nv = torch.where(last, zero, next_value[rows, s])
        delta = reward + gamma * nv - vals[:, t]
        a = delta + gamma * gae_lambda * torch.where(last, zero, next_adv[rows, s])
        a = torch.where(valid, a, zero)
        adv[:, t] = a
        # only the valid rows move their seat's successor (as the numpy indexing does)
        next_value[rows, s] = torch.where(valid, vals[:, t], next_value[rows, s])
        next_adv[rows, s] = torch.where(valid, a, next_adv[rows, s])
        seen[rows, s] = seen[rows, s] | valid
    pos = torch.arange(length, device=dev)[None, :] < lengths[:, None]
    returns = torch.where(pos, adv + vals, zero)
    return adv.float(), returns.float()


# ----------------------------------------------------------------------------- PPO update
LOSS_STATS = {
    "pg": "loss_policy", "v": "loss_value", "ent": "entropy", "kl": "approx_kl",
    "clip": "clipfrac", "belief": "loss_belief", "teacher": "loss_teacher",
    "distill": "loss_distill",
}  # fmt: skip
"""Per-minibatch diagnostics (policy and value losses, entropy, approximate KL, clip
fraction, belief, imitation and distillation losses) and their metrics columns."""
GRAD_STATS = ("grad_norm", "grad_clipped")
"""Per-minibatch gradient diagnostics, also metrics columns: the gradient's norm before the
clip, and whether the clip (``max_grad_norm``) bound (1) or not (0)."""


def needs_hidden(cfg: Config) -> bool:
    """The decisions must carry the hidden hands (for the central critic, the belief loss or
    the search labels, which score the real deal)."""
    return cfg.central_value or cfg.belief or cfg.distill_coef > 0


def flat_batch(batch: Batch, cfg: Config, device: torch.device) -> dict[str, torch.Tensor]:
    """Per-seat GAE over the finished hands, then their valid decisions as flat tensors
    (numpy batches: GAE on the host; the torch engine's: on their device)."""
    gae = per_seat_gae_torch if isinstance(batch["val"], torch.Tensor) else per_seat_gae
    adv, ret = gae(
        batch["val"], batch["seat"], batch["len"], batch["rew"], cfg.gamma, cfg.gae_lambda
    )
    lengths = batch["len"]
    if isinstance(lengths, torch.Tensor):
        valid: Any = torch.arange(batch["val"].shape[1], device=lengths.device)[None, :]
    else:
        valid = np.arange(batch["val"].shape[1])[None, :]
    valid = valid < lengths[:, None]
    names: tuple[str, ...] = ("obs", "mask", "act", "logp", "val", "teach")
    names += ("hid",) if needs_hidden(cfg) else ()
    flat = {k: torch.as_tensor(batch[k][valid]).to(device) for k in names}
    flat["adv"] = torch.as_tensor(adv[valid]).to(device)
    if cfg.adv_per_multiplier:
        obs, mask = (np.asarray(x.cpu()) for x in (flat["obs"], flat["mask"]))
        flat["adv"] /= torch.as_tensor(card_multipliers(obs, mask)).to(device)
    flat["ret"] = torch.as_tensor(ret[valid]).to(device)
    return flat


def card_multipliers(obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The hand's multiplier (``rules.multiplier``, read from the observation) at each card
    decision, 1 at bidding and doubling decisions: ``adv_per_multiplier``'s divisors."""
    if not len(obs):
        return np.ones(0, np.float32)
    trump = obs_field(obs, "trump").argmax(-1)
    level = obs_field(obs, "doubling_level").argmax(-1).astype(np.int64)
    base = int(obs_field(obs, "butifarra_base")[0, 0])  # the run's option: one value
    mult = multiplier(trump, level, base)
    return np.where(bidding_rows(mask), 1, mult).astype(np.float32)


def value_loss(
    value: torch.Tensor, old_value: torch.Tensor, ret: torch.Tensor, cfg: Config
) -> torch.Tensor:
    """Squared error to the GAE returns (optionally clipped around the old estimates)."""
    if cfg.clip_vloss:
        v_clip = old_value + (value - old_value).clamp(-cfg.clip_coef, cfg.clip_coef)
        return 0.5 * torch.max((value - ret) ** 2, (v_clip - ret) ** 2).mean()
    return 0.5 * ((value - ret) ** 2).mean()


MINIBATCH_KEYS = ("mask", "act", "logp", "val", "teach", "hid", "adv", "ret")
"""The flat batch's tensors the loss reads per minibatch (``obs`` is read once, as inputs)."""


def ppo_loss(
    model: ActorCritic,
    b: dict[str, torch.Tensor],
    inputs: NetInputs,
    j: torch.Tensor,
    cfg: Config,
    teacher_weight: float = 0.0,
    distill: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped PPO loss on the rows ``j`` of the flat batch ``b`` (``inputs``: what the
    network reads of it), plus the auxiliary belief, imitation and distillation losses
    (``distill``: observations, masks and best cards drawn from :class:`SearchLabels`), and
    diagnostics."""
    # ``index_select`` copies the minibatch's rows; ``t[j]`` (advanced indexing) gives the
    # same tensors four to five times slower on the CPU (3-7% of an update's CPU time)
    minibatch = {k: b[k].index_select(0, j) for k in MINIBATCH_KEYS if k in b}
    mask = minibatch["mask"]
    logits, value, belief_loss = model.forward_inputs(inputs.rows(j), minibatch.get("hid"))
    logits, value = logits.float(), value.float()  # the losses in float32 (``update_bf16``)
    all_logp = masked_log_probs(logits, mask)
    new_logp = all_logp.gather(-1, minibatch["act"][:, None]).squeeze(-1)
    entropy = masked_entropy(logits, mask).mean()
    log_ratio = new_logp - minibatch["logp"]
    ratio = log_ratio.exp()
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clipfrac = ((ratio - 1.0).abs() > cfg.clip_coef).float().mean()
    a = minibatch["adv"]
    if cfg.norm_adv and len(j) > 1:
        a = (a - a.mean()) / (a.std() + 1e-8)
    clipped = ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)
    pg_loss = torch.max(-a * ratio, -a * clipped).mean()
    v_loss = value_loss(value, minibatch["val"], minibatch["ret"], cfg)
    loss = pg_loss - cfg.ent_coef * entropy + cfg.vf_coef * v_loss
    if belief_loss is None:
        belief_loss = torch.tensor(math.nan)  # logged as nan: no belief head
    else:
        loss = loss + cfg.belief_coef * belief_loss
    teach = minibatch["teach"]
    asked = teach >= 0
    imitation = torch.tensor(math.nan)  # logged as nan: no teacher now
    bid_floor = cfg.teacher_bid_floor
    if (teacher_weight > 0 or bid_floor > 0) and bool(asked.any()):
        ce = -all_logp[asked].gather(-1, teach[asked][:, None]).squeeze(-1)
        weight = torch.where(
            bidding_rows(mask[asked]), max(teacher_weight, bid_floor), teacher_weight
        )
        imitation = ce.mean()
        loss = loss + (weight * ce).mean()
    distilled = torch.tensor(math.nan)  # logged as nan: no labels yet, or distillation off
    if distill is not None:
        d_obs, d_mask, d_best = distill
        d_logp = masked_log_probs(model.logits(d_obs, d_mask).float(), d_mask)
        # minus the log of the policy's mass on the best cards (any of them will do)
        distilled = -torch.logsumexp(d_logp.masked_fill(~d_best, -math.inf), -1).mean()
        loss = loss + cfg.distill_coef * distilled
    parts = (pg_loss, v_loss, entropy, approx_kl, clipfrac, belief_loss, imitation, distilled)
    return loss, dict(zip(LOSS_STATS, parts, strict=True))


def ppo_update(
    model: ActorCritic,
    optimizer: torch.optim.Optimizer,
    batch: Batch,
    cfg: Config,
    progress: float,
    device: torch.device,
    labels: SearchLabels | None = None,
) -> dict[str, float]:
    """Clipped PPO epochs over minibatches of one rollout's finished hands; ``progress``
    (0 to 1) is the share of the budget spent, for the step-size schedule. With ``labels``
    (search distillation), each minibatch also draws ``cfg.distill_batch`` of them."""
    b = flat_batch(batch, cfg, device)
    with torch.no_grad():  # no parameter goes into them: once per batch, not per minibatch
        inputs = model.inputs(b["obs"], b["mask"], legal_cards=True)
    size = len(b["act"])
    mb = max(1, math.ceil(size / cfg.num_minibatches))
    teacher_weight = cfg.teacher_weight(progress)
    if cfg.anneal_lr:
        optimizer.param_groups[0]["lr"] = annealed_lr(
            cfg.learning_rate, cfg.lr_final, True, progress
        )
    max_norm = cfg.max_grad_norm or math.inf  # 0: no clip (the norm is still measured)
    model.train()
    stats: dict[str, list[float]] = {k: [] for k in (*LOSS_STATS, *GRAD_STATS)}
    for _ in range(cfg.update_epochs):
        perm = torch.randperm(size, device=device)
        for start in range(0, size, mb):
            j = perm[start : start + mb]
            distill = None if labels is None else labels.draw(cfg.distill_batch, device)
            with torch.autocast(device.type, torch.bfloat16, enabled=cfg.update_bf16):
                loss, parts = ppo_loss(model, b, inputs, j, cfg, teacher_weight, distill)
            optimizer.zero_grad()
            loss.backward()
            norm = float(nn.utils.clip_grad_norm_(model.parameters(), max_norm))
            optimizer.step()
            for k, v in parts.items():
                stats[k].append(float(v.detach()))
            stats["grad_norm"].append(norm)
            stats["grad_clipped"].append(float(norm > max_norm))
        if cfg.target_kl is not None and stats["kl"][-1] > cfg.target_kl:
            break
    return update_metrics(stats, b["ret"], b["val"], optimizer)


def update_metrics(
    stats: dict[str, list[float]],
    returns: torch.Tensor,
    values: torch.Tensor,
    optimizer: torch.optim.Optimizer,
) -> dict[str, float]:
    """The update's row of diagnostics (means over its minibatches: ``grad_clipped`` is the
    share of them the gradient clip bound)."""
    var_y = float(returns.var()) if len(returns) > 1 else float("nan")
    explained = float("nan") if not var_y > 0 else 1 - float((returns - values).var()) / var_y
    row = {column: float(np.mean(stats[k])) for k, column in LOSS_STATS.items()}
    row |= {k: float(np.mean(stats[k])) for k in GRAD_STATS}
    row["explained_variance"], row["batch_transitions"] = explained, float(len(returns))
    return row | {"learning_rate": float(optimizer.param_groups[0]["lr"])}


# ----------------------------------------------------------------------------- search distillation
@dataclass
class SearchLabels:
    """Search distillation (``--distill-coef``): the last ``capacity`` labelled learner
    positions, a ring. ``best`` marks the cards that the search agent's scoring of one deal
    rates best on the position's real deal (:func:`label_positions`). The real deal is an
    exact draw from what the mover cannot see, so the loss, minus the log of the policy's
    mass on those cards, is least for the policy that plays each card as often as it is
    best over the deals the position can hide: the search's vote over sampled deals, with
    the posterior as its sampler. Held in the full checkpoint (a resumed run replays
    exactly)."""

    obs: torch.Tensor  # (C, W) uint8 observations
    mask: torch.Tensor  # (C, 56) int8 legal-action masks
    best: torch.Tensor  # (C, 56) bool the best cards on the real deal
    size: int = 0
    next: int = 0

    @classmethod
    def empty(cls, capacity: int, obs_size: int) -> SearchLabels:
        return cls(
            torch.zeros((capacity, obs_size), dtype=torch.uint8),
            torch.zeros((capacity, N_ACTIONS), dtype=torch.int8),
            torch.zeros((capacity, N_ACTIONS), dtype=torch.bool),
        )

    def add(self, obs: np.ndarray, mask: np.ndarray, best: np.ndarray) -> None:
        """Append rows, overwriting the oldest once full (of more rows than there is room
        for, the last ones)."""
        capacity = len(self.best)
        obs, mask, best = obs[-capacity:], mask[-capacity:], best[-capacity:]
        at = torch.as_tensor((self.next + np.arange(len(best))) % capacity)
        self.obs[at] = torch.as_tensor(obs)
        self.mask[at] = torch.as_tensor(mask)
        self.best[at] = torch.as_tensor(best)
        self.next = (self.next + len(best)) % capacity
        self.size = min(capacity, self.size + len(best))

    def draw(
        self, n: int, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """``n`` rows drawn uniformly with replacement (torch's generator), on ``device``;
        None while empty."""
        if not self.size:
            return None
        j = torch.randint(self.size, (n,))
        return self.obs[j].to(device), self.mask[j].to(device), self.best[j].to(device)

    def state(self) -> dict[str, Any]:
        """For the full checkpoint: the filled rows and where the next one goes."""
        return {
            "obs": self.obs[: self.size].clone(),
            "mask": self.mask[: self.size].clone(),
            "best": self.best[: self.size].clone(),
            "next": self.next,
        }

    @classmethod
    def restored(cls, state: Mapping[str, Any], capacity: int, obs_size: int) -> SearchLabels:
        """The labels of :meth:`state` (ValueError when they do not fit ``capacity`` and
        ``obs_size``)."""
        labels = cls.empty(capacity, obs_size)
        size = len(state["best"])
        if (
            size > capacity
            or not 0 <= int(state["next"]) < capacity
            or (tuple(state["obs"].shape[1:]) != (obs_size,))
        ):
            raise ValueError("the search labels do not fit distill_buffer and the observation")
        labels.obs[:size], labels.mask[:size] = state["obs"], state["mask"]
        labels.best[:size] = state["best"]
        labels.size, labels.next = size, int(state["next"])
        return labels


class SearchLabeller:
    """Expert iteration's labels (``--distill-search``): the card the search agent plays on
    a learner position, with the learner's current policy as its card prior and bidder (a
    copy of the network, refreshed at every call), so the labels improve as the policy does.
    The search's deals are drawn from a seed taken from the run's generator at every call
    (a resumed run labels exactly as the uninterrupted one)."""

    def __init__(self, search: SearchConfig, model: ActorCritic) -> None:
        self.model = model
        self.prior = copy.deepcopy(model).cpu()  # model_for would draw from torch's generator
        bidder = PPOAgent.from_model(self.prior)
        self.agent = SearchAgent(search, bidding=bidder, default_policy=DEFAULT_POLICY)

    def __call__(self, obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """(rows, 56) bool: the search's card on each row (v0 observations and masks)."""
        self.prior.load_state_dict(self.model.state_dict())
        self.agent.reset(int(rng.integers(2**63)))
        best = np.zeros((len(obs), N_ACTIONS), dtype=bool)
        if len(obs):
            best[np.arange(len(obs)), self.agent.act_batch(obs, mask)] = True
        return best


def label_positions(
    batch: Batch,
    cfg: Config,
    rng: np.random.Generator,
    labeller: Callable[[np.ndarray, np.ndarray, np.random.Generator], np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Up to ``cfg.distill_labels`` of the batch's learner card decisions with a choice of
    cards and at most ``cfg.distill_max_tricks`` tricks left (the current one included),
    drawn at random, with the search's best cards on each one's real deal
    (:func:`agents.search_agent.best_cards_on_deal`, from the hidden hands the decisions
    carry), or with ``labeller``'s cards (:class:`SearchLabeller`, ``--distill-search``):
    observations, masks and (rows, 56) bool best cards."""
    host = {
        k: batch[k].cpu().numpy() if isinstance(batch[k], torch.Tensor) else batch[k]
        for k in ("obs", "mask", "hid", "len")
    }
    valid = np.arange(host["obs"].shape[1])[None, :] < host["len"][:, None]
    obs, mask, hid = host["obs"][valid], host["mask"][valid], host["hid"][valid]
    choice = (mask[:, :N_CARDS] != 0).sum(1) >= 2
    late = obs_field(obs, "hand").sum(1, dtype=np.int64) <= cfg.distill_max_tricks  # cards = tricks
    rows = np.flatnonzero(choice & late)
    if len(rows) > cfg.distill_labels:
        rows = np.sort(rng.choice(rows, cfg.distill_labels, replace=False))
    if labeller is not None:
        obs, mask = obs[rows], mask[rows]
        return obs, mask, labeller(obs, mask, rng)
    best: list[int] = []
    for r in rows:
        hidden = [bits_from_mask(hid[r, N_CARDS * s : N_CARDS * (s + 1)]) for s in range(3)]
        legal = bits_from_mask(mask[r])
        best.append(best_cards_on_deal(read_view(obs[r]), legal, hidden, cfg.distill_endgame))
    best_cards = np.zeros((len(rows), N_ACTIONS), dtype=bool)
    if best:
        best_cards[:] = masks_from_bits(best) != 0
    return obs[rows], mask[rows], best_cards


# ----------------------------------------------------------------------------- the loop
def train(
    cfg: Config,
    on_update: Callable[[dict[str, float]], None] | None = None,
    *,
    opponent: Agent | None = None,
    teacher: Agent | None = None,
    env_factory: EnvFactory | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Train until the budget is spent; returns the last metrics row (also in metrics.csv).

    Every check comes first (:func:`~train.ppo_checkpoint.prepare_run`: RunRefused, a
    ValueError, before anything is written). ``cfg.resume`` continues the run exactly where
    its checkpoint stopped. ``on_update(metrics)`` is called after every update (its time
    counts; an exception from it stops the run). ``opponent`` and ``teacher`` replace the
    agents ``cfg.opponent_agent`` and ``cfg.teacher`` would build; ``clock`` gives the seconds
    the budget counts (a time budget spent before any hand finished goes on until one has).
    Ctrl-C finishes the update, saves a checkpoint and raises :class:`TrainingInterrupted`
    saying how to resume; a second Ctrl-C stops at once. ``env_factory`` (default: the
    engine ``cfg.engine`` names) builds the batched engine."""
    run = checkpoint.prepare_run(cfg)
    cfg = run.cfg
    device = setup_torch(cfg)
    rng = np.random.default_rng(cfg.seed)
    model = model_for(cfg).to(device)
    if run.init is not None:
        model.load_state_dict(run.init)
    if opponent is None and cfg.uses_fixed_agent():
        opponent = make_opponent_agent(cfg.opponent_agent, cfg.seed)
    if teacher is None and cfg.teacher is not None:
        teacher = make_opponent_agent(cfg.teacher, cfg.seed)
    arrays = TorchArrays if cfg.engine == "torch" else NumpyArrays
    xp = arrays(device, cfg.obs_version)
    if cfg.engine == "torch":  # the agents read and return the rollout's tensors
        opponent, teacher = device_players(opponent, teacher)
    factory = env_factory or xp.make_env
    pool = OpponentPool(model_for(cfg).to(device), opponent, teacher)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, eps=1e-5)
    at, metrics, pool.snapshots = checkpoint.restore(run, model, optimizer, rng)
    labels, labeller = None, None
    if cfg.distill_coef > 0:
        search = distill_search_config(cfg)
        labeller = None if search is None else SearchLabeller(search, model)
        labels = SearchLabels.empty(cfg.distill_buffer, xp.obs_size)
        if run.resume is not None and "labels" in run.resume:
            try:
                labels = SearchLabels.restored(run.resume["labels"], *labels.obs.shape)
            except (KeyError, TypeError, RuntimeError, ValueError) as exc:
                path = str(run.resumed_from)
                raise RunRefused(f"checkpoint {path!r} cannot be restored: {exc}") from exc
    checkpoint.setup_run_folder(run)  # every check passed: from here on the folder is ours

    def save() -> None:
        extra = {} if labels is None else {"labels": labels.state()}
        checkpoint.save(run, model, optimizer, pool.snapshots, rng, at, metrics, extra)

    log = MetricsLog(cfg, at.update)
    saved_update, rollouts = at.update, None
    last = clock()
    try:
        with deferred_interrupt() as interrupts:
            while not checkpoint.run_finished(cfg, at) and not interrupts:
                budget = (cfg.total_updates, cfg.total_minutes, at.update, at.elapsed_s)
                progress = budget_progress(*budget)
                if rollouts is None or at.update % cfg.checkpoint_every == 0:
                    rollouts = start_rollouts(cfg, at.update, factory, rng, pool, progress, xp)
                rollouts.probs = cfg.opponent_probs(progress)
                rollouts.ask_teacher = cfg.asks_teacher(progress)
                rollouts.teach_bids_only = cfg.teacher_weight(progress) <= 0
                if at.update % cfg.snapshot_every == 0:
                    pool.add_snapshot(model, cfg.snapshot_pool)
                batch, stats = collect_rollout(rollouts, model, pool, cfg, rng, device)
                metrics = {}
                if batch is not None and labels is not None:
                    started = clock()  # the search's time counts in the budget like the rest
                    labels.add(*label_positions(batch, cfg, rng, labeller))
                    metrics["distill_seconds"] = clock() - started
                if batch is not None:
                    metrics |= ppo_update(model, optimizer, batch, cfg, progress, device, labels)
                steps = cfg.num_envs * cfg.num_steps
                at.update += 1
                at.global_step += steps
                at.hands += int(stats.hands.sum())
                now = clock()
                dt, last = now - last, now
                at.elapsed_s += dt
                metrics |= stats.metrics() | {"minutes": at.elapsed_s / 60.0}
                metrics |= {"update": at.update, "global_step": at.global_step, "hands": at.hands}
                metrics["steps_per_second"] = steps / max(dt, 1e-9)
                trained = metrics.get("batch_transitions", 0.0)  # learner decisions trained
                metrics["learner_decisions_per_second"] = trained / max(dt, 1e-9)
                if cfg.eval_every and at.update % cfg.eval_every == 0:
                    metrics |= evaluate(model, cfg, device)
                    now = clock()
                    metrics["eval_seconds"], last = now - last, now
                    at.elapsed_s += metrics["eval_seconds"]
                log.write(metrics)
                if at.update % cfg.checkpoint_every == 0 or checkpoint.run_finished(cfg, at):
                    save()
                    saved_update = at.update
                checkpoint.save_milestones(run, model, at)
                if on_update is not None:
                    on_update(dict(metrics))
            if interrupts and saved_update != at.update:
                save()
    finally:
        log.close(finished=not interrupts)
    if interrupts:
        raise checkpoint.interrupted(cfg, at.update)
    return metrics


# ----------------------------------------------------------------------------- main
def parse_config(argv: list[str] | None = None) -> Config:
    """The Config of a command line (tyro). With ``--init-from`` (and no ``--resume``) the
    architecture flags default to the checkpoint's network, so that a flag given explicitly
    and contradicting it is the one error. RunRefused when the ``--init-from`` file is
    unusable."""
    import tyro

    description = (__doc__ or "").split("\n\n")[0]
    cfg = tyro.cli(Config, args=argv, description=description)
    if cfg.init_from is None or cfg.resume or not isinstance(cfg.init_from, str):
        return cfg
    defaults = replace(Config(), **init_arch(cfg.init_from))
    return tyro.cli(Config, args=argv, default=defaults, description=description)


def main(argv: list[str] | None = None) -> None:
    """CLI entry: parse the Config with tyro, check everything, train. Bad flags and runs
    that cannot start as asked: one ``error:`` line, exit status 2, nothing changed. Ctrl-C:
    a final checkpoint, how to resume, exit status 130."""
    try:
        cfg = parse_config(argv)
        metrics = train(cfg)
    except ImportError as exc:  # tyro or tqdm missing (torch is checked at import)
        print(f"error: python -m train.ppo needs the 'train' extra ({exc}): "
              "pip install 'butifarra-rl[train]'", file=sys.stderr)  # fmt: skip
        raise SystemExit(2) from None
    except RunRefused as exc:  # every refusal comes before anything is written
        print("error: " + " ".join(str(exc).split()), file=sys.stderr)
        raise SystemExit(2) from None
    except TrainingInterrupted as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(130) from None
    except KeyboardInterrupt:
        if "cfg" not in locals():
            print("interrupted while starting the run; nothing was trained", file=sys.stderr)
            raise SystemExit(130) from None
        path = cfg.checkpoint_path
        last = f"the last checkpoint is {str(path)!r}; " if path.exists() else ""
        print(f"interrupted at once: no final checkpoint; {last}continue with: "
              f"{cfg.resume_command()}", file=sys.stderr)  # fmt: skip
        raise SystemExit(130) from None
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()})


if __name__ == "__main__":
    main()
