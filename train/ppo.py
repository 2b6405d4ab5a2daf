"""Self-play PPO for Butifarra, in one file (in the spirit of CleanRL's ``ppo.py``).

It reads top to bottom: config -> env factory -> network (imported from
:mod:`agents.ppo_net`) -> rollout -> per-seat GAE -> PPO update -> evaluation -> checkpoints
and logs -> the training loop (:class:`Trainer`) -> ``main``.

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

The network, its masked categorical and the checkpoint format live in :mod:`agents.ppo_net`
(an agent needs them to play; training only adds the optimiser).

Usage::

    python -m train.ppo --help
    python -m train.ppo --total-minutes 60 --export-path my_agent.pt
    python -m train.ppo --run-name NAME --resume      # continue an interrupted run
    python -m train.ppo --init-from shipped --opponent-agent ppo --opp-rule 1 \
        --opp-self 0 --opp-snapshot 0 --opp-random 0    # fine-tune against the shipped agent

A run never overwrites what it did not write: a second run with the same name is refused
(``--resume`` continues it), as is an ``--export-path`` holding another run's file. Bad flags
are one ``error:`` line and exit status 2, before anything is touched. Checkpoints
(``runs/NAME/checkpoint.pt``, and the one before it, ``checkpoint.prev.pt``) are written
atomically, fingerprinted, and hold everything a bit-exact resume needs; they load with
``torch.load(..., weights_only=True)``. Ctrl-C saves a checkpoint and exits with status 130.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
import re
import shlex
import shutil
import signal
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn as nn

from agents import Agent, make_agent
from agents.evaluation.arena import duel, mean_ci
from agents.ppo_agent import PPOAgent
from agents.registry import DEFAULT_PPO_CHECKPOINT
from butifarra_env.core.actions import N_ACTIONS, random_legal_actions
from butifarra_env.core.cards import N_CARDS
from butifarra_env.core.fileio import atomic_writer
from butifarra_env.core.observation import OBS_SIZE
from butifarra_env.core.validate import check_int, check_number
from butifarra_env.envs.batched import BatchedEnv

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter


# ----------------------------------------------------------------------------- config
class Opponent(IntEnum):
    """Who the learner's team faces in a training hand (drawn per hand and engine slot)."""

    SELF = 0
    """The current policy: pure self-play, all four seats learn."""
    SNAPSHOT = 1
    """A past snapshot of the policy."""
    RULE = 2
    """The fixed agent of ``opponent_agent`` (the rule-based agent by default)."""
    RANDOM = 3
    """The uniformly random agent."""


OPPONENTS = tuple(o.name.lower() for o in Opponent)
"""Opponent names in :class:`Opponent` order: self, snapshot, rule, random."""


def parse_opp_schedule(text: str) -> list[tuple[float, np.ndarray]]:
    """``opp_schedule`` as (start share, normalised probabilities) stages, in order;
    ValueError naming what is wrong (the format is in :attr:`Config.opp_schedule`)."""
    form = 'stages "FROM:name=share,...;..." with names self, snapshot, rule, random'
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"opp_schedule must be {form}, got {text!r}")
    stages: list[tuple[float, np.ndarray]] = []
    for stage in text.split(";"):
        start_text, sep, mix = stage.partition(":")
        try:
            start = float(start_text)
        except ValueError:
            start = math.nan
        if not sep or not 0.0 <= start < 1.0:
            raise ValueError(f"opp_schedule stage {stage!r}: FROM must be a share in [0, 1)")
        p = np.zeros(len(Opponent))
        for item in mix.split(","):
            name, eq, value = (part.strip() for part in item.partition("="))
            try:
                share = float(value)
            except ValueError:
                share = math.nan
            if not eq or name not in OPPONENTS or not 0.0 <= share < math.inf:
                raise ValueError(
                    f"opp_schedule stage {stage!r}: {item.strip()!r} is not name=share "
                    f"with name one of {', '.join(OPPONENTS)} and share >= 0"
                )
            p[OPPONENTS.index(name)] = share
        if p.sum() <= 0:
            raise ValueError(f"opp_schedule stage {stage!r}: the shares must not all be 0")
        if stages and start <= stages[-1][0]:
            raise ValueError(f"opp_schedule stage {stage!r}: stages must start in increasing order")
        stages.append((start, p / p.sum()))
    if stages[0][0] != 0.0:
        raise ValueError(f"opp_schedule: the first stage must start at 0, got {stages[0][0]}")
    return stages


MAX_NUM_ENVS = 1 << 16
"""Most engine slots a run may ask for (each holds ~45 KB of rollout buffers)."""


@dataclass
class Config:
    """Every knob of a training run (each one is a CLI flag: ``python -m train.ppo --help``)."""

    exp_name: str = "ppo"
    """Prefix of the run name (the run name also carries the seed)."""
    run_name: str | None = None
    """Folder name under ``run_dir``; default ``{exp_name}_s{seed}``. ``--resume`` uses it."""
    run_dir: str = "runs"
    """Where runs write checkpoint.pt, metrics.csv and TensorBoard events."""
    seed: int = 1
    """Seeds torch, numpy and the deals: the same seed gives the same run on CPU."""
    device: str = "auto"
    """"auto" (CUDA when present, else CPU), "cpu" or "cuda[:i]"."""
    torch_threads: int = 0
    """torch.set_num_threads; 0 = min(2, CPU count) (small nets gain nothing from more)."""
    deterministic: bool = True
    """torch.use_deterministic_algorithms (cheap on CPU for this MLP)."""

    total_minutes: float = 60.0
    """Wall-clock training budget, summed over resumes; 0 = no time limit."""
    total_updates: int = 0
    """Stop after this many PPO updates; 0 = no limit (then total_minutes must be > 0)."""

    num_envs: int = 256
    """Hands played in parallel by the batched engine."""
    num_steps: int = 64
    """Engine steps (decisions of any seat) per environment per rollout."""
    hidden: int = 256
    """Width of the MLP trunk."""
    layers: int = 2
    """Hidden layers in the MLP trunk."""
    central_value: bool = True
    """Centralised critic: the value MLP also sees the three hidden hands (from eng.state())."""
    canonical_suits: bool = True
    """Relabel suits inside the model so trump is always suit 0 (shares card-play learning)."""
    mask_input: bool = True
    """Feed the legal-action mask to the networks as 56 extra inputs."""
    belief: bool = True
    """Belief head on the policy trunk: predicts which other seat holds each card, trained
    as an auxiliary loss (weight ``belief_coef``) against the true hidden hands."""
    belief_coef: float = 0.5
    """Weight of the belief loss (binary cross-entropy, mean over 144 outputs)."""
    card_features: bool = False
    """Give the trunk what the rules say about each card: masters, cards that would win
    the trick now, whether the partner is winning it (147 extra inputs)."""
    card_head: bool = False
    """Add to each card's logit the output of one small network shared by all 48 cards,
    reading that card's features and the trunk (card play learnt once for every card)."""
    init_from: str | None = None
    """Start the network from an agent checkpoint instead of a fresh initialisation: a path,
    or "shipped" (the shipped PPO weights). On the command line the architecture flags
    default to the checkpoint's; a flag that contradicts it is an error."""

    learning_rate: float = 5e-4
    """Adam step size."""
    anneal_lr: bool = True
    """Linearly anneal the step size towards ``lr_final`` x learning_rate over the budget
    (the larger of the spent shares of total_updates and total_minutes)."""
    lr_final: float = 0.0
    """With anneal_lr: the step size at the end of the budget, as a fraction of learning_rate."""
    gamma: float = 1.0
    """Discount per own decision (a hand is short; 1.0 = undiscounted hand score)."""
    gae_lambda: float = 0.95
    """GAE lambda along each seat's own decisions."""
    reward_scale: float = 1.0 / 36.0
    """Rewards (raw team score difference, up to +-1152) are multiplied by this for learning."""
    num_minibatches: int = 4
    """Minibatches per epoch (the batch size varies with the number of finished hands)."""
    update_epochs: int = 4
    """Passes over each batch."""
    clip_coef: float = 0.2
    """PPO ratio clipping."""
    clip_vloss: bool = False
    """Clip the value loss around the old value estimates as in the PPO paper's code."""
    ent_coef: float = 0.01
    """Weight of the entropy bonus (entropy over legal actions only)."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    max_grad_norm: float = 0.5
    """Gradient-norm clipping."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    target_kl: float | None = None
    """Stop the epochs early when the approximate KL exceeds this (None = never)."""

    opp_self: float = 0.05
    """Share of hands in pure self-play (all four seats are the learner)."""
    opp_snapshot: float = 0.0
    """Share of hands against a past snapshot of the policy."""
    opp_rule: float = 0.85
    """Share of hands against the fixed agent (``opponent_agent``; rule-based by default)."""
    opp_random: float = 0.1
    """Share of hands against the uniformly random agent."""
    opp_schedule: str | None = None
    """Opponent curriculum: stages "FROM:name=share,...;FROM:..." where FROM is the share of
    the budget (0 to 1) at which the stage starts and names are self, snapshot, rule and
    random (omitted ones are 0), e.g. "0:self=.3,snapshot=.1,rule=.5,random=.1;0.1:rule=.9,
    random=.1". The first stage starts at 0. Replaces the four opp_* shares when given."""
    teacher: str | None = "rule"
    """Kickstarting: a registry agent ("rule") whose choice at each of the learner's
    decisions is imitated by an extra cross-entropy loss, weighted ``teacher_coef`` at the
    start and falling linearly to 0 at ``teacher_until`` of the budget. The learner still
    acts itself (PPO stays on-policy); the teacher only says what it would have done."""
    teacher_coef: float = 1.0
    """Initial weight of the imitation loss (mean cross-entropy of the teacher's action)."""
    teacher_until: float = 0.25
    """Share of the budget (0 to 1) at which the imitation weight reaches 0."""
    teacher_bid_floor: float = 0.0
    """Least imitation weight on bidding and doubling decisions (no card to play), kept for
    the whole run: these are rare and high-variance, so PPO alone drifts from the teacher's
    calibrated bids after the schedule ends. 0 = they follow the schedule like the rest."""
    opponent_agent: str = "rule"
    """Registry spec of the fixed agent of the ``opp_rule`` share ("rule", "random", "ppo",
    "ppo:PATH", "search:..."), on both opponent seats; also evaluated against when it is
    neither rule nor random (``eval_opponent_*``)."""
    snapshot_every: int = 10
    """Add the current policy to the snapshot pool every this many updates."""
    snapshot_pool: int = 8
    """Most snapshots kept (oldest dropped)."""

    eval_every: int = 30
    """Evaluate vs random, vs rule-based (and vs ``opponent_agent``) every this many updates
    (0 = never)."""
    eval_deals: int = 1000
    """Duplicate deals per interval evaluation (each played with both seatings)."""
    eval_backend: str = "arena"
    """"arena": agents/evaluation/arena.py duel (reference engine); "batched": same protocol on the
    batched engine (faster, used where the arena is unavailable)."""
    eval_seed: int = 12345
    """Seed of the fixed evaluation deal set."""
    checkpoint_every: int = 10
    """Write runs/NAME/checkpoint.pt every this many updates, at the end and on Ctrl-C (the
    one before it is kept as checkpoint.prev.pt)."""
    export_path: str | None = None
    """Also write the model alone (an agent checkpoint) here at each checkpoint; an existing
    file is only replaced if this run wrote it."""
    milestone_minutes: tuple[float, ...] = (10.0,)
    """Also keep the model as it was when the run first passed each of these wall-clock
    minutes, as ``runs/NAME/model_at_{M}min.pt`` (written once, never replaced), to measure
    the run part-way (e.g. the 10-minute target) at full evaluation size."""
    resume: bool = False
    """Continue runs/NAME from checkpoint.pt (checkpoint.prev.pt if that one is unreadable).
    Without it, a run name that already holds a run is refused."""
    tensorboard: bool = True
    """Write TensorBoard events next to the CSV log."""
    progress: bool = True
    """Show a tqdm progress bar with live metrics."""

    def validate(self) -> None:
        """Raise ValueError naming the first bad field (before any work is done). Files and
        folders are checked by :class:`Trainer` (:func:`check_output_paths`)."""
        self._validate_counts()
        self._validate_coefficients()
        self._validate_choices()
        self._validate_names()
        self._validate_agents()

    def _validate_counts(self) -> None:
        bounded = {"hidden": MAX_HIDDEN, "layers": MAX_LAYERS, "num_envs": MAX_NUM_ENVS}
        positive_ints = (
            "num_envs", "num_steps", "hidden", "layers", "num_minibatches", "update_epochs",
            "snapshot_every", "snapshot_pool", "checkpoint_every", "eval_deals",
        )  # fmt: skip
        for name in positive_ints:
            check_int(name, getattr(self, name), 1, bounded.get(name))
        for name in ("total_updates", "eval_every", "torch_threads", "seed", "eval_seed"):
            check_int(name, getattr(self, name), 0)
        check_number("total_minutes", self.total_minutes, 0.0, lo_inclusive=True)
        if not isinstance(self.milestone_minutes, (tuple, list)):
            raise ValueError(
                f"milestone_minutes must be a list of minutes, got {self.milestone_minutes!r}"
            )
        for m in self.milestone_minutes:
            check_number("milestone_minutes", m, 0.0)
        if self.total_minutes == 0 and self.total_updates == 0:
            raise ValueError("set total_minutes > 0 or total_updates > 0, or the run never ends")

    def _validate_coefficients(self) -> None:
        for name in ("learning_rate", "clip_coef", "reward_scale"):
            check_number(name, getattr(self, name), 0.0)
        for name in ("gamma", "gae_lambda", "lr_final", "teacher_until"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0):
                raise ValueError(f"{name} must be in [0, 1], got {v!r}")
        for name in (
            "ent_coef",
            "vf_coef",
            "max_grad_norm",
            "belief_coef",
            "teacher_coef",
            "teacher_bid_floor",
        ):
            check_number(name, getattr(self, name), 0.0, lo_inclusive=True)
        if self.target_kl is not None:
            check_number("target_kl", self.target_kl, 0.0)

    def _validate_choices(self) -> None:
        for name in ("opp_self", "opp_snapshot", "opp_rule", "opp_random"):
            check_number(name, getattr(self, name), 0.0, lo_inclusive=True)
        if self.opp_schedule is not None:
            parse_opp_schedule(self.opp_schedule)
        elif self.opponent_probs().sum() <= 0:
            raise ValueError("opp_self, opp_snapshot, opp_rule, opp_random must not all be 0")
        if self.eval_backend not in ("arena", "batched"):
            raise ValueError(f"eval_backend must be 'arena' or 'batched': {self.eval_backend!r}")
        if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", str(self.device)):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:i]', got {self.device!r}")
        if self.device.startswith("cuda"):
            index = int(self.device.partition(":")[2] or 0)
            if not torch.cuda.is_available() or index >= torch.cuda.device_count():
                raise ValueError(f"device {self.device!r} asked for but it is not available")

    def _validate_names(self) -> None:
        for name in ("exp_name", "run_name"):
            v = getattr(self, name)
            if v is None and name == "run_name":
                continue
            if (
                not isinstance(v, str)
                or v in ("", ".", "..")
                or any(c in v for c in ("/", "\\", "\0"))
            ):
                raise ValueError(f"{name} must be a plain folder name (no '/'), got {v!r}")
        for name in ("run_dir", "export_path"):
            v = getattr(self, name)
            if not (v is None and name == "export_path") and (not isinstance(v, str) or not v):
                raise ValueError(f"{name} must be a non-empty path, got {v!r}")

    def _validate_agents(self) -> None:
        """The fixed agent can be built (a typo or a missing checkpoint fails here, not
        minutes into the run); ``init_from`` names a file (read by :class:`Trainer`)."""
        try:
            make_opponent_agent(self.opponent_agent, self.seed)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"opponent_agent: {exc}") from None
        if self.teacher is not None:
            try:
                make_opponent_agent(self.teacher, self.seed)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"teacher: {exc}") from None
        v = self.init_from
        if v is not None and (not isinstance(v, str) or not v.strip()):
            raise ValueError(f'init_from must be a checkpoint path or "shipped", got {v!r}')

    def opponent_probs(self, progress: float = 0.0) -> np.ndarray:
        """Per-hand probabilities of each :class:`Opponent` (in that order), normalised, when
        ``progress`` (0 to 1) of the budget is spent (the stage of ``opp_schedule`` then)."""
        if self.opp_schedule is not None:
            stages = parse_opp_schedule(self.opp_schedule)
            return next(p for start, p in reversed(stages) if progress >= start)
        p = np.array([self.opp_self, self.opp_snapshot, self.opp_rule, self.opp_random], float)
        return p / p.sum() if p.sum() > 0 and (p >= 0).all() else p

    def teacher_weight(self, progress: float) -> float:
        """Weight of the imitation loss when ``progress`` (0 to 1) of the budget is spent."""
        if self.teacher is None or self.teacher_until <= 0:
            return 0.0
        return self.teacher_coef * max(0.0, 1.0 - progress / self.teacher_until)

    def asks_teacher(self, progress: float) -> bool:
        """The teacher's choices are needed when ``progress`` of the budget is spent."""
        return self.teacher is not None and (
            self.teacher_weight(progress) > 0 or self.teacher_bid_floor > 0
        )

    def uses_fixed_agent(self) -> bool:
        """Some hands are drawn against ``opponent_agent`` (at some stage of the schedule)."""
        if self.opp_schedule is not None:
            return any(p[Opponent.RULE] > 0 for _, p in parse_opp_schedule(self.opp_schedule))
        return self.opp_rule > 0

    @property
    def name(self) -> str:
        return self.run_name or f"{self.exp_name}_s{self.seed}"


# ----------------------------------------------------------------------------- env factory
EnvFactory = Callable[[int, int], BatchedEnv]
"""``factory(num_envs, seed)`` -> a batched engine (tests swap in their own)."""


def make_env(num_envs: int, seed: int) -> BatchedEnv:
    """The batched engine (one hand per episode, raw rewards; we scale them ourselves)."""
    return BatchedEnv(num_envs, seed=seed)


def make_rule_agent(seed: int | None) -> Agent:
    """The rule-based opponent from the agent registry (vectorised ``act_batch``)."""
    return make_agent("rule", seed=seed)


def make_opponent_agent(spec: str, seed: int | None) -> Agent:
    """The fixed agent of the ``opp_rule`` share, from the agent registry (``opponent_agent``:
    the rule-based agent by default); ValueError naming what is wrong with ``spec``. Built
    with torch's global generator set aside, so that building it (a PPO agent initialises a
    network before loading its weights) never changes the training run's random stream."""
    with torch.random.fork_rng(devices=[]):
        return make_agent(spec, seed=seed)


EVAL_COLUMNS = {"rule": "rule", "random": "random"}
"""``opponent_agent`` specs whose evaluation has its own columns; any other is ``opponent``."""


def eval_name(spec: str) -> str:
    """The name in the ``eval_{name}_mean`` column of the evaluation against ``spec``:
    ``rule``, ``random``, or ``opponent`` for any other ``opponent_agent``."""
    return EVAL_COLUMNS.get(spec.strip().lower(), "opponent")


# ----------------------------------------------------------------------------- network
# The policy/value MLP (suit-canonical inputs, legal-mask input, centralised critic), the
# masked categorical and the checkpoint format: shared with agents.ppo_agent.PPOAgent.
from agents.ppo_net import (  # noqa: E402
    CHECKPOINT_FORMAT,
    HIDDEN_HANDS_SIZE,
    MAX_HIDDEN,
    MAX_LAYERS,
    ActorCritic,
    Checkpoint,
    UnverifiedCheckpointWarning,
    check_arch,
    check_weights,
    hidden_hands,
    load_checkpoint,
    make_arch,
    masked_entropy,
    masked_log_probs,
    masked_logits,
    model_from_checkpoint,
    model_payload,
    sample_masked,
)


def model_for(cfg: Config) -> ActorCritic:
    """The network a config asks for."""
    return ActorCritic(**arch_settings(cfg))


# ----------------------------------------------------------------------------- rollout
MAX_LEARNER_STEPS_PER_HAND = 64
"""Upper bound on decisions in one hand (48 cards + at most 2 trump choices + 8 doubling)."""

Batch = dict[str, np.ndarray]
"""Learner decisions of finished hands, padded to ``(hands, MAX_LEARNER_STEPS_PER_HAND)``:
the :class:`HandBuffers` fields, plus ``rew`` (hands, 4): each seat's scaled hand reward."""


@dataclass
class HandBuffers:
    """The learner decisions of the hand in progress at each engine slot (padded rows)."""

    obs: np.ndarray
    """(N, L, 491) uint8 observations."""
    mask: np.ndarray
    """(N, L, 56) int8 legal-action masks (reused by the update)."""
    act: np.ndarray
    """(N, L) int64 actions taken."""
    logp: np.ndarray
    """(N, L) float32 log-probabilities of those actions under the policy that acted."""
    val: np.ndarray
    """(N, L) float32 value estimates."""
    seat: np.ndarray
    """(N, L) int8 seat of each decision."""
    hid: np.ndarray
    """(N, L, 144) uint8 hidden hands for the centralised critic ((N, L, 0) without one)."""
    teach: np.ndarray
    """(N, L) int64 the teacher's action at each decision (-1 where it was not asked)."""
    len: np.ndarray
    """(N,) int64 decisions stored so far in each slot's hand."""

    @classmethod
    def empty(cls, n: int, hidden_size: int) -> HandBuffers:
        steps = MAX_LEARNER_STEPS_PER_HAND
        return cls(
            obs=np.zeros((n, steps, OBS_SIZE), np.uint8),
            mask=np.zeros((n, steps, N_ACTIONS), np.int8),
            act=np.zeros((n, steps), np.int64),
            logp=np.zeros((n, steps), np.float32),
            val=np.zeros((n, steps), np.float32),
            seat=np.zeros((n, steps), np.int8),
            hid=np.zeros((n, steps, hidden_size), np.uint8),
            teach=np.full((n, steps), -1, np.int64),
            len=np.zeros(n, np.int64),
        )

    def append(self, slots: np.ndarray, decision: Mapping[str, np.ndarray]) -> None:
        """Store one decision per slot in ``slots`` (``decision``: one row per slot)."""
        pos = self.len[slots]
        for name, rows in decision.items():
            getattr(self, name)[slots, pos] = rows
        self.len[slots] += 1

    def take(self, slots: np.ndarray) -> Batch:
        """Copies of the hands at ``slots``, every field."""
        return {f.name: getattr(self, f.name)[slots] for f in fields(self)}


@dataclass
class OpponentPool:
    """The players the learner's team can face besides itself (see :class:`Opponent`)."""

    snapshot_model: ActorCritic
    """Plays for the snapshot drawn for the current rollout."""
    fixed: Agent | None
    """The fixed agent of ``opponent_agent`` (None when no hand is drawn against it)."""
    teacher: Agent | None = None
    """The agent the learner imitates early on (``Config.teacher``; None without one)."""
    snapshots: list[dict[str, torch.Tensor]] = field(default_factory=list)
    """state_dicts of past policies, oldest first."""

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
    obs: np.ndarray
    """(N, 491) observation of the seat to move in each slot."""
    mask: np.ndarray
    """(N, 56) its legal actions."""
    seat: np.ndarray
    """(N,) the seat to move."""
    buffers: HandBuffers
    learner_team: np.ndarray
    """(N,) the team (0: seats 0 and 2, 1: seats 1 and 3) the learner plays in each hand."""
    opponent: np.ndarray
    """(N,) the :class:`Opponent` of each hand."""
    probs: np.ndarray
    """Probabilities of each :class:`Opponent` for the hands dealt now (the schedule's stage)."""
    ask_teacher: bool = False
    """Record the teacher's action at each learner decision (while its weight is > 0)."""
    teach_bids_only: bool = False
    """Ask the teacher at bidding and doubling decisions only (its schedule has ended and
    only ``teacher_bid_floor`` still weighs them)."""


@dataclass
class RolloutStats:
    """Hands finished in one rollout, and the learner team's raw points, per opponent."""

    hands: np.ndarray = field(default_factory=lambda: np.zeros(len(Opponent)))
    points: np.ndarray = field(default_factory=lambda: np.zeros(len(Opponent)))

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


def start_rollouts(
    cfg: Config,
    update: int,
    env_factory: EnvFactory,
    rng: np.random.Generator,
    pool: OpponentPool,
    progress: float = 0.0,
) -> RolloutState:
    """Fresh engine and empty buffers, seeded from ``(seed, update)``, so that a resumed run
    replays exactly what an uninterrupted one does (in-progress hands of the previous
    interval are dropped: at most one per engine slot per checkpoint interval)."""
    n = cfg.num_envs
    env_seed = int(np.random.SeedSequence([cfg.seed, update]).generate_state(1)[0])
    env = env_factory(n, env_seed)
    obs, mask, seat = env.reset(seed=env_seed)
    if pool.fixed is not None:
        pool.fixed.reset(seed=env_seed)
    buffers = HandBuffers.empty(n, HIDDEN_HANDS_SIZE if needs_hidden(cfg) else 0)
    learner_team = rng.integers(0, 2, n)
    probs = cfg.opponent_probs(progress)
    opponent = draw_opponents(rng, n, probs, bool(pool.snapshots))
    return RolloutState(
        env, np.asarray(obs), np.asarray(mask), np.asarray(seat), buffers, learner_team, opponent,
        probs,
    )  # fmt: skip


def bidding_rows(mask: Any) -> Any:
    """Rows of a (N, 56) legal-action mask (numpy or torch) with no card to play: the
    bidding and doubling decisions (``teacher_bid_floor`` keeps teaching those)."""
    return ~mask[:, :N_CARDS].any(-1)


def learner_acts(
    st: RolloutState,
    slots: np.ndarray,
    model: ActorCritic,
    with_hidden: bool,
    device: torch.device,
    teacher: Agent | None = None,
    teach_bids_only: bool = False,
) -> np.ndarray:
    """Sample the learner's actions at ``slots`` and store the decisions in the buffers
    (with ``teacher``'s choices, when given: at every decision, or at the bidding and
    doubling ones only with ``teach_bids_only``)."""
    obs, mask, seat = st.obs[slots], st.mask[slots], st.seat[slots]
    hid = hidden_hands(np.asarray(st.env.state())[slots], seat) if with_hidden else None
    o, m = torch.from_numpy(obs).to(device), torch.from_numpy(mask).to(device)
    h = None if hid is None else torch.from_numpy(hid).to(device)
    with torch.no_grad():
        logits, values = model(o, m, h)
        actions, logp = sample_masked(logits, m)
    act = actions.cpu().numpy()
    decision = {"obs": obs, "mask": mask, "act": act, "logp": logp.cpu().numpy()}
    decision |= {"val": values.cpu().numpy(), "seat": seat}
    if hid is not None:
        decision["hid"] = hid
    if teacher is not None and not teach_bids_only:
        decision["teach"] = teacher.act_batch(obs, mask)
    elif teacher is not None:
        teach = np.full(len(slots), -1, np.int64)
        bids = bidding_rows(mask)
        if bids.any():
            teach[bids] = teacher.act_batch(obs[bids], mask[bids])
        decision["teach"] = teach
    st.buffers.append(slots, decision)
    return act


def policy_samples(
    model: ActorCritic, obs: np.ndarray, mask: np.ndarray, device: torch.device
) -> np.ndarray:
    """Actions sampled from ``model``'s masked policy (for the snapshot opponent)."""
    with torch.no_grad():
        m = torch.from_numpy(mask).to(device)
        actions, _ = sample_masked(model.logits(torch.from_numpy(obs).to(device), m), m)
    return actions.cpu().numpy()


def choose_actions(
    st: RolloutState,
    model: ActorCritic,
    pool: OpponentPool,
    cfg: Config,
    rng: np.random.Generator,
    device: torch.device,
) -> np.ndarray:
    """One action per engine slot: the learner's seats sample from the current policy (and
    their decisions are stored), the other team plays as the hand's opponent does."""
    opp = st.opponent
    learner = (opp == Opponent.SELF) | ((st.seat & 1) == st.learner_team)
    mine = np.flatnonzero(learner)
    snap = np.flatnonzero(~learner & (opp == Opponent.SNAPSHOT))
    fixed = np.flatnonzero(~learner & (opp == Opponent.RULE))
    rand = np.flatnonzero(~learner & (opp == Opponent.RANDOM))
    actions = np.zeros(len(opp), np.int64)
    if len(mine):
        teacher = pool.teacher if st.ask_teacher else None
        actions[mine] = learner_acts(
            st, mine, model, needs_hidden(cfg), device, teacher, st.teach_bids_only
        )
    if len(snap):
        actions[snap] = policy_samples(pool.snapshot_model, st.obs[snap], st.mask[snap], device)
    if len(fixed):
        assert pool.fixed is not None, "the fixed agent is drawn only when opp_rule > 0"
        actions[fixed] = pool.fixed.act_batch(st.obs[fixed], st.mask[fixed])
    if len(rand):
        actions[rand] = random_legal_actions(st.mask[rand], rng)
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
    """Take the ended hands out of the buffers (None if the learner made no decision in
    them), count them, and draw the seating and opponent of the hands that replace them."""
    ended = np.flatnonzero(done)
    with_decisions = ended[st.buffers.len[ended] > 0]
    hands = None
    if len(with_decisions):
        hands = st.buffers.take(with_decisions)
        hands["rew"] = rewards[with_decisions] * cfg.reward_scale
    np.add.at(stats.points, st.opponent[ended], rewards[ended, st.learner_team[ended]])
    np.add.at(stats.hands, st.opponent[ended], 1)
    st.buffers.len[ended] = 0
    st.buffers.teach[ended] = -1
    st.learner_team[ended] = rng.integers(0, 2, len(ended))
    st.opponent[ended] = draw_opponents(rng, len(ended), st.probs, bool(pool.snapshots))
    return hands


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
    pool.draw_snapshot(rng)
    stats = RolloutStats()
    finished: list[Batch] = []
    model.eval()
    for _ in range(cfg.num_steps):
        actions = choose_actions(st, model, pool, cfg, rng, device)
        obs, mask, seat, rewards, done = st.env.step(actions)
        st.obs, st.mask, st.seat = np.asarray(obs), np.asarray(mask), np.asarray(seat)
        done = np.asarray(done)
        if done.any():
            hands = finish_hands(st, done, np.asarray(rewards), cfg, rng, pool, stats)
            if hands is not None:
                finished.append(hands)
    if not finished:
        return None, stats
    batch = {k: np.concatenate([h[k] for h in finished]) for k in finished[0]}
    batch["rew"] = batch["rew"].astype(np.float64)
    return batch, stats


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


# ----------------------------------------------------------------------------- PPO update
LOSS_STATS = ("pg", "v", "ent", "kl", "clip", "belief", "teacher")
"""Per-minibatch diagnostics: policy loss, value loss, entropy, approximate KL, clip fraction."""


def needs_hidden(cfg: Config) -> bool:
    """The decisions must carry the hidden hands (for the central critic or the belief loss)."""
    return cfg.central_value or cfg.belief


def flat_batch(batch: Batch, cfg: Config, device: torch.device) -> dict[str, torch.Tensor]:
    """Per-seat GAE over the finished hands, then their valid decisions as flat tensors."""
    adv, ret = per_seat_gae(
        batch["val"], batch["seat"], batch["len"], batch["rew"], cfg.gamma, cfg.gae_lambda
    )
    valid = np.arange(batch["val"].shape[1])[None, :] < batch["len"][:, None]
    names: tuple[str, ...] = ("obs", "mask", "act", "logp", "val", "teach")
    names += ("hid",) if needs_hidden(cfg) else ()
    flat = {k: torch.from_numpy(batch[k][valid]).to(device) for k in names}
    flat["adv"] = torch.from_numpy(adv[valid]).to(device)
    flat["ret"] = torch.from_numpy(ret[valid]).to(device)
    return flat


def value_loss(
    value: torch.Tensor, old_value: torch.Tensor, ret: torch.Tensor, cfg: Config
) -> torch.Tensor:
    """Squared error to the GAE returns (optionally clipped around the old estimates)."""
    if cfg.clip_vloss:
        v_clip = old_value + (value - old_value).clamp(-cfg.clip_coef, cfg.clip_coef)
        return 0.5 * torch.max((value - ret) ** 2, (v_clip - ret) ** 2).mean()
    return 0.5 * ((value - ret) ** 2).mean()


def ppo_loss(
    model: ActorCritic,
    b: dict[str, torch.Tensor],
    j: torch.Tensor,
    cfg: Config,
    teacher_weight: float = 0.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped PPO loss on the rows ``j`` of the flat batch ``b`` (plus the auxiliary belief
    and imitation losses), and its diagnostics."""
    mask = b["mask"][j]
    logits, value, belief_loss = model.forward_all(
        b["obs"][j], mask, b["hid"][j] if "hid" in b else None
    )
    all_logp = masked_log_probs(logits, mask)
    new_logp = all_logp.gather(-1, b["act"][j][:, None]).squeeze(-1)
    entropy = masked_entropy(logits, mask).mean()
    log_ratio = new_logp - b["logp"][j]
    ratio = log_ratio.exp()
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clipfrac = ((ratio - 1.0).abs() > cfg.clip_coef).float().mean()
    a = b["adv"][j]
    if cfg.norm_adv and len(j) > 1:
        a = (a - a.mean()) / (a.std() + 1e-8)
    clipped = ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)
    pg_loss = torch.max(-a * ratio, -a * clipped).mean()
    v_loss = value_loss(value, b["val"][j], b["ret"][j], cfg)
    loss = pg_loss - cfg.ent_coef * entropy + cfg.vf_coef * v_loss
    if belief_loss is None:
        belief_loss = torch.tensor(math.nan)  # logged as nan: no belief head
    else:
        loss = loss + cfg.belief_coef * belief_loss
    teach = b["teach"][j]
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
    parts = (pg_loss, v_loss, entropy, approx_kl, clipfrac, belief_loss, imitation)
    return loss, dict(zip(LOSS_STATS, parts, strict=True))


def ppo_update(
    model: ActorCritic,
    optimizer: torch.optim.Optimizer,
    batch: Batch,
    cfg: Config,
    progress: float,
    device: torch.device,
) -> dict[str, float]:
    """Clipped PPO epochs over minibatches of one rollout's finished hands; ``progress``
    (0 to 1) is the share of the budget spent, for the step-size schedule."""
    b = flat_batch(batch, cfg, device)
    size = len(b["act"])
    mb = max(1, math.ceil(size / cfg.num_minibatches))
    teacher_weight = cfg.teacher_weight(progress)
    if cfg.anneal_lr:
        frac = 1.0 - (1.0 - cfg.lr_final) * min(1.0, progress)
        optimizer.param_groups[0]["lr"] = frac * cfg.learning_rate
    model.train()
    stats: dict[str, list[float]] = {k: [] for k in LOSS_STATS}
    for _ in range(cfg.update_epochs):
        perm = torch.randperm(size, device=device)
        for start in range(0, size, mb):
            loss, parts = ppo_loss(model, b, perm[start : start + mb], cfg, teacher_weight)
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            optimizer.step()
            for k, v in parts.items():
                stats[k].append(float(v.detach()))
        if cfg.target_kl is not None and stats["kl"][-1] > cfg.target_kl:
            break
    return update_metrics(stats, b["ret"], b["val"], optimizer)


def update_metrics(
    stats: dict[str, list[float]],
    returns: torch.Tensor,
    values: torch.Tensor,
    optimizer: torch.optim.Optimizer,
) -> dict[str, float]:
    """The update's row of diagnostics (means over its minibatches)."""
    var_y = float(returns.var()) if len(returns) > 1 else float("nan")
    explained = float("nan") if not var_y > 0 else 1 - float((returns - values).var()) / var_y
    return {
        "loss_policy": float(np.mean(stats["pg"])),
        "loss_value": float(np.mean(stats["v"])),
        "entropy": float(np.mean(stats["ent"])),
        "approx_kl": float(np.mean(stats["kl"])),
        "clipfrac": float(np.mean(stats["clip"])),
        "loss_belief": float(np.mean(stats["belief"])),
        "loss_teacher": float(np.mean(stats["teacher"])),
        "explained_variance": explained,
        "batch_transitions": float(len(returns)),
        "learning_rate": float(optimizer.param_groups[0]["lr"]),
    }


# ----------------------------------------------------------------------------- evaluation
BatchPolicyFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""``policy(observations (N, 491), masks (N, 56)) -> actions (N,)``."""


def greedy_policy(model: ActorCritic, device: torch.device) -> BatchPolicyFn:
    """Argmax-of-legal-logits policy over numpy batches (what PPOAgent does by default)."""

    def act(obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            o = torch.from_numpy(np.ascontiguousarray(obs)).to(device)
            m = torch.from_numpy(np.ascontiguousarray(mask)).to(device)
            logits = model.logits(o, m)
            return masked_logits(logits, m).argmax(-1).cpu().numpy()

    return act


def play_first_hands(
    policy: BatchPolicyFn,
    opponent: BatchPolicyFn,
    team: int,
    n_deals: int,
    seed: int,
    env_factory: EnvFactory,
) -> np.ndarray:
    """The raw score of ``team`` (played by ``policy``) in the first hand of each of
    ``n_deals`` engine slots seeded by ``seed``; the other team is ``opponent``."""
    env = env_factory(n_deals, seed)
    obs, mask, seat = env.reset(seed=seed)
    result = np.zeros(n_deals)
    finished = np.zeros(n_deals, bool)
    while not finished.all():
        mine = (seat & 1) == team
        actions = np.zeros(n_deals, np.int64)
        if mine.any():
            actions[mine] = policy(obs[mine], mask[mine])
        if (~mine).any():
            actions[~mine] = opponent(obs[~mine], mask[~mine])
        obs, mask, seat, rewards, done = env.step(actions)
        new = np.asarray(done) & ~finished
        result[new] = np.asarray(rewards)[new, team]
        finished |= np.asarray(done)
    return result


def evaluate(
    policy: BatchPolicyFn,
    opponent: BatchPolicyFn,
    n_deals: int,
    seed: int,
    env_factory: EnvFactory = make_env,
) -> dict[str, float]:
    """Duplicate-deal match on the batched engine: every deal is played twice, the policy on
    each team once. The per-deal result is the policy team's mean raw points over both
    seatings. Returns mean points/hand, the 95% CI half-width (the arena's t interval,
    :func:`agents.evaluation.arena.mean_ci`) and the number of deals."""
    sides = [play_first_hands(policy, opponent, t, n_deals, seed, env_factory) for t in (0, 1)]
    mean, low, high = mean_ci((sides[0] + sides[1]) / 2.0)
    return {"mean": mean, "ci95": (high - low) / 2, "deals": float(n_deals)}


def evaluate_model(
    model: ActorCritic,
    cfg: Config,
    device: torch.device,
    with_rule: bool,
    env_factory: EnvFactory = make_env,
) -> dict[str, float]:
    """Points/hand of the greedy policy vs random (and vs rule-based) on the fixed deal set
    ``eval_seed``: through the arena's :func:`~agents.evaluation.arena.duel` or on the batched
    engine.
    An ``opponent_agent`` other than rule or random is evaluated against too
    (``eval_opponent_*``: the learning curve against the agent a run exploits)."""
    model.eval()
    names = ("random", "rule") if with_rule else ("random",)
    other = eval_name(cfg.opponent_agent) == "opponent"
    out: dict[str, float] = {}
    if cfg.eval_backend == "arena":
        me = PPOAgent.from_model(model, device=str(device), seed=0)
        against: dict[str, Agent | str] = {name: name for name in names}
        if other:
            against["opponent"] = make_opponent_agent(cfg.opponent_agent, cfg.eval_seed)
        for name, agent in against.items():
            result = duel(me, agent, n_deals=cfg.eval_deals, seed=cfg.eval_seed)
            out[f"eval_{name}_mean"], out[f"eval_{name}_ci95"] = result.mean, result.ci_half_width
        return out
    eval_rng = np.random.default_rng(cfg.eval_seed)
    opponents: dict[str, BatchPolicyFn] = {"random": lambda o, m: random_legal_actions(m, eval_rng)}
    if with_rule:
        opponents["rule"] = make_rule_agent(cfg.eval_seed).act_batch
    if other:
        opponents["opponent"] = make_opponent_agent(cfg.opponent_agent, cfg.eval_seed).act_batch
    for name, opp in opponents.items():
        r = evaluate(greedy_policy(model, device), opp, cfg.eval_deals, cfg.eval_seed, env_factory)
        out[f"eval_{name}_mean"], out[f"eval_{name}_ci95"] = r["mean"], r["ci95"]
    return out


# ----------------------------------------------------------------------------- checkpoints and logs
RESUME_OVERRIDES = (
    "total_minutes", "total_updates", "resume", "progress", "device", "torch_threads",
    "run_dir", "run_name", "exp_name", "export_path",
)  # fmt: skip
"""Config fields a ``--resume`` takes from the command line; all others come from the
checkpoint, so a resumed run cannot silently change its hyper-parameters."""

CHECKPOINT_NAME = "checkpoint.pt"
"""The newest full checkpoint of a run (in ``runs/NAME/``)."""
PREVIOUS_NAME = "checkpoint.prev.pt"
"""The one before it: what ``--resume`` falls back to when the newest is unreadable."""
CSV_NAME = "metrics.csv"
SAVE_DELAY_ENV = "BUTIFARRA_PPO_SAVE_DELAY"
"""Fault-injection hook for tests: seconds to pause half-way through writing each checkpoint
file (so that a test can kill the process mid-write). Unset in normal use."""


class RunRefused(ValueError):
    """A run that cannot start as asked (it exists, it has no readable checkpoint, its budget
    is spent, an output path is not its own...). Raised before anything was changed."""


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped :meth:`Trainer.train` after it saved a final checkpoint (the message
    says where, and how to resume)."""


def resumed_config(cfg: Config, saved: Mapping[str, Any]) -> Config:
    """The run's own settings (``saved``, from its checkpoint), except RESUME_OVERRIDES."""
    own = {k: v for k, v in saved.items() if k in Config.__dataclass_fields__}
    merged = Config(**{**own, **{k: getattr(cfg, k) for k in RESUME_OVERRIDES}})
    merged.validate()
    return merged


def save_torch(
    obj: Mapping[str, object],
    path: str | os.PathLike[str],
    before_replace: Callable[[], None] | None = None,
) -> None:
    """torch.save, atomically (a crash never leaves a torn checkpoint). ``before_replace``
    runs once the new file is completely written, just before it takes ``path``'s place."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    data = buffer.getbuffer()
    with atomic_writer(path, "wb") as f:
        f.write(data[: len(data) // 2])
        f.flush()
        _fault_injection_pause()
        f.write(data[len(data) // 2 :])
        if before_replace is not None:
            before_replace()


def _fault_injection_pause() -> None:
    try:
        delay = float(os.environ.get(SAVE_DELAY_ENV) or 0)
    except ValueError:
        delay = 0.0
    if delay > 0:
        time.sleep(delay)


def keep_previous(newest: Path, previous: Path) -> None:
    """Make ``previous`` a copy of ``newest`` (a hard link where the file system allows one,
    else a copy), atomically: the rotation step just before a new checkpoint replaces
    ``newest``, so the last two good checkpoints exist at every moment."""
    link = previous.with_name(f".{previous.name}.{os.getpid()}.link.tmp")
    link.unlink(missing_ok=True)
    try:
        os.link(newest, link)
    except OSError:
        with atomic_writer(previous, "wb") as f, open(newest, "rb") as src:
            shutil.copyfileobj(src, f)
        return
    os.replace(link, previous)


def set_aside(path: Path) -> Path:
    """Rename ``path`` to a free ``NAME.unreadable[.N]`` beside it (kept, never deleted)."""
    for n in range(1000):
        target = path.with_name(f"{path.name}.unreadable" + (f".{n}" if n else ""))
        if not target.exists():
            os.replace(path, target)
            return target
    raise RunRefused(f"too many unreadable checkpoints kept beside {str(path)!r}; remove some")


def check_training_checkpoint(data: Checkpoint, path: Path) -> None:
    """ValueError (naming ``path``) unless ``data`` holds everything a resume needs."""
    fields_needed = (
        ("update", int), ("global_step", int), ("hands", int), ("elapsed_s", (int, float)),
        ("config", dict), ("optimizer", dict), ("snapshots", list), ("rng", dict),
    )  # fmt: skip
    try:
        for key, kind in fields_needed:
            if isinstance(data.get(key), bool) or not isinstance(data.get(key), kind):
                raise ValueError(f"{key!r} is missing or of the wrong type")
        for i, snapshot in enumerate(data["snapshots"]):
            try:
                check_weights(snapshot, check_arch(data["arch"]))
            except ValueError as exc:
                raise ValueError(f"snapshot {i}: {exc}") from exc
        rng = data["rng"]
        if not isinstance(rng.get("torch"), torch.Tensor) or not isinstance(rng.get("numpy"), dict):
            raise ValueError("'rng' must hold the torch and numpy generator states")
    except ValueError as exc:
        raise ValueError(
            f"checkpoint {str(path)!r} is not a complete training checkpoint: {exc}"
        ) from exc


def load_resume_checkpoint(out_dir: Path) -> tuple[Checkpoint | None, Path | None, list[str]]:
    """The newest readable full checkpoint of a run: ``checkpoint.pt``, else
    ``checkpoint.prev.pt``, with the reasons a newer one was passed over; ``(None, None, [])``
    when the run has none yet. RunRefused when it has some but none is readable."""
    newest, previous = out_dir / CHECKPOINT_NAME, out_dir / PREVIOUS_NAME
    problems: list[str] = []
    for path in (newest, previous):
        if not path.exists():
            if path == newest and previous.exists():
                problems.append(f"checkpoint {str(newest)!r} is missing")
            continue
        try:
            data = load_checkpoint(path)
            check_training_checkpoint(data, path)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        return data, path, problems
    if problems:
        raise RunRefused(f"cannot resume: no readable checkpoint ({'; '.join(problems)})")
    return None, None, []


def existing_run_files(out_dir: Path) -> list[str]:
    """The files of a run already in ``out_dir`` (a new run must not start there)."""
    if not out_dir.is_dir():
        return []
    prefixes = ("checkpoint", CSV_NAME, "events.out.tfevents.")
    return sorted(p.name for p in out_dir.iterdir() if p.name.startswith(prefixes))


def clean_stale_temps(out_dir: Path) -> list[Path]:
    """Remove the temporary files interrupted writes left in a run folder: ``.NAME.*.tmp``
    (``atomic_writer``) and ``NAME.*.tmp`` (older versions). Only called at the start of a
    run, when nothing else writes there."""
    stale = set(out_dir.glob(".*.tmp"))
    for name in (CHECKPOINT_NAME, PREVIOUS_NAME, CSV_NAME):
        stale |= set(out_dir.glob(f"{name}.*.tmp"))
    removed = sorted(p for p in stale if p.is_file())
    for p in removed:
        p.unlink(missing_ok=True)
    return removed


def check_writable_folder(path: Path, what: str) -> None:
    """RunRefused unless ``path`` is (or can be created as) a folder we may write in."""
    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise RunRefused(f"{what} {str(path)!r} cannot be created: {str(existing)!r} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RunRefused(f"{what} {str(path)!r} is not writable ({str(existing)!r} is not)")


def check_export_path(export_path: str | None, run_id: str, own_files: list[Path]) -> None:
    """RunRefused unless ``export_path`` can be written without destroying anything: a new
    file in a writable folder, or an agent checkpoint an earlier session of this run wrote."""
    if export_path is None:
        return
    path = Path(export_path)
    if path.resolve() in {f.resolve() for f in own_files}:
        raise RunRefused(f"--export-path {export_path!r} is one of the run's own files")
    if path.is_dir():
        raise RunRefused(f"--export-path {export_path!r} is a folder; give a file name")
    check_writable_folder(path.parent, "--export-path folder")
    if not path.exists():
        return
    hint = "pass another --export-path or move that file away (nothing was changed)"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnverifiedCheckpointWarning)
            data = load_checkpoint(path)
    except ValueError as exc:
        raise RunRefused(
            f"--export-path {export_path!r} exists and is not a {CHECKPOINT_FORMAT} checkpoint "
            f"({exc}); {hint}"
        ) from exc
    if data.get("run_id") != run_id:
        raise RunRefused(
            f"--export-path {export_path!r} exists and holds another run's checkpoint; {hint}"
        )


SHIPPED = "shipped"
"""``init_from`` value naming the shipped PPO weights (``make_agent("ppo")``'s checkpoint)."""
ARCH_FIELDS = (
    "hidden", "layers", "central_value", "canonical_suits", "mask_input", "belief",
    "card_features", "card_head",
)  # fmt: skip
"""Config fields that define the network (an ``init_from`` checkpoint's ``arch`` sets them)."""


def arch_settings(cfg: Config) -> dict[str, Any]:
    """The :data:`ARCH_FIELDS` of ``cfg`` by name: the keywords of ActorCritic and make_arch."""
    return {k: getattr(cfg, k) for k in ARCH_FIELDS}


def init_checkpoint(init_from: str) -> Checkpoint:
    """The agent checkpoint ``init_from`` names ("shipped" or a path), loaded and verified
    (``weights_only=True``; :func:`~agents.ppo_net.load_checkpoint`); RunRefused if unusable."""
    path = DEFAULT_PPO_CHECKPOINT if init_from == SHIPPED else Path(init_from)
    try:
        return load_checkpoint(path)
    except ValueError as exc:
        raise RunRefused(
            f'init_from {init_from!r}: {exc} (give an agent checkpoint or "shipped")'
        ) from exc


def init_arch(init_from: str) -> dict[str, Any]:
    """The :data:`ARCH_FIELDS` settings of the network in ``init_from``'s checkpoint."""
    arch = dict(check_arch(init_checkpoint(init_from)["arch"]))
    return {k: arch[k] for k in ARCH_FIELDS}


def arch_flags(settings: Mapping[str, Any]) -> str:
    """``--hidden 256 --no-mask-input``...: the flags that ask for these network settings."""
    flags = []
    for k in ARCH_FIELDS:
        name, v = k.replace("_", "-"), settings[k]
        if isinstance(v, bool):
            flags.append(f"--{name}" if v else f"--no-{name}")
        else:
            flags.append(f"--{name} {v}")
    return " ".join(flags)


def load_init_weights(cfg: Config) -> dict[str, torch.Tensor] | None:
    """The weights of ``cfg.init_from`` (None without one); RunRefused when the file is not a
    usable agent checkpoint or holds another network than the one ``cfg`` asks for."""
    if cfg.init_from is None:
        return None
    data = init_checkpoint(cfg.init_from)
    theirs = {k: dict(check_arch(data["arch"]))[k] for k in ARCH_FIELDS}
    ours = arch_settings(cfg)
    if theirs != ours:
        differ = ", ".join(
            f"{k}={theirs[k]!r} (asked: {ours[k]!r})" for k in ARCH_FIELDS if theirs[k] != ours[k]
        )
        raise RunRefused(
            f"init_from {cfg.init_from!r} holds another network: {differ}; leave these flags "
            f"out or pass {arch_flags(theirs)} (nothing was changed)"
        )
    return dict(data["model"])


def budget_progress(cfg: Config, update: int, elapsed_s: float) -> float:
    """Share of the budget spent at ``update``/``elapsed_s``: the larger of the update and
    wall-clock shares (a time-limited run's schedule follows the clock)."""
    shares = [0.0]
    if cfg.total_updates:
        shares.append(update / cfg.total_updates)
    if cfg.total_minutes:
        shares.append(elapsed_s / (60.0 * cfg.total_minutes))
    return min(1.0, max(shares))


def budget_spent(cfg: Config, update: int, elapsed_s: float) -> bool:
    """The update or wall-clock budget of ``cfg`` is used up at ``update``/``elapsed_s``."""
    if cfg.total_updates and update >= cfg.total_updates:
        return True
    return bool(cfg.total_minutes) and elapsed_s >= cfg.total_minutes * 60


def budget_spent_message(cfg: Config, out_dir: Path, update: int, elapsed_s: float) -> str:
    spent = []
    if cfg.total_updates and update >= cfg.total_updates:
        spent.append(f"update {update} of --total-updates {cfg.total_updates}")
    if cfg.total_minutes and elapsed_s >= cfg.total_minutes * 60:
        spent.append(f"{elapsed_s / 60:.2f} of --total-minutes {cfg.total_minutes:g}")
    return (
        f"run {str(out_dir)!r} has already spent its budget ({' and '.join(spent)}); to "
        f"train it further, --resume with a larger --total-updates or --total-minutes "
        f"(nothing was changed)"
    )


def resume_command(cfg: Config) -> str:
    """The command line that continues this run with the same budget, threads and export."""
    args = [
        "python", "-m", "train.ppo", "--run-dir", cfg.run_dir, "--run-name", cfg.name,
        "--total-updates", str(cfg.total_updates), "--total-minutes", f"{cfg.total_minutes:g}",
    ]  # fmt: skip
    if cfg.torch_threads:
        args += ["--torch-threads", str(cfg.torch_threads)]
    if cfg.export_path:
        args += ["--export-path", cfg.export_path]
    return shlex.join(args + ["--resume"])


CSV_FIELDS = (
    "update", "global_step", "hands", "minutes", "steps_per_second", "batch_transitions",
    "train_vs_snapshot", "train_vs_rule", "train_vs_random",
    "loss_policy", "loss_value", "entropy", "approx_kl", "clipfrac", "explained_variance",
    "learning_rate", "eval_random_mean", "eval_random_ci95", "eval_rule_mean", "eval_rule_ci95",
    "eval_seconds", "eval_opponent_mean", "eval_opponent_ci95", "loss_belief", "loss_teacher",
)  # fmt: skip
"""metrics.csv columns (new ones go last: a resumed run's older file is rewritten with them)."""
TB_GROUPS = {
    **{k: "losses" for k in ("loss_policy", "loss_value", "entropy", "approx_kl", "clipfrac")},
    "loss_belief": "losses",
    "loss_teacher": "losses",
    **{k: "charts" for k in ("explained_variance", "learning_rate")},
    **{k: "charts" for k in ("steps_per_second", "batch_transitions", "hands", "minutes")},
    **{k: "eval" for k in CSV_FIELDS if k.startswith("eval_")},
    **{k: "train" for k in CSV_FIELDS if k.startswith("train_vs_")},
}
"""TensorBoard tag group of each logged metric."""


def trim_csv(path: Path, update: int) -> None:
    """Drop the rows of ``path`` newer than ``update`` (a resumed run redoes them) and any
    row torn by a kill mid-append; a run starting at update 0 starts the file afresh. A file
    written before columns were added gets today's header (its rows blank there)."""
    if not path.exists():
        return
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        header = reader.fieldnames

    def kept(row: dict[str, str | None]) -> bool:
        if None in row.values() or None in row:  # too few or too many fields: a torn row
            return False
        u = row.get("update") or ""
        return u.isdigit() and int(u) <= update

    keep = [r for r in rows if kept(r)] if update else []
    if len(keep) != len(rows) or update == 0 or header != list(CSV_FIELDS):
        with atomic_writer(path, "w") as out:
            w = csv.DictWriter(out, fieldnames=CSV_FIELDS, extrasaction="ignore")
            w.writeheader()
            w.writerows(keep)


def append_csv(path: Path, metrics: Mapping[str, float]) -> None:
    """One row of ``metrics`` (CSV_FIELDS; blank where absent); the header on a new file."""
    new = not path.exists()
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        if new:
            w.writeheader()
        w.writerow({k: metrics.get(k, "") for k in CSV_FIELDS})


# ----------------------------------------------------------------------------- the loop
def setup_torch(cfg: Config) -> torch.device:
    """Threads, determinism and seed of torch; returns the device to train on."""
    torch.set_num_threads(cfg.torch_threads or min(2, os.cpu_count() or 1))
    if cfg.deterministic:
        torch.use_deterministic_algorithms(True)
    if cfg.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(cfg.device)
    torch.manual_seed(cfg.seed)
    return device


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[list[int]]:
    """While training, the first Ctrl-C (SIGINT) is only noted in the yielded list: the loop
    finishes the update in progress (a half-done update cannot be saved consistently), saves
    a checkpoint and stops. A second Ctrl-C interrupts at once. Signals can only be caught in
    the main thread; elsewhere Ctrl-C behaves as usual."""
    hits: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield hits
        return

    def on_sigint(signum: int, frame: object) -> None:
        hits.append(signum)
        if len(hits) > 1:
            raise KeyboardInterrupt
        os.write(2, b"\ninterrupted: finishing this update, then saving a checkpoint "
                 b"(Ctrl-C again to stop at once, without one)\n")  # fmt: skip

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield hits
    finally:
        signal.signal(signal.SIGINT, previous)


class Trainer:
    """One run: model, optimiser, opponent pool, engine and logs; :meth:`train` runs it.

    ``Trainer(cfg)`` checks everything before it changes anything, and raises
    :class:`RunRefused` (a ValueError) when the run cannot start as asked: a new run whose
    folder already holds a run, a ``resume`` whose checkpoints are all unreadable or whose
    budget is spent, an ``export_path`` that is not this run's. With ``cfg.resume`` it
    continues from ``runs/NAME/checkpoint.pt`` (or ``checkpoint.prev.pt`` when the newest is
    unreadable, saying so on stderr). Progress counters (``update``, ``global_step``,
    ``hands``, ``elapsed`` seconds, ``last_metrics``) are attributes, for callbacks such as
    a live plot.
    """

    def __init__(self, cfg: Config, env_factory: EnvFactory = make_env) -> None:
        cfg.validate()
        out_dir = Path(cfg.run_dir) / cfg.name
        ckpt_path, prev_path = out_dir / CHECKPOINT_NAME, out_dir / PREVIOUS_NAME
        check_writable_folder(out_dir, "run folder")
        resume, resumed_from = None, None
        problems: list[str] = []
        if cfg.resume:
            resume, resumed_from, problems = load_resume_checkpoint(out_dir)
        elif found := existing_run_files(out_dir):
            raise RunRefused(
                f"run folder {str(out_dir)!r} already holds a run ({', '.join(found[:3])}); "
                f"pass --resume to continue it, or another --run-name for a new run "
                f"(nothing was changed)"
            )
        if resume is not None:  # the run's own settings win, except the budget knobs
            cfg = self._resumed_settings(cfg, resume, resumed_from, out_dir)
        run_id = str(resume.get("run_id") or "") if resume is not None else ""
        self.run_id = run_id or uuid.uuid4().hex
        """Identifies the run in its checkpoints and exports (an export path may only be
        overwritten by the run that wrote it)."""
        check_export_path(cfg.export_path, self.run_id, [ckpt_path, prev_path, out_dir / CSV_NAME])
        init_weights = load_init_weights(cfg) if resume is None else None
        # Every check passed: from here on the run folder is ours to write.
        if problems:
            print(
                f"warning: {'; '.join(problems)}: resuming from the previous checkpoint "
                f"{str(resumed_from)!r} (update {resume['update'] if resume else 0})",
                file=sys.stderr,
            )
        elif cfg.resume and resume is None:
            print(
                f"note: {str(out_dir)!r} has no checkpoint yet: starting at update 0",
                file=sys.stderr,
            )
        self.cfg = cfg
        self.env_factory = env_factory
        self.device = setup_torch(cfg)
        self.rng = np.random.default_rng(cfg.seed)
        self.model = model_for(cfg).to(self.device)
        if init_weights is not None:
            self.model.load_state_dict(init_weights)
        self.pool = OpponentPool(
            snapshot_model=model_for(cfg).to(self.device),
            fixed=(
                make_opponent_agent(cfg.opponent_agent, cfg.seed)
                if cfg.uses_fixed_agent()
                else None
            ),
            teacher=None if cfg.teacher is None else make_opponent_agent(cfg.teacher, cfg.seed),
        )
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.learning_rate, eps=1e-5)
        self.update = self.global_step = self.hands = 0
        self.elapsed = 0.0
        self.last_metrics: dict[str, float] = {}
        self.rollouts: RolloutState | None = None
        self.out_dir = out_dir
        self.ckpt_path = ckpt_path
        self.prev_path = prev_path
        self.csv_path = out_dir / CSV_NAME
        self.resumed_from = resumed_from
        """The checkpoint this run continued from (None for a run from scratch)."""
        self._newest_unreadable = resumed_from == prev_path and ckpt_path.exists()
        if resume is not None and resumed_from is not None:
            self._restore(resume, resumed_from)
        self._saved_update = self.update
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for stale in clean_stale_temps(self.out_dir):
            print(f"note: removed {str(stale)!r}, left by an interrupted write", file=sys.stderr)
        trim_csv(self.csv_path, self.update)
        self.writer: SummaryWriter | None = None
        if cfg.tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(self.out_dir), purge_step=self.update + 1)
        self._clock = time.perf_counter()

    @staticmethod
    def _resumed_settings(
        cfg: Config, resume: Checkpoint, path: Path | None, out_dir: Path
    ) -> Config:
        """The resumed run's config; RunRefused if it is invalid or its budget is spent."""
        try:
            merged = resumed_config(cfg, resume["config"])
        except (TypeError, ValueError) as exc:
            raise RunRefused(f"checkpoint {str(path)!r} holds invalid settings: {exc}") from exc
        if make_arch(**arch_settings(merged)) != check_arch(resume["arch"]):
            raise RunRefused(f"checkpoint {str(path)!r}: its settings do not match its network")
        if budget_spent(merged, resume["update"], resume["elapsed_s"]):
            raise RunRefused(
                budget_spent_message(merged, out_dir, resume["update"], resume["elapsed_s"])
            )
        return merged

    def done(self) -> bool:
        """The update or wall-clock budget is spent."""
        return budget_spent(self.cfg, self.update, self.elapsed)

    def train(self, on_update: Callable[[Trainer], None] | None = None) -> dict[str, float]:
        """Run until the budget is spent; returns the last metrics row. ``on_update(self)``
        is called after every update (its time counts towards the budget).

        Ctrl-C finishes the update in progress, saves a checkpoint and raises
        :class:`TrainingInterrupted` (a KeyboardInterrupt) saying how to resume; a second
        Ctrl-C stops at once (the last regular checkpoint stays)."""
        from tqdm import tqdm

        cfg = self.cfg
        bar = tqdm(
            total=cfg.total_updates or None,
            initial=self.update,
            disable=not cfg.progress,
            unit="upd",
        )
        self._clock = time.perf_counter()
        try:
            with deferred_interrupt() as interrupts:
                while not self.done() and not interrupts:
                    self.last_metrics = self.train_one_update()
                    self._log(self.last_metrics)
                    if self.update % cfg.checkpoint_every == 0 or self.done():
                        self.save()
                    self._save_milestones()
                    bar.update(1)
                    bar.set_postfix(self._postfix())
                    if on_update is not None:
                        on_update(self)
                if interrupts and self._saved_update != self.update:
                    self.save()
        finally:
            bar.close()
            if self.writer is not None:
                self.writer.flush()
        if interrupts:
            raise TrainingInterrupted(self._interrupted_message())
        if self.writer is not None:
            self.writer.close()
        return self.last_metrics

    def _interrupted_message(self) -> str:
        if not self.ckpt_path.exists():
            return f"interrupted at update {self.update}: no checkpoint to save yet"
        return (
            f"interrupted: saved checkpoint {str(self.ckpt_path)!r} (update {self.update}); "
            f"continue with: {resume_command(self.cfg)}"
        )

    def train_one_update(self) -> dict[str, float]:
        """Rollout, PPO update and (every ``eval_every`` updates) evaluation; the metrics."""
        cfg = self.cfg
        progress = budget_progress(cfg, self.update, self.elapsed)
        if self.rollouts is None or self.update % cfg.checkpoint_every == 0:
            self.rollouts = start_rollouts(
                cfg, self.update, self.env_factory, self.rng, self.pool, progress
            )
        self.rollouts.probs = cfg.opponent_probs(progress)
        self.rollouts.ask_teacher = cfg.asks_teacher(progress)
        self.rollouts.teach_bids_only = cfg.teacher_weight(progress) <= 0
        if self.update % cfg.snapshot_every == 0:
            self.pool.add_snapshot(self.model, cfg.snapshot_pool)
        batch, stats = collect_rollout(
            self.rollouts, self.model, self.pool, cfg, self.rng, self.device
        )
        metrics: dict[str, float] = {}
        if batch is not None:
            metrics = ppo_update(self.model, self.optimizer, batch, cfg, progress, self.device)
        steps = cfg.num_envs * cfg.num_steps
        self.update += 1
        self.global_step += steps
        self.hands += int(stats.hands.sum())
        now = time.perf_counter()
        dt, self._clock = now - self._clock, now
        self.elapsed += dt
        metrics |= stats.metrics()
        metrics |= {"update": self.update, "global_step": self.global_step, "hands": self.hands}
        metrics |= {"minutes": self.elapsed / 60.0, "steps_per_second": steps / max(dt, 1e-9)}
        if cfg.eval_every and self.update % cfg.eval_every == 0:
            metrics |= self._evaluate()
        return metrics

    def _evaluate(self) -> dict[str, float]:
        t0 = time.perf_counter()
        out = evaluate_model(self.model, self.cfg, self.device, True, self.env_factory)
        out["eval_seconds"] = time.perf_counter() - t0
        self._clock = time.perf_counter()  # evaluation time is counted here, not in dt
        self.elapsed += out["eval_seconds"]
        return out

    def _log(self, metrics: dict[str, float]) -> None:
        append_csv(self.csv_path, metrics)
        if self.writer is not None:
            for k, v in metrics.items():
                if k in TB_GROUPS and not math.isnan(v):
                    self.writer.add_scalar(f"{TB_GROUPS[k]}/{k}", v, self.update)

    def _postfix(self) -> dict[str, str]:
        evals = (f"eval_{name}_mean" for name in ("random", "rule", "opponent"))
        shown = ("entropy", "train_vs_rule", *evals)
        m = self.last_metrics
        return {k: f"{m[k]:.3g}" for k in shown if k in m} | {"min": f"{self.elapsed / 60:.1f}"}

    def save(self) -> None:
        """Full checkpoint (everything a bit-exact resume needs), written atomically after
        the current one became ``checkpoint.prev.pt``; and, with ``export_path``, the agent
        checkpoint (the model alone). Both carry the run id and a fingerprint."""
        info = {
            "update": self.update,
            "global_step": self.global_step,
            "hands": self.hands,
            "elapsed_s": self.elapsed,
            "metrics": {k: float(v) for k, v in self.last_metrics.items()},
            "run_id": self.run_id,
        }
        training = {
            "optimizer": self.optimizer.state_dict(),
            "snapshots": self.pool.snapshots,
            "rng": {"torch": torch.get_rng_state(), "numpy": self.rng.bit_generator.state},
        }
        full = model_payload(self.model, asdict(self.cfg), info | training)
        rotate: Callable[[], None] | None = None
        if self.ckpt_path.exists() and self._newest_unreadable:
            kept = set_aside(self.ckpt_path)  # never rotate it over the good previous one
            print(f"note: kept the unreadable checkpoint as {str(kept)!r}", file=sys.stderr)
        elif self.ckpt_path.exists():
            ckpt, prev = self.ckpt_path, self.prev_path
            rotate = lambda: keep_previous(ckpt, prev)  # noqa: E731
        self._newest_unreadable = False
        save_torch(full, self.ckpt_path, before_replace=rotate)
        self._saved_update = self.update
        if self.cfg.export_path:
            save_torch(model_payload(self.model, asdict(self.cfg), info), self.cfg.export_path)

    def milestone_path(self, minutes: float) -> Path:
        """Where the model as of ``minutes`` of training is kept (``model_at_10min.pt``)."""
        return self.out_dir / f"model_at_{minutes:g}min.pt"

    def _save_milestones(self) -> None:
        """Write the model once for each milestone the run has just passed (a file that is
        already there, from before a resume, is kept as it is)."""
        for minutes in self.cfg.milestone_minutes:
            path = self.milestone_path(minutes)
            if self.elapsed >= 60.0 * minutes and not path.exists():
                info = {"update": self.update, "elapsed_s": self.elapsed, "run_id": self.run_id}
                save_torch(model_payload(self.model, asdict(self.cfg), info), path)

    def _restore(self, data: Checkpoint, path: Path) -> None:
        """Model, optimiser, snapshot pool, counters and RNG states of a full checkpoint."""
        try:
            self.model.load_state_dict(model_from_checkpoint(data, path).state_dict())
            self.optimizer.load_state_dict(data["optimizer"])
            self.pool.snapshots = list(data["snapshots"])
            torch.set_rng_state(data["rng"]["torch"])
            self.rng.bit_generator.state = data["rng"]["numpy"]
        except (KeyError, TypeError, RuntimeError, ValueError) as exc:
            raise RunRefused(f"checkpoint {str(path)!r} cannot be restored: {exc}") from exc
        self.update = int(data["update"])
        self.global_step = int(data["global_step"])
        self.hands = int(data["hands"])
        self.elapsed = float(data["elapsed_s"])
        self.last_metrics = dict(data.get("metrics", {}))


def parse_config(argv: list[str] | None = None) -> Config:
    """The Config of a command line (tyro). With ``--init-from`` (and no ``--resume``) the
    architecture flags default to the checkpoint's network, so that a flag given explicitly
    and contradicting it is the one error (:func:`load_init_weights`). RunRefused when the
    ``--init-from`` file is unusable."""
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
        trainer = Trainer(cfg)
    except ValueError as exc:
        print("error: " + " ".join(str(exc).split()), file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        print("interrupted while starting the run; nothing was trained", file=sys.stderr)
        raise SystemExit(130) from None
    try:
        metrics = trainer.train()
    except TrainingInterrupted as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(130) from None
    except KeyboardInterrupt:
        last = (
            f"the last checkpoint is {str(trainer.ckpt_path)!r}; "
            if trainer.ckpt_path.exists()
            else ""
        )
        print(f"interrupted at once: no final checkpoint; {last}continue with: "
              f"{resume_command(trainer.cfg)}", file=sys.stderr)  # fmt: skip
        raise SystemExit(130) from None
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()})


if __name__ == "__main__":
    main()
