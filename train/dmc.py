"""Deep Monte Carlo (DMC, as in DouZero) for Butifarra, in one file.

It reads top to bottom: :class:`DMCConfig` -> env -> network -> rollout -> loss and update ->
the run folder -> the training loop (:func:`train`) -> ``main``. Run it with
``python -m train.dmc --seed 1 --total-minutes 15`` (``docs/dmc.md`` has more).

DMC learns an action-value function Q(s, a) by plain regression on Monte Carlo returns: the
network (:class:`agents.ppo_net.ActorCritic`, the PPO agent's, without the critic's hidden
hands) reads the mover's observation and its 56 "policy logits" are read as Q-values, the
hand's final (scaled) team score difference expected after taking ``a``. The learner's seats
play epsilon-greedy on Q; every learner decision of a hand is regressed, with a squared
error, towards that hand's final score difference for the learner's team (gamma 1: a hand is
short and scores only at its end). There is no critic, no advantage and no ratio: the policy
is the argmax of Q, so only the taken action's Q gets a target.

The learner's team faces the rule-based agent on most hands and the uniformly random one on
the rest (drawn per hand and engine slot, with the learner's team). Early in the run a
large-margin loss (DQfD, Hester et al. 2018) makes the rule-based player's action the
argmax of Q: kickstarting, which PPO's recipe finds essential in the first minutes.

Because the model is an ``ActorCritic`` saved as an agent checkpoint
(:func:`agents.ppo_net.model_payload`), the PPO agent plays it with no new code: greedy =
argmax of the legal logits = argmax of Q. Each checkpoint also writes ``export.pt``::

    butifarra arena ppo:runs/dmc_s1/export.pt rule -n 5000 --seed 2026

Bad flags and runs that cannot start as asked (a run name that holds a run) are one
``error:`` line and exit status 2, before anything is touched. Ctrl-C finishes the update,
saves a checkpoint and exits with status 130; ``--resume`` continues the run.
"""

from __future__ import annotations

import math
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

try:
    import numpy as np
    import torch
    import torch.nn as nn
except ImportError as exc:  # ``python -m train.dmc`` without torch: one line, not a traceback
    if __name__ != "__main__":
        raise
    print(f"error: python -m train.dmc needs the 'train' extra ({exc}): "
          "pip install 'butifarra-rl[train]'", file=sys.stderr)  # fmt: skip
    raise SystemExit(2) from None

from agents import Agent
from agents.ppo_net import (
    MAX_HIDDEN,
    MAX_LAYERS,
    ActorCritic,
    Checkpoint,
    load_checkpoint,
    masked_logits,
    model_from_checkpoint,
    model_payload,
)
from butifarra_env.core.actions import N_ACTIONS, random_legal_actions
from butifarra_env.core.observation import OBS_SIZE
from butifarra_env.core.validate import check_int, check_number
from butifarra_env.envs.batched import BatchedEnv
from train import run_folder
from train.ppo_settings import (
    MAX_HAND_STEPS,
    MAX_NUM_ENVS,
    annealed_lr,
    budget_progress,
    budget_spent,
    budget_spent_message,
    check_hands_can_finish,
    make_opponent_agent,
    teacher_weight,
)
from train.run_folder import RunRefused, TrainingInterrupted, deferred_interrupt

__all__ = ["DMCConfig", "main", "train"]

ALGORITHM = "dmc"
"""The ``config["algorithm"]`` of a DMC checkpoint (PPO's have none): what a resume checks."""


# ----------------------------------------------------------------------------- config
@dataclass
class DMCConfig:
    """Every knob of a DMC run (each one is a CLI flag: ``python -m train.dmc --help``)."""

    exp_name: str = "dmc"
    """Prefix of the run name (the run name also carries the seed)."""
    run_name: str | None = None
    """Folder name under ``run_dir``; default ``{exp_name}_s{seed}``. ``--resume`` uses it."""
    run_dir: str = "runs"
    """Where runs write checkpoint.pt, export.pt and metrics.csv."""
    seed: int = 1
    """Seeds torch, numpy and the deals: the same seed and update budget give the same
    weights on CPU."""
    torch_threads: int = 1
    """torch.set_num_threads (the small MLP gains little from more; one per run lets runs
    share a machine)."""

    total_minutes: float = 15.0
    """Wall-clock training budget, summed over resumes; 0 = no time limit."""
    total_updates: int = 0
    """Stop after this many updates; 0 = no limit (then total_minutes must be > 0)."""

    num_envs: int = 256
    """Hands played in parallel by the batched engine."""
    num_steps: int = 64
    """Engine steps (decisions of any seat) per environment per rollout; num_steps x
    checkpoint_every must reach 58, the longest hand (the engine deals afresh at checkpoints)."""
    hidden: int = 128
    """Width of the MLP trunk."""
    layers: int = 2
    """Hidden layers in the MLP trunk."""
    canonical_suits: bool = True
    """Relabel suits inside the model so trump is always suit 0 (shares card-play learning)."""
    mask_input: bool = True
    """Feed the legal-action mask to the network as 56 extra inputs."""
    card_features: bool = True
    """Give the trunk what the rules say about each card (masters, cards that would win the
    trick now, whether the partner is winning it: 147 extra inputs)."""
    card_head: bool = True
    """Add to each card's Q the output of one small network shared by all 48 cards."""

    learning_rate: float = 5e-4
    """Adam step size."""
    anneal_lr: bool = True
    """Linearly anneal the step size towards ``lr_final`` x learning_rate over the budget."""
    lr_final: float = 0.0
    """With anneal_lr: the step size at the end of the budget, as a fraction of learning_rate."""
    reward_scale: float = 1.0 / 36.0
    """Hand scores (raw team score difference, up to +-1152) are multiplied by this: the
    units of Q."""
    epsilon: float = 0.01
    """Exploration: the share of learner decisions taken uniformly at random among the legal
    actions instead of the argmax of Q (DouZero's 0.01)."""
    num_minibatches: int = 4
    """Minibatches per pass over a rollout's decisions."""
    update_epochs: int = 2
    """Passes over each rollout's decisions."""
    max_grad_norm: float = 1.0
    """Gradient-norm clipping (a doubled hand's return is up to 16x a plain one's)."""

    opp_rule: float = 0.9
    """Share of hands against the rule-based agent (drawn per hand and engine slot)."""
    opp_random: float = 0.1
    """Share of hands against the uniformly random agent."""
    teacher_coef: float = 1.0
    """Kickstarting: initial weight of the large-margin loss that makes the rule-based
    agent's action the argmax of Q (falls linearly to 0 at ``teacher_until``); 0 = off."""
    teacher_until: float = 0.25
    """Share of the budget (0 to 1) at which the teacher's weight reaches 0."""
    teacher_margin: float = 0.1
    """How far (in Q units, scaled points) the teacher's action must beat every other legal
    action before the large-margin loss is 0."""

    checkpoint_every: int = 20
    """Write checkpoint.pt and export.pt every this many updates, at the end and on Ctrl-C
    (the checkpoint before is kept as checkpoint.prev.pt). The engine deals afresh at each."""
    milestone_minutes: tuple[float, ...] = (5.0, 10.0)
    """Also keep the model as it was when the run first passed each of these wall-clock
    minutes, as ``model_at_{M}min.pt`` (written once), to measure strength per CPU-minute."""
    log_every: int = 10
    """Print a one-line summary to stderr every this many updates (0 = never)."""
    resume: bool = False
    """Continue runs/NAME from checkpoint.pt (checkpoint.prev.pt if that one is unreadable).
    Without it, a run name that already holds a run is refused."""

    def validate(self) -> None:
        """ValueError naming the first bad field (before any work is done)."""
        top = {"num_envs": MAX_NUM_ENVS, "hidden": MAX_HIDDEN, "layers": MAX_LAYERS}
        for name in ("num_envs", "num_steps", "hidden", "layers", "num_minibatches",
                     "update_epochs", "checkpoint_every", "torch_threads"):  # fmt: skip
            check_int(name, getattr(self, name), 1, top.get(name))
        for name in ("total_updates", "seed", "log_every"):
            check_int(name, getattr(self, name), 0)
        check_number("total_minutes", self.total_minutes, 0.0, lo_inclusive=True)
        if self.total_minutes == 0 and self.total_updates == 0:
            raise ValueError("set total_minutes > 0 or total_updates > 0, or the run never ends")
        check_hands_can_finish(self.num_steps, self.checkpoint_every, self.total_updates)
        for name in ("learning_rate", "reward_scale", "max_grad_norm"):
            check_number(name, getattr(self, name), 0.0)
        for name in ("opp_rule", "opp_random", "teacher_coef", "teacher_margin"):
            check_number(name, getattr(self, name), 0.0, lo_inclusive=True)
        if self.opp_rule + self.opp_random <= 0:
            raise ValueError("opp_rule and opp_random must not both be 0")
        for name in ("epsilon", "lr_final", "teacher_until"):
            v = getattr(self, name)
            if isinstance(v, bool) or not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0):
                raise ValueError(f"{name} must be a number in [0, 1], got {v!r}")
        for name in ("canonical_suits", "mask_input", "card_features", "card_head",
                     "anneal_lr", "resume"):  # fmt: skip
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not isinstance(self.milestone_minutes, (tuple, list)):
            raise ValueError(f"milestone_minutes must be a list of minutes, got "
                             f"{self.milestone_minutes!r}")  # fmt: skip
        for m in self.milestone_minutes:
            check_number("milestone_minutes", m, 0.0)
        for name in ("exp_name", "run_name"):
            v = getattr(self, name)
            if v is None and name == "run_name":
                continue
            if not isinstance(v, str) or v in ("", ".", "..") or any(c in v for c in "/\\\0"):
                raise ValueError(f"{name} must be a plain folder name (no '/'), got {v!r}")
        if not isinstance(self.run_dir, str) or not self.run_dir:
            raise ValueError(f"run_dir must be a non-empty path, got {self.run_dir!r}")

    @property
    def name(self) -> str:
        return self.run_name or f"{self.exp_name}_s{self.seed}"

    @property
    def out_dir(self) -> Path:
        return Path(self.run_dir) / self.name

    def opponent_probs(self) -> np.ndarray:
        """Per-hand probabilities of (rule, random), normalised."""
        p = np.array([self.opp_rule, self.opp_random], np.float64)
        return p / p.sum()

    def teacher_weight(self, progress: float) -> float:
        """Weight of the large-margin loss when ``progress`` (0 to 1) of the budget is spent."""
        return teacher_weight("rule", self.teacher_coef, self.teacher_until, progress)

    def resume_command(self) -> str:
        """The command line that continues this run with the same budget."""
        args = [
            "--run-dir", self.run_dir, "--run-name", self.name, "--total-updates",
            str(self.total_updates), "--total-minutes", f"{self.total_minutes:g}",
        ]  # fmt: skip
        return run_folder.resume_command("train.dmc", args)


# ----------------------------------------------------------------------------- env
EnvFactory = Callable[[int, int], Any]
"""``factory(num_envs, seed)`` -> a batched engine (tests wrap it to watch every step)."""


def make_env(num_envs: int, seed: int) -> BatchedEnv:
    """The numpy batched engine: one hand per episode, raw rewards (scaled here)."""
    return BatchedEnv(num_envs, seed=seed)


OPPONENTS = ("rule", "random")
"""What the learner's team faces in a hand, by index (``train_vs_{name}`` in metrics.csv)."""
RULE, RANDOM = 0, 1


# ----------------------------------------------------------------------------- network
ARCH = ("hidden", "layers", "canonical_suits", "mask_input", "card_features", "card_head")
"""The config fields that define the network (the rest of the architecture is fixed)."""


def model_for(cfg: DMCConfig) -> ActorCritic:
    """PPO's network (:mod:`agents.ppo_net`) without the centralised critic and the belief
    head, so that it never needs the hidden hands: its 56 logits are Q(s, a)."""
    arch = {k: getattr(cfg, k) for k in ARCH}
    return ActorCritic(**arch, central_value=False, belief=False)


def q_values(model: ActorCritic, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Q(s, .) (N, 56) in real action ids. The card head runs on the legal cards only (the
    values of illegal held cards lack its term: they are never read)."""
    inputs = model.inputs(obs, mask, legal_cards=True)
    return model.forward_inputs(inputs, None, belief=False)[0]


def greedy(model: ActorCritic, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The legal action of highest Q in each row (what the exported agent plays)."""
    with torch.inference_mode():
        o, m = torch.from_numpy(obs), torch.from_numpy(mask)
        return masked_logits(q_values(model, o, m), m).argmax(-1).numpy()


# ----------------------------------------------------------------------------- rollout
@dataclass
class HandBuffers:
    """The learner decisions of the hand in progress at each engine slot (padded rows)."""

    obs: np.ndarray  # (N, L, 491) uint8 observations
    mask: np.ndarray  # (N, L, 56) int8 legal-action masks
    act: np.ndarray  # (N, L) int64 actions taken
    teach: np.ndarray  # (N, L) int64 the teacher's action (-1 where it was not asked)
    len: np.ndarray  # (N,) int64 decisions stored so far

    @classmethod
    def empty(cls, n: int) -> HandBuffers:
        steps = MAX_HAND_STEPS  # more than a team can take in one hand
        return cls(
            obs=np.zeros((n, steps, OBS_SIZE), np.uint8),
            mask=np.zeros((n, steps, N_ACTIONS), np.int8),
            act=np.zeros((n, steps), np.int64),
            teach=np.full((n, steps), -1, np.int64),
            len=np.zeros(n, np.int64),
        )

    def append(self, slots: np.ndarray, **rows: np.ndarray) -> None:
        """One decision per slot in ``slots``."""
        pos = self.len[slots]
        for name, values in rows.items():
            getattr(self, name)[slots, pos] = values
        self.len[slots] += 1


@dataclass
class Decisions:
    """Learner decisions of finished hands, flat, in hand order then play order, each with
    its Monte Carlo target; ``hand`` indexes the per-hand ``hand_slot`` and ``hand_team``."""

    obs: np.ndarray  # (D, 491) uint8
    mask: np.ndarray  # (D, 56) int8
    act: np.ndarray  # (D,) int64
    teach: np.ndarray  # (D,) int64, -1 where the teacher was not asked
    ret: np.ndarray  # (D,) float32 the hand's final scaled score difference, learner's team
    hand: np.ndarray  # (D,) int64
    hand_slot: np.ndarray  # (H,) int64 the engine slot each hand was played at
    hand_team: np.ndarray  # (H,) int64 the learner's team in it (0: seats 0 and 2)

    @classmethod
    def concat(cls, parts: list[Decisions]) -> Decisions | None:
        if not parts:
            return None
        offsets = np.cumsum([0] + [len(p.hand_slot) for p in parts[:-1]])
        joined = {
            f.name: np.concatenate([getattr(p, f.name) for p in parts])
            for f in fields(cls)
            if f.name != "hand"
        }
        hand = np.concatenate([p.hand + off for p, off in zip(parts, offsets, strict=True)])
        return cls(**joined, hand=hand)


@dataclass
class Rollout:
    """The engine and the hands in progress; rebuilt at every checkpoint boundary."""

    env: BatchedEnv
    obs: np.ndarray  # (N, 491) the observation of the seat to move in each slot
    mask: np.ndarray  # (N, 56) its legal actions
    seat: np.ndarray  # (N,) the seat to move
    buffers: HandBuffers
    learner_team: np.ndarray  # (N,) the learner's team in each slot's hand
    opponent: np.ndarray  # (N,) RULE or RANDOM
    ask_teacher: bool = False  # record the rule-based agent's action at learner decisions


@dataclass
class RolloutStats:
    """One rollout's finished hands and the learner team's raw points, per opponent; how
    often the greedy choice was the teacher's (at decisions with a choice, when asked)."""

    hands: np.ndarray
    points: np.ndarray
    agree: int = 0
    asked: int = 0

    def metrics(self) -> dict[str, float]:
        out = {
            f"train_vs_{name}": float(self.points[i] / self.hands[i])
            for i, name in enumerate(OPPONENTS)
            if self.hands[i]
        }
        if self.asked:
            out["teacher_agreement"] = self.agree / self.asked
        return out


def start_rollouts(
    cfg: DMCConfig, update: int, rng: np.random.Generator, env_factory: EnvFactory = make_env
) -> Rollout:
    """A fresh engine and empty buffers, seeded from ``(seed, update)``, so that a resumed
    run deals what an uninterrupted one does (the hands in progress at a checkpoint are
    dropped: at most one per slot per checkpoint interval)."""
    n = cfg.num_envs
    env_seed = int(np.random.SeedSequence([cfg.seed, update]).generate_state(1)[0])
    env = env_factory(n, env_seed)
    obs, mask, seat = (np.asarray(x) for x in env.reset(seed=env_seed))
    team = rng.integers(0, 2, n)
    opponent = rng.choice(len(OPPONENTS), size=n, p=cfg.opponent_probs())
    return Rollout(env, obs, mask, seat, HandBuffers.empty(n), team, opponent)


def choose_actions(
    st: Rollout,
    model: ActorCritic,
    rule: Agent,
    cfg: DMCConfig,
    rng: np.random.Generator,
    stats: RolloutStats,
) -> np.ndarray:
    """One action per slot. The learner's seats play epsilon-greedy on Q and their decisions
    are stored (with the teacher's choice when asked); the other team plays as the hand's
    opponent does (the rule-based agent, vectorised, or uniformly random legal moves)."""
    learner = (st.seat & 1) == st.learner_team
    mine = np.flatnonzero(learner)
    actions = np.zeros(len(st.seat), np.int64)
    if len(mine):
        obs, mask = st.obs[mine], st.mask[mine]
        act = greedy(model, obs, mask)
        explore = rng.random(len(mine)) < cfg.epsilon  # drawn every step: same stream
        if explore.any():
            act[explore] = random_legal_actions(mask[explore], rng)
        teach = np.full(len(mine), -1, np.int64)
        if st.ask_teacher:
            teach = np.asarray(rule.act_batch(obs, mask), np.int64)
            choice = (mask != 0).sum(1) > 1
            stats.asked += int(choice.sum())
            stats.agree += int((choice & (act == teach)).sum())
        st.buffers.append(mine, obs=obs, mask=mask, act=act, teach=teach)
        actions[mine] = act
    fixed = np.flatnonzero(~learner & (st.opponent == RULE))
    if len(fixed):
        actions[fixed] = rule.act_batch(st.obs[fixed], st.mask[fixed])
    rand = np.flatnonzero(~learner & (st.opponent == RANDOM))
    if len(rand):
        actions[rand] = random_legal_actions(st.mask[rand], rng)
    return actions


def finish_hands(
    st: Rollout,
    done: np.ndarray,
    rewards: np.ndarray,
    cfg: DMCConfig,
    rng: np.random.Generator,
    stats: RolloutStats,
) -> Decisions | None:
    """The hands that ended: their learner decisions with the Monte Carlo target (the
    engine's reward of the learner's team at the hand's end, x reward_scale, the same for
    every decision of the hand), counted per opponent; then the seating and opponent of
    the hands dealt in their place."""
    ended = np.flatnonzero(done)
    team = st.learner_team[ended]
    points = rewards[ended, team]  # seat 0's reward is team 0's, seat 1's team 1's
    np.add.at(stats.points, st.opponent[ended], points)
    np.add.at(stats.hands, st.opponent[ended], 1.0)
    b = st.buffers
    lengths = b.len[ended]
    valid = np.arange(b.act.shape[1])[None, :] < lengths[:, None]
    hand = np.repeat(np.arange(len(ended)), lengths)
    out = None
    if lengths.sum():
        out = Decisions(
            obs=b.obs[ended][valid],
            mask=b.mask[ended][valid],
            act=b.act[ended][valid],
            teach=b.teach[ended][valid],
            ret=(points * cfg.reward_scale).astype(np.float32)[hand],
            hand=hand,
            hand_slot=ended.astype(np.int64),
            hand_team=team.astype(np.int64),
        )
    b.len[ended] = 0
    b.teach[ended] = -1
    st.learner_team[ended] = rng.integers(0, 2, len(ended))
    st.opponent[ended] = rng.choice(len(OPPONENTS), size=len(ended), p=cfg.opponent_probs())
    return out


def collect_rollout(
    st: Rollout, model: ActorCritic, rule: Agent, cfg: DMCConfig, rng: np.random.Generator
) -> tuple[Decisions | None, RolloutStats]:
    """``num_steps`` engine steps; returns the learner decisions of the hands that ended
    (None if none did) and the rollout's results. Hands in progress carry on next time."""
    stats = RolloutStats(np.zeros(len(OPPONENTS)), np.zeros(len(OPPONENTS)))
    finished: list[Decisions] = []
    model.eval()
    for _ in range(cfg.num_steps):
        actions = choose_actions(st, model, rule, cfg, rng, stats)
        obs, mask, seat, rewards, done = (np.asarray(x) for x in st.env.step(actions))
        st.obs, st.mask, st.seat = obs, mask, seat
        if done.any():
            hands = finish_hands(st, done, rewards, cfg, rng, stats)
            if hands is not None:
                finished.append(hands)
    return Decisions.concat(finished), stats


# ----------------------------------------------------------------------------- loss and update
def large_margin_loss(
    q: torch.Tensor, mask: torch.Tensor, expert: torch.Tensor, margin: float
) -> torch.Tensor:
    """DQfD's supervised loss, mean of max_a [Q(s,a) + l(a_E,a)] - Q(s,a_E) over the legal
    a, with l = ``margin`` for a != a_E and 0 for a_E: 0 exactly when the teacher's action
    a_E beats every other legal action by the margin, so it shapes only the argmax of Q and
    leaves the values to the regression."""
    bonus = torch.full_like(q, margin).scatter(1, expert[:, None], 0.0)
    best = masked_logits(q + bonus, mask).max(-1).values
    return (best - q.gather(1, expert[:, None]).squeeze(-1)).mean()


def dmc_loss(
    q: torch.Tensor,
    mask: torch.Tensor,
    act: torch.Tensor,
    ret: torch.Tensor,
    teach: torch.Tensor,
    cfg: DMCConfig,
    weight: float,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Squared error between Q(s, a taken) (the raw value, not a log-probability) and the
    Monte Carlo return, plus ``weight`` x :func:`large_margin_loss` where the teacher was
    asked; and diagnostics."""
    q_taken = q.gather(1, act[:, None]).squeeze(-1)
    loss_q = ((q_taken - ret) ** 2).mean()
    loss = loss_q
    parts = {"loss_q": float(loss_q.detach()), "q_taken_mean": float(q_taken.detach().mean())}
    asked = teach >= 0
    if weight > 0 and bool(asked.any()):
        margin = large_margin_loss(q[asked], mask[asked], teach[asked], cfg.teacher_margin)
        loss = loss + weight * margin
        parts["loss_teacher"] = float(margin.detach())
    return loss, parts


def dmc_update(
    model: ActorCritic,
    optimizer: torch.optim.Optimizer,
    d: Decisions,
    cfg: DMCConfig,
    progress: float,
) -> dict[str, float]:
    """``update_epochs`` passes over one rollout's decisions in ``num_minibatches``
    minibatches (Adam, gradient clipping); returns the means of the diagnostics
    (``grad_norm``: the norm before the clip; ``grad_clipped``: the share of minibatches on
    which ``max_grad_norm`` bound)."""
    obs, mask = torch.from_numpy(d.obs), torch.from_numpy(d.mask)
    act, teach = torch.from_numpy(d.act), torch.from_numpy(d.teach)
    ret = torch.from_numpy(d.ret)
    with torch.no_grad():  # no parameter goes into them: once per batch
        inputs = model.inputs(obs, mask, legal_cards=True)
    weight = cfg.teacher_weight(progress)
    lr = annealed_lr(cfg.learning_rate, cfg.lr_final, cfg.anneal_lr, progress)
    optimizer.param_groups[0]["lr"] = lr
    size = len(act)
    mb = max(1, math.ceil(size / cfg.num_minibatches))
    seen: dict[str, list[float]] = {}
    model.train()
    for _ in range(cfg.update_epochs):
        perm = torch.randperm(size)
        for start in range(0, size, mb):
            j = perm[start : start + mb]
            q = model.forward_inputs(inputs.rows(j), None, belief=False)[0]
            loss, parts = dmc_loss(q, mask[j], act[j], ret[j], teach[j], cfg, weight)
            optimizer.zero_grad()
            loss.backward()
            norm = float(nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm))
            optimizer.step()
            parts |= {"grad_norm": norm, "grad_clipped": float(norm > cfg.max_grad_norm)}
            for k, v in parts.items():
                seen.setdefault(k, []).append(v)
    row = {k: float(np.mean(v)) for k, v in seen.items()}
    row.setdefault("loss_teacher", math.nan)  # blank: no teacher now
    row |= {"return_mean": float(d.ret.mean()), "batch_decisions": float(size)}
    return row | {"learning_rate": lr, "teacher_weight": weight}


# ----------------------------------------------------------------------------- the run folder
CSV_FIELDS = (
    "update", "global_step", "hands", "minutes", "steps_per_second",
    "learner_decisions_per_second", "batch_decisions", "loss_q", "loss_teacher",
    "teacher_weight", "teacher_agreement", "q_taken_mean", "return_mean", "train_vs_rule",
    "train_vs_random", "learning_rate", "grad_norm", "grad_clipped",
)  # fmt: skip
"""metrics.csv columns, one row per update (new ones go last)."""
RESUME_OVERRIDES = (
    "total_minutes", "total_updates", "resume", "torch_threads", "run_dir", "run_name",
    "exp_name", "log_every",
)  # fmt: skip
"""Fields a ``--resume`` takes from the command line; the others come from the checkpoint."""
CHECKPOINT, PREVIOUS, EXPORT, METRICS = (
    "checkpoint.pt", "checkpoint.prev.pt", "export.pt", "metrics.csv"
)  # fmt: skip


@dataclass
class Counters:
    """How far a run is: saved in every checkpoint, restored on resume."""

    update: int = 0
    global_step: int = 0
    hands: int = 0
    elapsed_s: float = 0.0
    """Wall-clock seconds of training, summed over resumes."""


@dataclass
class Run:
    """A run that may start (every check passed, nothing written yet)."""

    cfg: DMCConfig
    run_id: str
    resume: Checkpoint | None = None
    resumed_from: Path | None = None
    newest_unreadable: bool = False
    """It resumed from checkpoint.prev.pt: the unreadable newest is set aside, not rotated."""


def run_finished(cfg: DMCConfig, at: Counters) -> bool:
    """The budget is spent and some hand has finished (never report figures from 0 hands)."""
    spent = budget_spent(cfg.total_updates, cfg.total_minutes, at.update, at.elapsed_s)
    return spent and at.hands > 0


def load_training_checkpoint(path: Path) -> Checkpoint:
    """A DMC training checkpoint (verified, ``weights_only=True``); ValueError naming
    ``path`` unless it holds everything a resume needs."""
    data = load_checkpoint(path)
    needed = (
        ("update", int), ("global_step", int), ("hands", int), ("elapsed_s", (int, float)),
        ("config", dict), ("optimizer", dict), ("rng", dict),
    )  # fmt: skip
    for key, kind in needed:
        if isinstance(data.get(key), bool) or not isinstance(data.get(key), kind):
            raise ValueError(f"checkpoint {str(path)!r}: {key!r} is missing or of the wrong type")
    if data["config"].get("algorithm") != ALGORITHM:
        raise ValueError(f"checkpoint {str(path)!r} is not a DMC training checkpoint")
    return data


def prepare_run(cfg: DMCConfig) -> Run:
    """Every check a run needs, before anything is written; RunRefused (naming what, and
    what to do) for bad settings, a new run where one exists, a resume with no readable
    checkpoint or a spent budget."""
    try:
        cfg.validate()
    except ValueError as exc:
        raise RunRefused(str(exc)) from None
    out = cfg.out_dir
    run_folder.check_writable_folder(out, "run folder")
    resume, path = None, None
    if cfg.resume:
        resume, path, problems = run_folder.newest_readable(
            out / CHECKPOINT, out / PREVIOUS, load_training_checkpoint
        )
        if problems:
            print(f"warning: {'; '.join(problems)}: resuming from {str(path)!r}", file=sys.stderr)
    elif found := run_folder.existing_run_files(out):
        raise RunRefused(
            f"run folder {str(out)!r} already holds a run ({', '.join(found[:3])}); pass "
            f"--resume to continue it, or another --run-name for a new run (nothing was changed)"
        )
    if resume is None:
        return Run(cfg, uuid.uuid4().hex)
    names = {f.name for f in fields(DMCConfig)}
    own = {k: v for k, v in resume["config"].items() if k in names}
    try:  # the run's own settings win, except the budget and where it lives
        cfg = DMCConfig(**{**own, **{k: getattr(cfg, k) for k in RESUME_OVERRIDES}})
        cfg.validate()
    except (TypeError, ValueError) as exc:
        raise RunRefused(f"checkpoint {str(path)!r} holds invalid settings: {exc}") from exc
    done = Counters(*(resume[f.name] for f in fields(Counters)))
    if run_finished(cfg, done):
        raise RunRefused(
            budget_spent_message(
                cfg.total_updates, cfg.total_minutes, out, done.update, done.elapsed_s
            )
        )
    unreadable = path == out / PREVIOUS and (out / CHECKPOINT).exists()
    return Run(cfg, str(resume.get("run_id") or uuid.uuid4().hex), resume, path, unreadable)


def restore(
    run: Run, model: ActorCritic, optimizer: torch.optim.Optimizer, rng: np.random.Generator
) -> Counters:
    """Load a resumed run's model, optimiser and generators (in place); its counters."""
    if run.resume is None:
        return Counters()
    try:
        model.load_state_dict(model_from_checkpoint(run.resume, str(run.resumed_from)).state_dict())
        optimizer.load_state_dict(run.resume["optimizer"])
        torch.set_rng_state(run.resume["rng"]["torch"])
        rng.bit_generator.state = run.resume["rng"]["numpy"]
    except (KeyError, TypeError, RuntimeError, ValueError) as exc:
        path = str(run.resumed_from)
        raise RunRefused(f"checkpoint {path!r} cannot be restored: {exc}") from exc
    return Counters(*(run.resume[f.name] for f in fields(Counters)))


def checkpoint_config(cfg: DMCConfig) -> dict[str, Any]:
    """The config stored in every file of the run, marked as a DMC model."""
    return asdict(cfg) | {"algorithm": ALGORITHM}


def save(
    run: Run,
    model: ActorCritic,
    optimizer: torch.optim.Optimizer,
    rng: np.random.Generator,
    at: Counters,
) -> None:
    """The full checkpoint (the one it replaces becomes checkpoint.prev.pt) and export.pt,
    the agent checkpoint (model only) that ``make_agent("ppo:PATH")`` plays."""
    out = run.cfg.out_dir
    info = asdict(at) | {"run_id": run.run_id}
    states = {"torch": torch.get_rng_state(), "numpy": rng.bit_generator.state}
    extra = info | {"optimizer": optimizer.state_dict(), "rng": states}
    full = model_payload(model, checkpoint_config(run.cfg), extra)
    kept = run_folder.save_rotating(full, out / CHECKPOINT, out / PREVIOUS, run.newest_unreadable)
    if kept is not None:
        print(f"note: kept the unreadable checkpoint as {str(kept)!r}", file=sys.stderr)
    run.newest_unreadable = False
    run_folder.save_torch(model_payload(model, checkpoint_config(run.cfg), info), out / EXPORT)


def save_milestones(run: Run, model: ActorCritic, at: Counters) -> None:
    """The model, once, as of each ``milestone_minutes`` the run has just passed."""
    for minutes in run.cfg.milestone_minutes:
        path = run.cfg.out_dir / f"model_at_{minutes:g}min.pt"
        if at.elapsed_s >= 60.0 * minutes and not path.exists():
            info = asdict(at) | {"run_id": run.run_id}
            run_folder.save_torch(model_payload(model, checkpoint_config(run.cfg), info), path)


# ----------------------------------------------------------------------------- the loop
def train(
    cfg: DMCConfig,
    on_update: Callable[[dict[str, float]], None] | None = None,
    *,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Train until the budget is spent; returns the last metrics row (also in metrics.csv).

    Every check comes first (:func:`prepare_run`: RunRefused before anything is written).
    ``on_update(metrics)`` is called after every update (an exception from it stops the
    run). ``clock`` gives the seconds the budget counts. Ctrl-C finishes the update, saves
    a checkpoint and raises :class:`TrainingInterrupted` saying how to resume."""
    run = prepare_run(cfg)
    cfg = run.cfg
    torch.set_num_threads(cfg.torch_threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    model = model_for(cfg)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, eps=1e-5)
    rule = make_opponent_agent("rule", cfg.seed)  # opponent and teacher
    at = restore(run, model, optimizer, rng)
    out = cfg.out_dir  # every check passed: from here on the folder is ours
    out.mkdir(parents=True, exist_ok=True)
    for stale in run_folder.clean_stale_temps(out, (CHECKPOINT, PREVIOUS, METRICS)):
        print(f"note: removed {str(stale)!r}, left by an interrupted write", file=sys.stderr)
    run_folder.repair_csv(out / METRICS, CSV_FIELDS, at.update)

    metrics: dict[str, float] = {}
    saved_update, st = at.update, None
    last = clock()
    with deferred_interrupt() as interrupts:
        while not run_finished(cfg, at) and not interrupts:
            progress = budget_progress(
                cfg.total_updates, cfg.total_minutes, at.update, at.elapsed_s
            )
            if st is None or at.update % cfg.checkpoint_every == 0:
                st = start_rollouts(cfg, at.update, rng)
            st.ask_teacher = cfg.teacher_weight(progress) > 0
            batch, stats = collect_rollout(st, model, rule, cfg, rng)
            metrics = {} if batch is None else dmc_update(model, optimizer, batch, cfg, progress)
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
            decided = metrics.get("batch_decisions", 0.0)
            metrics["learner_decisions_per_second"] = decided / max(dt, 1e-9)
            run_folder.append_csv(out / METRICS, CSV_FIELDS, metrics)
            if at.update % cfg.checkpoint_every == 0 or run_finished(cfg, at):
                save(run, model, optimizer, rng, at)
                saved_update = at.update
            save_milestones(run, model, at)
            if cfg.log_every and at.update % cfg.log_every == 0:
                shown = ("minutes", "loss_q", "loss_teacher", "train_vs_rule", "train_vs_random")
                line = " ".join(f"{k}={metrics[k]:.3f}" for k in shown if k in metrics)
                print(f"dmc update {at.update}: {line}", file=sys.stderr)
            if on_update is not None:
                on_update(dict(metrics))
        if interrupts and saved_update != at.update:
            save(run, model, optimizer, rng, at)
    if interrupts:
        raise TrainingInterrupted(
            f"interrupted: saved checkpoint {str(out / CHECKPOINT)!r} (update {at.update}); "
            f"continue with: {cfg.resume_command()}"
        )
    return metrics


# ----------------------------------------------------------------------------- main
def parse_config(argv: list[str] | None = None) -> DMCConfig:
    """The DMCConfig of a command line (tyro: every field a flag, its docstring the help)."""
    import tyro

    description = (__doc__ or "").split("\n\n")[0]
    return tyro.cli(DMCConfig, args=argv, description=description)


def main(argv: list[str] | None = None) -> None:
    """CLI entry: bad flags and runs that cannot start as asked are one ``error:`` line and
    exit status 2, nothing changed; Ctrl-C: a final checkpoint, how to resume, status 130."""
    try:
        cfg = parse_config(argv)
        metrics = train(cfg)
    except ImportError as exc:  # tyro missing (torch is checked at import)
        print(f"error: python -m train.dmc needs the 'train' extra ({exc}): "
              "pip install 'butifarra-rl[train]'", file=sys.stderr)  # fmt: skip
        raise SystemExit(2) from None
    except RunRefused as exc:  # every refusal comes before anything is written
        print("error: " + " ".join(str(exc).split()), file=sys.stderr)
        raise SystemExit(2) from None
    except TrainingInterrupted as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(130) from None
    except KeyboardInterrupt:  # a second Ctrl-C: at once, no final checkpoint
        print("interrupted at once: no final checkpoint", file=sys.stderr)
        raise SystemExit(130) from None
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()})


if __name__ == "__main__":
    main()
