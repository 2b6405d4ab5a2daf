"""Self-play PPO for Butifarra, in one file (in the spirit of CleanRL's ``ppo.py``).

It reads top to bottom: config -> env -> network (:mod:`agents.ppo_net`) -> rollout ->
per-seat GAE -> PPO update -> evaluation -> the training loop (:func:`train`) -> ``main``.
The defaults are the recipe of the shipped checkpoint: ``python -m train.ppo --seed 1``.

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

What keeps a run safe lives elsewhere: :mod:`train.run_folder` (never overwrite, atomic
checkpoints with the previous one kept, the metrics CSV, Ctrl-C) and :mod:`train.ppo_settings`
(opponent schedule, budget, ``init_from``, resumable checkpoints).

Usage::

    python -m train.ppo --help
    python -m train.ppo --seed 1 --total-minutes 60 --export-path my_agent.pt
    python -m train.ppo --run-name NAME --resume      # continue an interrupted run
    python -m train.ppo --init-from shipped --opponent-agent ppo --opp-rule 1 \
        --opp-self 0 --opp-snapshot 0 --opp-random 0    # fine-tune against the shipped agent

A second run with the same name is refused (``--resume`` continues it), as is an
``--export-path`` holding another run's file. Bad flags are one ``error:`` line and exit
status 2, before anything is touched. Ctrl-C saves a checkpoint and exits with status 130.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from enum import IntEnum
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from agents import Agent
from agents.evaluation.arena import duel
from agents.ppo_agent import PPOAgent
from agents.ppo_net import (
    HIDDEN_HANDS_SIZE,
    ActorCritic,
    hidden_hands,
    masked_entropy,
    masked_log_probs,
    model_from_checkpoint,
    model_payload,
    sample_masked,
)
from butifarra_env.core.actions import N_ACTIONS, random_legal_actions
from butifarra_env.core.cards import N_CARDS
from butifarra_env.core.observation import OBS_SIZE
from butifarra_env.envs.batched import BatchedEnv
from train import run_folder
from train.ppo_settings import (
    ARCH_FIELDS,
    budget_progress,
    budget_spent,
    check_config,
    init_arch,
    make_opponent_agent,
    parse_opp_schedule,
    prepare_run,
    setup_torch,
)
from train.run_folder import RunRefused, TrainingInterrupted


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


@dataclass
class Config:
    """Every knob of a training run (each one is a CLI flag: ``python -m train.ppo --help``).
    The defaults are the shipped checkpoint's recipe."""

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
    torch_threads: int = 1
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
    card_features: bool = True
    """Give the trunk what the rules say about each card: masters, cards that would win
    the trick now, whether the partner is winning it (147 extra inputs)."""
    card_head: bool = True
    """Add to each card's logit the output of one small network shared by all 48 cards,
    reading that card's features and the trunk (card play learnt once for every card)."""
    init_from: str | None = None
    """Start the network from an agent checkpoint instead of a fresh initialisation: a path,
    or "shipped" (the shipped PPO weights). On the command line the architecture flags
    default to the checkpoint's; a flag that contradicts it is an error."""

    learning_rate: float = 8e-4
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
    opp_rule: float = 0.9
    """Share of hands against the fixed agent (``opponent_agent``; rule-based by default)."""
    opp_random: float = 0.05
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
    teacher_bid_floor: float = 0.3
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

    eval_every: int = 60
    """Evaluate vs random, vs rule-based (and vs ``opponent_agent``) every this many updates
    (0 = never), with agents/evaluation/arena.py's duplicate ``duel``."""
    eval_deals: int = 1000
    """Duplicate deals per interval evaluation (each played with both seatings)."""
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
        """Raise ValueError naming the first bad field (before any work is done); files and
        folders are checked when :func:`train` starts (:func:`~train.ppo_settings.prepare_run`)."""
        check_config(self)

    def opponent_probs(self, progress: float = 0.0) -> np.ndarray:
        """Per-hand probabilities of each :class:`Opponent` (in that order), normalised, when
        ``progress`` (0 to 1) of the budget is spent (the stage of ``opp_schedule`` then)."""
        if self.opp_schedule is not None:
            stages = parse_opp_schedule(self.opp_schedule, OPPONENTS)
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
            stages = parse_opp_schedule(self.opp_schedule, OPPONENTS)
            return any(p[Opponent.RULE] > 0 for _, p in stages)
        return self.opp_rule > 0

    @property
    def name(self) -> str:
        return self.run_name or f"{self.exp_name}_s{self.seed}"

    @property
    def out_dir(self) -> Path:
        """The run folder: ``run_dir/name``."""
        return Path(self.run_dir) / self.name

    @property
    def checkpoint_path(self) -> Path:
        """The newest full checkpoint (``checkpoint.prev.pt`` beside it is the one before)."""
        return self.out_dir / "checkpoint.pt"

    @property
    def csv_path(self) -> Path:
        """The metrics log, one row per update (:data:`CSV_FIELDS`)."""
        return self.out_dir / "metrics.csv"

    @property
    def opponent_eval_name(self) -> str:
        """The NAME of the ``eval_NAME_mean`` column of the evaluation against
        ``opponent_agent``: ``rule``, ``random``, or ``opponent`` for any other agent."""
        spec = self.opponent_agent.strip().lower()
        return spec if spec in ("rule", "random") else "opponent"

    def resume_command(self) -> str:
        """The command line that continues this run with the same budget, threads and export."""
        args = [
            "--run-dir", self.run_dir, "--run-name", self.name, "--total-updates",
            str(self.total_updates), "--total-minutes", f"{self.total_minutes:g}",
        ]  # fmt: skip
        if self.torch_threads:
            args += ["--torch-threads", str(self.torch_threads)]
        if self.export_path:
            args += ["--export-path", self.export_path]
        return run_folder.resume_command("train.ppo", args)


# ----------------------------------------------------------------------------- env
EnvFactory = Callable[[int, int], BatchedEnv]
"""``factory(num_envs, seed)`` -> a batched engine (tests swap in their own)."""


def make_env(num_envs: int, seed: int) -> BatchedEnv:
    """The batched engine (one hand per episode, raw rewards; we scale them ourselves)."""
    return BatchedEnv(num_envs, seed=seed)


# ----------------------------------------------------------------------------- network
def model_for(cfg: Config) -> ActorCritic:
    """The network a config asks for (:mod:`agents.ppo_net`: suit-canonical inputs, legal-mask
    input, centralised critic, belief and card heads; shared with the PPO agent)."""
    return ActorCritic(**{k: getattr(cfg, k) for k in ARCH_FIELDS})


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
def evaluate(model: ActorCritic, cfg: Config, device: torch.device) -> dict[str, float]:
    """Points/hand (and 95% CI half-width) of the greedy policy vs random, vs rule-based and,
    for an ``opponent_agent`` other than those two, vs it (``eval_opponent_*``: the learning
    curve against the agent a run exploits): the arena's duplicate :func:`duel` on the fixed
    deal set ``eval_seed``."""
    model.eval()
    me = PPOAgent.from_model(model, device=str(device), seed=0)
    against: dict[str, Agent | str] = {"random": "random", "rule": "rule"}
    if cfg.opponent_eval_name == "opponent":
        against["opponent"] = make_opponent_agent(cfg.opponent_agent, cfg.eval_seed)
    out: dict[str, float] = {}
    for name, agent in against.items():
        result = duel(me, agent, n_deals=cfg.eval_deals, seed=cfg.eval_seed)
        out[f"eval_{name}_mean"], out[f"eval_{name}_ci95"] = result.mean, result.ci_half_width
    return out


# ----------------------------------------------------------------------------- run folder
CSV_FIELDS = (
    "update", "global_step", "hands", "minutes", "steps_per_second", "batch_transitions",
    "train_vs_snapshot", "train_vs_rule", "train_vs_random",
    "loss_policy", "loss_value", "entropy", "approx_kl", "clipfrac", "explained_variance",
    "learning_rate", "eval_random_mean", "eval_random_ci95", "eval_rule_mean", "eval_rule_ci95",
    "eval_seconds", "eval_opponent_mean", "eval_opponent_ci95", "loss_belief", "loss_teacher",
)  # fmt: skip
"""metrics.csv columns (new ones go last: a resumed run's older file is rewritten with them)."""
TB_GROUPS = {
    **{k: "losses" for k in CSV_FIELDS if k.startswith("loss_")},
    **{k: "losses" for k in ("entropy", "approx_kl", "clipfrac")},
    **{k: "charts" for k in ("explained_variance", "learning_rate", "steps_per_second")},
    **{k: "charts" for k in ("batch_transitions", "hands", "minutes")},
    **{k: "eval" for k in CSV_FIELDS if k.startswith("eval_")},
    **{k: "train" for k in CSV_FIELDS if k.startswith("train_vs_")},
}
"""TensorBoard tag group of each logged metric."""


@dataclass
class Counters:
    """How far a run is: saved in every checkpoint, restored on resume."""

    update: int = 0
    global_step: int = 0
    hands: int = 0
    elapsed_s: float = 0.0
    """Wall-clock seconds of training and evaluation, summed over resumes."""


# ----------------------------------------------------------------------------- the loop
def train(
    cfg: Config,
    on_update: Callable[[dict[str, float]], None] | None = None,
    *,
    opponent: Agent | None = None,
    teacher: Agent | None = None,
    env_factory: EnvFactory = make_env,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Train until the budget is spent; returns the last metrics row (a :data:`CSV_FIELDS`
    subset, also logged to metrics.csv and TensorBoard).

    Every check comes first (:func:`prepare_run`: RunRefused, a ValueError, before anything
    is written). ``cfg.resume`` continues ``runs/NAME/checkpoint.pt`` (or the previous one
    when the newest is unreadable) exactly where it stopped. ``on_update(metrics)`` is called
    after every update (its time counts towards the budget; an exception from it stops the
    run, the last regular checkpoint kept). ``opponent`` and ``teacher`` replace the agents
    ``cfg.opponent_agent`` and ``cfg.teacher`` would build (the evaluation still builds its
    own); ``clock`` gives the seconds the budget counts.

    Ctrl-C finishes the update in progress, saves a checkpoint and raises
    :class:`TrainingInterrupted` (a KeyboardInterrupt) saying how to resume; a second
    Ctrl-C stops at once (the last regular checkpoint stays)."""
    from tqdm import tqdm

    run = prepare_run(cfg)
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
    pool = OpponentPool(model_for(cfg).to(device), opponent, teacher)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, eps=1e-5)
    at = Counters()
    metrics: dict[str, float] = {}
    if run.resume is not None:  # model, optimiser, snapshots, counters and RNG states
        path = str(run.resumed_from)
        try:
            model.load_state_dict(model_from_checkpoint(run.resume, path).state_dict())
            optimizer.load_state_dict(run.resume["optimizer"])
            pool.snapshots = list(run.resume["snapshots"])
            torch.set_rng_state(run.resume["rng"]["torch"])
            rng.bit_generator.state = run.resume["rng"]["numpy"]
        except (KeyError, TypeError, RuntimeError, ValueError) as exc:
            raise RunRefused(f"checkpoint {path!r} cannot be restored: {exc}") from exc
        at = Counters(*(run.resume[k] for k in ("update", "global_step", "hands", "elapsed_s")))
        metrics = dict(run.resume.get("metrics", {}))
    # Every check passed: from here on the run folder is ours to write.
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    names = ("checkpoint.pt", "checkpoint.prev.pt", "metrics.csv")
    for stale in run_folder.clean_stale_temps(cfg.out_dir, names):
        print(f"note: removed {str(stale)!r}, left by an interrupted write", file=sys.stderr)
    run_folder.repair_csv(cfg.csv_path, CSV_FIELDS, at.update)
    writer = run_folder.open_tensorboard(cfg.out_dir, at.update, cfg.tensorboard)

    def save() -> None:
        """Full checkpoint (everything a bit-exact resume needs; the one it replaces becomes
        checkpoint.prev.pt) and, with ``export_path``, the agent checkpoint (the model)."""
        info = asdict(at) | {"metrics": {k: float(v) for k, v in metrics.items()}}
        info |= {"run_id": run.run_id}
        rng_states = {"torch": torch.get_rng_state(), "numpy": rng.bit_generator.state}
        training = {"optimizer": optimizer.state_dict(), "snapshots": pool.snapshots}
        full = model_payload(model, asdict(cfg), info | training | {"rng": rng_states})
        kept = run_folder.save_rotating(
            full, cfg.checkpoint_path, run.previous_path, run.newest_unreadable
        )
        if kept is not None:
            print(f"note: kept the unreadable checkpoint as {str(kept)!r}", file=sys.stderr)
        run.newest_unreadable = False
        if cfg.export_path:
            run_folder.save_torch(model_payload(model, asdict(cfg), info), cfg.export_path)

    def save_milestones() -> None:
        """The model, once, as of each ``milestone_minutes`` the run has just passed."""
        for minutes in cfg.milestone_minutes:
            path = cfg.out_dir / f"model_at_{minutes:g}min.pt"
            if at.elapsed_s >= 60.0 * minutes and not path.exists():
                info = {"update": at.update, "elapsed_s": at.elapsed_s, "run_id": run.run_id}
                run_folder.save_torch(model_payload(model, asdict(cfg), info), path)

    bar = tqdm(total=cfg.total_updates or None, initial=at.update, disable=not cfg.progress)
    saved_update, rollouts = at.update, None
    last = clock()
    try:
        with run_folder.deferred_interrupt() as interrupts:
            while not budget_spent(cfg.total_updates, cfg.total_minutes, at.update, at.elapsed_s):
                if interrupts:
                    break
                progress = budget_progress(
                    cfg.total_updates, cfg.total_minutes, at.update, at.elapsed_s
                )
                if rollouts is None or at.update % cfg.checkpoint_every == 0:
                    rollouts = start_rollouts(cfg, at.update, env_factory, rng, pool, progress)
                rollouts.probs = cfg.opponent_probs(progress)
                rollouts.ask_teacher = cfg.asks_teacher(progress)
                rollouts.teach_bids_only = cfg.teacher_weight(progress) <= 0
                if at.update % cfg.snapshot_every == 0:
                    pool.add_snapshot(model, cfg.snapshot_pool)
                batch, stats = collect_rollout(rollouts, model, pool, cfg, rng, device)
                metrics = {}
                if batch is not None:
                    metrics = ppo_update(model, optimizer, batch, cfg, progress, device)
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
                if cfg.eval_every and at.update % cfg.eval_every == 0:
                    metrics |= evaluate(model, cfg, device)
                    now = clock()
                    metrics["eval_seconds"], last = now - last, now
                    at.elapsed_s += metrics["eval_seconds"]
                run_folder.append_csv(cfg.csv_path, CSV_FIELDS, metrics)
                run_folder.log_scalars(writer, metrics, TB_GROUPS, at.update)
                spent = budget_spent(cfg.total_updates, cfg.total_minutes, at.update, at.elapsed_s)
                if at.update % cfg.checkpoint_every == 0 or spent:
                    save()
                    saved_update = at.update
                save_milestones()
                bar.update(1)
                shown = ("entropy", "train_vs_rule", "eval_random_mean", "eval_rule_mean")
                bar.set_postfix({k: f"{metrics[k]:.3g}" for k in shown if k in metrics})
                if on_update is not None:
                    on_update(dict(metrics))
            if interrupts and saved_update != at.update:
                save()
    finally:
        bar.close()
        if writer is not None:
            writer.flush()
    if interrupts:
        if not cfg.checkpoint_path.exists():
            raise TrainingInterrupted(f"interrupted at update {at.update}: no checkpoint yet")
        raise TrainingInterrupted(
            f"interrupted: saved checkpoint {str(cfg.checkpoint_path)!r} (update {at.update}); "
            f"continue with: {cfg.resume_command()}"
        )
    if writer is not None:
        writer.close()
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
