"""Self-play PPO for Butifarra on Ray RLlib's new API stack, on one machine or a cluster.

One shared policy plays all four seats (action masking inside the model), against itself,
frozen snapshots of itself, the rule-based agent or the random agent, drawn per hand through
RLlib's policy mapping. The network is the project's own :class:`agents.ppo_net.ActorCritic`
wrapped as an RLModule, so the export is a ``butifarra-ppo`` checkpoint:
``butifarra arena ppo:runs/NAME/export.pt rule`` plays it, as notebooks can.

The settings speak ``train/ppo.py``'s vocabulary: a knob that means the same thing there has
the same flag (``--learning-rate``, ``--clip-coef``, ``--ent-coef``, ``--max-grad-norm``,
``--update-epochs``, ``--total-minutes``, ``--opp-rule``, ``--opp-random``...); RLlib's own
(env runners, learners, the cluster address) keep RLlib's words. The run folder (refusals,
checkpoint rotation, the CSV log, TensorBoard, Ctrl-C) is :mod:`train.run_folder`, shared
with ``train/ppo.py``; the fast sampler is :mod:`train.rllib_sampler`.

It reads top to bottom: settings -> RLModules -> league mapping -> the RLlib config ->
the Ray session -> run files (checkpoints, export, logs) -> evaluation -> the loop -> main.

Usage::

    python -m train.rllib_ppo --help
    python -m train.rllib_ppo --total-minutes 10                 # local Ray on this machine
    python -m train.rllib_ppo --address HEAD:6379 --num-env-runners 16 --total-minutes 60
    python -m train.rllib_ppo --run-name NAME --resume           # continue a run

A run lives in ``runs/NAME/``: ``settings.json`` (its hyper-parameters), RLlib checkpoints
``checkpoint/`` and ``checkpoint.prev/``, ``export.pt`` (the agent), ``metrics.csv`` and
TensorBoard events (decisions/s, losses, the arena's duplicate-deal results vs the
rule-based agent). A new run never starts in a folder that holds one; ``--resume``
continues it (from ``checkpoint.prev/`` if the newest is unreadable). Ctrl-C finishes the
iteration, saves, and says how to resume. Guide: ``docs/distributed.md``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import os
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

try:
    import numpy as np
    import ray
    import torch
except ImportError as exc:  # ``python -m train.rllib_ppo`` without ray or torch: one line
    if __name__ != "__main__":
        raise
    extra = "train" if exc.name == "torch" else "integrations"  # ray[rllib] is in the latter
    print(f"error: python -m train.rllib_ppo needs the '{extra}' extra ({exc}): "
          f"pip install 'butifarra-rl[{extra}]'", file=sys.stderr)  # fmt: skip
    raise SystemExit(2) from None
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.algorithms.ppo.ppo import LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import ENTROPY_KEY, POLICY_LOSS_KEY, VF_LOSS_KEY
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.core.rl_module.rl_module import RLModule, RLModuleSpec
from ray.rllib.core.rl_module.torch import TorchRLModule
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.torch_utils import explained_variance

from agents.evaluation.arena import duel
from agents.ppo_agent import PPOAgent
from agents.ppo_net import (
    MAX_HIDDEN,
    MAX_LAYERS,
    ActorCritic,
    check_critic,
    masked_entropy,
    masked_log_probs,
    masked_logits,
    model_payload,
)
from agents.registry import make_agent
from butifarra_env.core.fileio import atomic_write_text
from butifarra_env.core.validate import check_int, check_number
from butifarra_env.integrations.rllib import (
    MASK_KEY,
    OBS_KEY,
    SHARED_POLICY,
    BatchedHandsEnv,
    PettingZooHandEnv,
    parse_agent_id,
)
from train.local_ray import keep_loopback, local_cluster
from train.ppo_settings import (
    annealed_lr,
    budget_progress,
    make_opponent_agent,
    teacher_weight,
)
from train.rllib_sampler import (
    HIDDEN_HANDS,
    SAMPLE_WALL_S,
    TEACHER_ACTION,
    BatchedHandsEnvRunner,
    bidding_rows,
)
from train.run_folder import (
    RunRefused,
    TrainingInterrupted,
    append_csv,
    check_export_path,
    check_writable_folder,
    clean_stale_folders,
    clean_stale_temps,
    deferred_interrupt,
    existing_run_files,
    log_scalars,
    newest_readable,
    open_tensorboard,
    repair_csv,
    resume_command,
    save_rotating_folder,
    save_torch,
)

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter

EnvPath = Literal["fast", "batched", "pettingzoo"]
PATHS: tuple[str, ...] = get_args(EnvPath)
"""How env runners sample: ``fast`` = :class:`BatchedHandsEnv` with
:class:`~train.rllib_sampler.BatchedHandsEnvRunner` (bulk bookkeeping); ``batched`` = the
same env on RLlib's own ``MultiAgentEnvRunner``; ``pettingzoo`` = one ``butifarra_v0`` hand
per env (the plain path)."""
RULE_POLICY = "rule"
"""Module id of the rule-based opponent."""
RANDOM_POLICY = "random"
"""Module id of the uniformly random opponent."""


# ----------------------------------------------------------------------------- settings
@dataclass
class Settings:
    """Every knob of an RLlib run; each is a flag (``python -m train.rllib_ppo --help``).
    Names are those of ``train/ppo.py``'s ``Config`` wherever a knob means the same there."""

    run_name: str | None = None
    """Folder name under run_dir; default rllib_ppo_s{seed}. --resume continues it."""
    run_dir: str = "runs"
    """Where runs live (RUN_DIR/NAME/: checkpoints, export, metrics, TensorBoard)."""
    seed: int = 1
    """Seeds RLlib (torch, numpy, env runners), the deals and the opponent draws."""
    torch_threads: int = 1
    """torch threads of the driver (learner, local sampling); 0 = min(2, CPU count)."""
    total_minutes: float = 10.0
    """Wall-clock training budget in minutes, summed over resumes; 0 = no time limit."""
    total_updates: int = 0
    """Stop after this many PPO updates (RLlib iterations) in total; 0 = no limit."""

    address: str | None = None
    """RLlib only: Ray cluster to join (HOST:PORT, 'auto'); default: a local Ray, 127.0.0.1."""
    env_path: EnvPath = "fast"
    """RLlib only: fast (bulk episodes), batched (RLlib's runner), pettingzoo (1 hand/env)."""
    num_env_runners: int = 2
    """RLlib only: env runner actors (0: sample in the driver process)."""
    num_hands: int = 64
    """RLlib only: hands in play at once per env runner (fast and batched paths)."""
    num_learners: int = 0
    """RLlib only: learner actors (0: learn in the driver process). With GPUs: 1 per GPU."""
    gpus_per_learner: float = 0.0
    """RLlib only: GPUs per learner (with num_learners 0: a GPU for the driver's learner)."""
    object_store_mb: int = 256
    """RLlib only: object store of a local Ray in MB (ignored with --address)."""
    train_batch: int = 8192
    """RLlib only: the learner's decisions per PPO update, all env runners together (whole
    hands: a few more)."""
    minibatch: int = 2048
    """RLlib only: decisions per SGD minibatch."""

    hidden: int = 256
    """Width of the MLP trunk (ActorCritic)."""
    layers: int = 2
    """Hidden layers in the MLP trunk."""
    central_value: bool = True
    """Centralised critic: the value MLP also sees the three hidden hands (from the engine's
    state(), recorded by the fast sampler as a batch column)."""
    critic_hidden: int = 0
    """Width of the centralised critic's layers; 0: the trunk's ``hidden``. The critic is
    about two fifths of the network's arithmetic and is not needed to play."""
    canonical_suits: bool = True
    """Relabel suits inside the model so trump is always suit 0 (shares card-play learning)."""
    mask_input: bool = True
    """Feed the legal-action mask to the networks as 56 extra inputs."""
    belief: bool = False
    """Belief head on the policy trunk: predicts which other seat holds each card, trained
    as an auxiliary loss (weight ``belief_coef``) against the true hidden hands. Off since
    release 12, as in ``train.ppo``."""
    belief_coef: float = 0.5
    """Weight of the belief loss (binary cross-entropy, mean over 144 outputs)."""
    card_features: bool = True
    """Give the trunk what the rules say about each card: masters, cards that would win
    the trick now, whether the partner is winning it (147 extra inputs)."""
    card_head: bool = True
    """Add to each card's logit the output of one small network shared by all 48 cards,
    reading that card's features and the trunk (card play learnt once for every card)."""
    learning_rate: float = 8e-4
    """Adam step size."""
    anneal_lr: bool = True
    """Linearly anneal the step size towards ``lr_final`` x learning_rate over the budget
    (the larger of the spent shares of total_updates and total_minutes)."""
    lr_final: float = 0.0
    """With anneal_lr: the step size at the end of the budget, as a fraction of learning_rate."""
    gamma: float = 1.0
    """Discount per own decision (a hand is short; 1.0 = undiscounted hand score)."""
    gae_lambda: float = 0.6
    """GAE lambda along each seat's own decisions. 0.6 since release 11 (0.95 before; after
    60 minutes the policy is then stronger against the rule-based player on five seeds, and
    head to head against 0.95's runs of the same seed: docs/ppo_ablation.md)."""
    reward_scale: float = 1.0 / 36.0
    """Rewards (raw team score difference, up to +-1152) are multiplied by this for learning."""
    update_epochs: int = 4
    """Passes over each batch."""
    clip_coef: float = 0.2
    """PPO ratio clipping."""
    ent_coef: float = 0.03
    """Weight of the entropy bonus (entropy over legal actions only). 0.03 since release 10
    (0.01 before; after 60 minutes the policy is then stronger against the rule-based player
    and head to head, on two seeds: docs/ppo_ablation.md)."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    max_grad_norm: float = 0.5
    """Gradient-norm clipping (0 = none)."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
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
    the whole run. 0 = they follow the schedule like the rest."""

    opp_self: float = 0.05
    """Share of hands in pure self-play (all four seats are the learner)."""
    opp_snapshot: float = 0.0
    """Share of hands against a frozen snapshot of the policy."""
    opp_rule: float = 0.95
    """Share of hands against the rule-based agent."""
    opp_random: float = 0.0
    """Share of hands against the uniformly random agent. 0 since release 9 (0.05 before;
    without them the policy is stronger against the rule-based player and head to head, and
    weaker against random: docs/ppo_ablation.md)."""
    snapshot_every: int = 10
    """Copy the current policy into the oldest snapshot every this many updates."""
    snapshot_pool: int = 2
    """Snapshots kept (each an RLlib module on every env runner; the oldest is replaced)."""

    eval_every: int = 20
    """Evaluate vs the rule-based agent every this many updates (0 = never)."""
    eval_deals: int = 500
    """Duplicate deals per interval evaluation (each played with both seatings)."""
    eval_seed: int = 12345
    """Seed of the fixed evaluation deal set."""
    checkpoint_every: int = 5
    """Checkpoint (and export) every this many updates, at the end and on Ctrl-C."""
    export_path: str | None = None
    """Agent checkpoint to write (default runs/NAME/export.pt); never another run's file."""
    resume: bool = False
    """Continue runs/NAME from its newest readable checkpoint (else a used name is refused)."""
    tensorboard: bool = True
    """Write TensorBoard events next to the CSV log."""

    @property
    def name(self) -> str:
        return self.run_name or f"rllib_ppo_s{self.seed}"

    @property
    def out_dir(self) -> Path:
        return Path(self.run_dir) / self.name

    @property
    def export(self) -> Path:
        return Path(self.export_path) if self.export_path else self.out_dir / "export.pt"

    def opponent_probs(self) -> tuple[float, float, float, float]:
        """(self, snapshot, rule, random) shares, normalised."""
        p = (self.opp_self, self.opp_snapshot, self.opp_rule, self.opp_random)
        total = sum(p)
        return (p[0] / total, p[1] / total, p[2] / total, p[3] / total)

    def validate(self) -> None:
        """ValueError naming the first bad field, before anything starts (the messages are
        ``train/ppo.py``'s for the fields the two share)."""
        bounded = {"hidden": MAX_HIDDEN, "layers": MAX_LAYERS, "critic_hidden": MAX_HIDDEN}
        positive_ints = (
            "num_hands", "train_batch", "minibatch", "update_epochs", "hidden", "layers",
            "snapshot_pool", "snapshot_every", "checkpoint_every", "eval_deals",
        )  # fmt: skip
        for name in positive_ints:
            check_int(name, getattr(self, name), 1, bounded.get(name))
        counts = ("total_updates", "eval_every", "torch_threads", "seed", "eval_seed",
                  "num_env_runners", "num_learners", "critic_hidden")  # fmt: skip
        for name in counts:
            check_int(name, getattr(self, name), 0, bounded.get(name))
        check_critic(self.critic_hidden, self.central_value)
        check_int("object_store_mb", self.object_store_mb, 64)
        check_number("total_minutes", self.total_minutes, 0.0, lo_inclusive=True)
        if self.total_minutes == 0 and self.total_updates == 0:
            raise ValueError("set total_minutes > 0 or total_updates > 0, or the run never ends")
        for name in ("learning_rate", "clip_coef", "reward_scale"):
            check_number(name, getattr(self, name), 0.0)
        for name in ("gamma", "gae_lambda", "lr_final", "teacher_until"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0):
                raise ValueError(f"{name} must be in [0, 1], got {v!r}")
        for name in ("ent_coef", "vf_coef", "max_grad_norm", "gpus_per_learner",
                     "belief_coef", "teacher_coef", "teacher_bid_floor"):  # fmt: skip
            check_number(name, getattr(self, name), 0.0, lo_inclusive=True)
        for name in ("opp_self", "opp_snapshot", "opp_rule", "opp_random"):
            check_number(name, getattr(self, name), 0.0, lo_inclusive=True)
        if self.opp_self + self.opp_snapshot + self.opp_rule + self.opp_random <= 0:
            raise ValueError("opp_self, opp_snapshot, opp_rule, opp_random must not all be 0")
        if self.minibatch > self.train_batch:
            raise ValueError(
                f"minibatch ({self.minibatch}) must not exceed train_batch ({self.train_batch})"
            )
        if self.env_path not in PATHS:
            raise ValueError(f"env_path must be one of {', '.join(PATHS)}, got {self.env_path!r}")
        recipe = [
            f"--{n.replace('_', '-')}" for n in ("central_value", "belief") if getattr(self, n)
        ]
        recipe += ["--teacher"] if self.teacher is not None else []
        if recipe and self.env_path != "fast":
            off = " ".join(
                "--teacher None" if f == "--teacher" else f"--no-{f[2:]}" for f in recipe
            )
            raise ValueError(
                f"{', '.join(recipe)} need the hidden hands or the teacher's actions, which only "
                f"--env-path fast records; with --env-path {self.env_path} pass {off}"
            )
        if self.teacher is not None:
            if not isinstance(self.teacher, str) or not self.teacher.strip():
                raise ValueError(f"teacher must be a registry agent or None, got {self.teacher!r}")
            try:
                make_opponent_agent(self.teacher, self.seed)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"teacher: {exc}") from None
        v = self.run_name
        if v is not None and (
            not isinstance(v, str) or v in ("", ".", "..") or any(c in v for c in "/\\\0")
        ):
            raise ValueError(f"run_name must be a plain folder name (no '/'), got {v!r}")
        for name in ("run_dir", "export_path"):
            v = getattr(self, name)
            if not (v is None and name == "export_path") and (not isinstance(v, str) or not v):
                raise ValueError(f"{name} must be a non-empty path, got {v!r}")


RESUME_OVERRIDES = (
    "total_updates", "total_minutes", "resume", "address", "num_env_runners", "torch_threads",
    "export_path", "object_store_mb", "run_dir", "run_name", "num_learners", "gpus_per_learner",
)  # fmt: skip
"""Settings a ``--resume`` takes from the command line; all others are the run's own."""
RENAMED = {
    "iterations": "total_updates", "minutes": "total_minutes", "epochs": "update_epochs",
    "lr": "learning_rate", "clip": "clip_coef", "entropy": "ent_coef",
    "grad_clip": "max_grad_norm", "snapshots": "snapshot_pool",
}  # fmt: skip
"""Settings of older versions of this trainer and their names now (``train/ppo.py``'s)."""


BEFORE_RECIPE: dict[str, Any] = {
    "central_value": False, "belief": False, "card_features": False, "card_head": False,
    "teacher": None, "anneal_lr": False,
}  # fmt: skip
"""What a run's settings.json written before the recipe settings existed means for them:
the plain network, no teacher, a constant step size (so such a run resumes as it was)."""


def parse_settings(argv: list[str] | None = None) -> Settings:
    """The Settings of a command line (tyro; ``--help`` documents every field). A bad flag is
    a ValueError with tyro's message on one line."""
    import tyro

    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return tyro.cli(
                Settings,
                args=argv,
                prog="python -m train.rllib_ppo",
                description=(__doc__ or "").split("\n\n")[0],
            )
    except SystemExit as exc:
        if exc.code in (0, None):
            raise
        raise ValueError(f"{_one_line(captured.getvalue())} (see --help)") from None


def _one_line(box: str) -> str:
    """The message of a tyro error box: its first section, without the frame."""
    lines: list[str] = []
    for line in box.splitlines()[1:]:
        text = line.strip().strip("│╭╮╰╯").strip()
        if not text or set(text) <= set("─"):
            if lines:
                break
            continue
        lines.append(text)
    return " ".join(" ".join(lines).split()) or " ".join(box.split())


# ----------------------------------------------------------------------------- RLModules
MODULE_DEFAULTS: dict[str, Any] = {
    "hidden": 256, "layers": 2, "central_value": False, "canonical_suits": True,
    "mask_input": True, "belief": False, "card_features": False, "card_head": False,
    "critic_hidden": 0,
}  # fmt: skip
"""The :class:`ActorCriticModule` ``model_config`` keys of the network (``ARCH_FIELDS`` of
``train/ppo.py``) and the value a missing one means (the plain network)."""
BELIEF_LOSS = "belief_loss"
"""Key of the train pass's output holding the belief loss (a scalar over the valid rows)."""


class ActorCriticModule(TorchRLModule, ValueFunctionAPI):
    """:class:`agents.ppo_net.ActorCritic` as an RLlib module: masked logits (illegal
    actions at -1e8) from ``{"observations", "action_mask"}``. ``model_config``: the network
    options of :data:`MODULE_DEFAULTS` and ``teacher`` (a registry spec or None).

    A central critic or a belief head (``needs_hidden``) reads the hidden hands from the
    batch column :data:`~train.rllib_sampler.HIDDEN_HANDS` that the fast sampler records;
    ``teacher`` tells the sampler to record the teacher's actions
    (:data:`~train.rllib_sampler.TEACHER_ACTION`). The train pass runs the network once, on
    the rows the loss reads (``loss_mask``: not the extra time step RLlib's PPO adds to each
    episode), and returns the values as its embeddings and the belief loss under
    :data:`BELIEF_LOSS`."""

    def setup(self) -> None:
        cfg = {**MODULE_DEFAULTS, **dict(self.model_config or {})}
        arch = {k: type(MODULE_DEFAULTS[k])(cfg[k]) for k in MODULE_DEFAULTS}
        self.net = ActorCritic(**arch)
        spec = cfg.get("teacher")
        self.teacher: str | None = None if spec is None else str(spec)

    @property
    def needs_hidden(self) -> bool:
        """Training reads the hidden hands (central critic or belief head)."""
        return bool(self.net.central_value or self.net.arch["belief"])

    def _hidden(self, batch: Mapping[str, Any]) -> torch.Tensor | None:
        if not self.needs_hidden:
            return None
        if HIDDEN_HANDS not in batch:
            raise ValueError(
                f"this module ({'central critic' if self.net.central_value else 'belief head'})"
                f" trains on the {HIDDEN_HANDS!r} column, which only --env-path fast records"
            )
        return batch[HIDDEN_HANDS]

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs, mask = batch[Columns.OBS][OBS_KEY], batch[Columns.OBS][MASK_KEY]
        return {Columns.ACTION_DIST_INPUTS: masked_logits(self.net.logits(obs, mask), mask)}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs, mask = batch[Columns.OBS][OBS_KEY], batch[Columns.OBS][MASK_KEY]
        hidden = self._hidden(batch)
        valid = batch.get(Columns.LOSS_MASK)
        if valid is None or bool(valid.all()):
            logits, values, belief = self.net.forward_all(obs, mask, hidden)
        else:
            valid = valid.bool()
            part = self.net.forward_all(
                obs[valid], mask[valid], None if hidden is None else hidden[valid]
            )
            logits = part[0].new_zeros((len(obs), part[0].shape[-1])).index_put((valid,), part[0])
            values = part[1].new_zeros(len(obs)).index_put((valid,), part[1])
            belief = part[2]
        out = {Columns.ACTION_DIST_INPUTS: masked_logits(logits, mask), Columns.EMBEDDINGS: values}
        if belief is not None:
            out[BELIEF_LOSS] = belief
        return out

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        if embeddings is not None:
            return embeddings
        obs = batch[Columns.OBS]
        return self.net(obs[OBS_KEY], obs[MASK_KEY], self._hidden(batch))[1]


# ----------------------------------------------------------------------------- the recipe's loss
@dataclass
class LossCoefs:
    """The weights of :func:`recipe_loss` (the ``train/ppo.py`` names)."""

    clip_coef: float = 0.2
    ent_coef: float = 0.03
    vf_coef: float = 0.5
    belief_coef: float = 0.5
    teacher_bid_floor: float = 0.3
    norm_adv: bool = True


LOSS_STATS = ("loss_policy", "loss_value", "entropy", "approx_kl", "clipfrac",
              "loss_belief", "loss_teacher")  # fmt: skip
"""The diagnostics :func:`recipe_loss` returns (``train/ppo.py``'s metrics names)."""


def recipe_loss(
    logits: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    actions: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    value_targets: torch.Tensor,
    teacher_actions: torch.Tensor | None,
    belief_loss: torch.Tensor | None,
    coefs: LossCoefs,
    teacher_w: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``train/ppo.py``'s loss (``ppo_loss``) on rows of RLlib's batch: clipped surrogate on
    (per-minibatch normalised) advantages, ``0.5`` x squared error to the value targets, the
    masked entropy bonus, ``belief_coef`` x the belief loss, and the kickstarting term: the
    cross-entropy of the teacher's action (its one-hot policy's KL to ours) at the rows where
    it was asked (``teacher_actions >= 0``), weighted ``teacher_w``, at least
    ``teacher_bid_floor`` on bidding and doubling rows. Returns the loss and
    :data:`LOSS_STATS` (nan for an absent term)."""
    all_logp = masked_log_probs(logits, mask)
    new_logp = all_logp.gather(-1, actions.long()[:, None]).squeeze(-1)
    entropy = masked_entropy(logits, mask).mean()
    log_ratio = new_logp - old_logp
    ratio = log_ratio.exp()
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clipfrac = ((ratio - 1.0).abs() > coefs.clip_coef).float().mean()
    a = advantages
    if coefs.norm_adv and len(a) > 1:
        a = (a - a.mean()) / (a.std() + 1e-8)
    clipped = ratio.clamp(1 - coefs.clip_coef, 1 + coefs.clip_coef)
    pg_loss = torch.max(-a * ratio, -a * clipped).mean()
    v_loss = 0.5 * ((values - value_targets) ** 2).mean()
    loss = pg_loss - coefs.ent_coef * entropy + coefs.vf_coef * v_loss
    nan = torch.tensor(math.nan)
    if belief_loss is not None:
        loss = loss + coefs.belief_coef * belief_loss
    imitation = nan
    floor = coefs.teacher_bid_floor
    if teacher_actions is not None and (teacher_w > 0 or floor > 0):
        asked = teacher_actions >= 0
        if bool(asked.any()):
            teach = teacher_actions[asked].long()
            ce = -all_logp[asked].gather(-1, teach[:, None]).squeeze(-1)
            bids = bidding_rows(mask[asked].bool())  # a uint8 mask: ~ would be bitwise
            weight = torch.where(bids, max(teacher_w, floor), teacher_w)
            imitation = ce.mean()
            loss = loss + (weight * ce).mean()
    parts = (pg_loss, v_loss, entropy, approx_kl, clipfrac,
             nan if belief_loss is None else belief_loss, imitation)  # fmt: skip
    return loss, dict(zip(LOSS_STATS, parts, strict=True))


RECIPE_KEY = "butifarra_recipe"
"""Key of the recipe (:class:`LossCoefs` and the schedules) in ``learner_config_dict``."""


class RecipeLearner(PPOTorchLearner):
    """RLlib's PPO learner with ``train/ppo.py``'s loss (:func:`recipe_loss`: belief and
    teacher terms, its value loss and advantage normalisation), Adam with ``eps=1e-5``, and
    the budget's schedules: the driver calls :meth:`set_progress` before each iteration
    (annealed step size, imitation weight)."""

    def build(self) -> None:
        recipe = dict(self.config.learner_config_dict.get(RECIPE_KEY, {}))
        self.coefs = LossCoefs(**recipe.get("coefs", {}))
        self.schedule: dict[str, Any] = dict(recipe.get("schedule", {}))
        self.teacher_w = 0.0
        super().build()
        self.set_progress(0.0)

    def configure_optimizers_for_module(self, module_id: str, config: Any = None) -> None:
        """Adam as ``train/ppo.py`` has it (``eps=1e-5``), without an RLlib step-size
        schedule (:meth:`set_progress` sets the step size)."""
        params = self.get_parameters(self.module[module_id])
        optimizer = torch.optim.Adam(params, lr=float(self.config.lr), eps=1e-5)
        self.register_optimizer(module_id=module_id, optimizer=optimizer, params=params)

    def set_progress(self, progress: float) -> dict[str, float]:
        """Set the step size and the imitation weight for ``progress`` (0 to 1) of the
        budget spent; returns them (``learning_rate``, ``teacher_weight``)."""
        sch = self.schedule
        lr = annealed_lr(
            float(sch.get("learning_rate", self.config.lr)), float(sch.get("lr_final", 0.0)),
            bool(sch.get("anneal_lr", False)), progress,
        )  # fmt: skip
        self.teacher_w = teacher_weight(
            sch.get("teacher"), float(sch.get("teacher_coef", 0.0)),
            float(sch.get("teacher_until", 0.0)), progress,
        )  # fmt: skip
        for module_id in self.module.keys():  # noqa: SIM118 - a MultiRLModule is not a dict
            for _, optimizer in self.get_optimizers_for_module(module_id):
                for group in optimizer.param_groups:
                    group["lr"] = lr
        return {"learning_rate": lr, "teacher_weight": self.teacher_w}

    def compute_loss_for_module(
        self, *, module_id: str, config: Any, batch: dict[str, Any], fwd_out: dict[str, Any]
    ) -> torch.Tensor:
        valid = batch.get(Columns.LOSS_MASK)
        rows = slice(None) if valid is None else valid.bool()
        teach = batch.get(TEACHER_ACTION)
        loss, parts = recipe_loss(
            fwd_out[Columns.ACTION_DIST_INPUTS][rows],
            fwd_out[Columns.EMBEDDINGS][rows],
            batch[Columns.OBS][MASK_KEY][rows],
            batch[Columns.ACTIONS][rows],
            batch[Columns.ACTION_LOGP][rows],
            batch[Postprocessing.ADVANTAGES][rows],
            batch[Postprocessing.VALUE_TARGETS][rows],
            None if teach is None else teach[rows],
            fwd_out.get(BELIEF_LOSS),
            self.coefs,
            self.teacher_w,
        )
        values, targets = (
            fwd_out[Columns.EMBEDDINGS][rows],
            batch[Postprocessing.VALUE_TARGETS][rows],
        )
        stats = {k: v.detach() for k, v in parts.items()}
        stats |= {
            POLICY_LOSS_KEY: stats["loss_policy"],
            VF_LOSS_KEY: stats["loss_value"],
            ENTROPY_KEY: stats["entropy"],
            LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY: explained_variance(targets, values.detach()),
            "teacher_weight": torch.tensor(self.teacher_w),
        }
        self.metrics.log_dict(stats, key=module_id, window=1)
        return loss


class FixedAgentModule(RLModule):
    """A fixed agent of the registry (``model_config["agent"]``: ``rule``, the batched
    rule-based agent, or ``random``), seeded by ``model_config["seed"]``, as a frozen RLlib
    module."""

    def setup(self) -> None:
        cfg = dict(self.model_config or {})
        self.agent = make_agent(str(cfg.get("agent", "rule")), seed=int(cfg.get("seed", 0)))

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs = np.asarray(batch[Columns.OBS][OBS_KEY]).astype(np.uint8)
        mask = np.asarray(batch[Columns.OBS][MASK_KEY]).astype(np.int8)
        return {Columns.ACTIONS: torch.from_numpy(self.agent.act_batch(obs, mask))}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        raise NotImplementedError("a fixed agent's module is not trainable")


# ----------------------------------------------------------------------------- league
def snapshot_id(i: int) -> str:
    return f"snapshot_{i}"


class LeagueMapping:
    """RLlib ``policy_mapping_fn``: per hand (episode), all four seats play the shared policy
    (probability ``probs[0]``), or one team does and the other is a snapshot, the rule-based
    agent or the random agent (``probs[1:]``, the order of ``train/ppo.py``'s opponents).
    Draws come from a seeded generator, once per episode, so a hand's four agents agree; the
    last draws are cached by episode id."""

    KINDS = ("self", "snapshot", RULE_POLICY, RANDOM_POLICY)

    def __init__(self, probs: tuple[float, ...], snapshots: int, seed: int) -> None:
        if len(probs) != len(self.KINDS):
            raise ValueError(f"probs must be {len(self.KINDS)} shares {self.KINDS}, got {probs}")
        self.probs = np.asarray(probs, float)
        self.snapshots = snapshots
        self.seed = seed
        self._rng: np.random.Generator | None = None
        self._draws: dict[str, tuple[int, str]] = {}

    def __call__(self, agent: Any, episode: Any = None, **kwargs: Any) -> str:
        key = getattr(episode, "id_", None) or ""
        if key not in self._draws:
            if self._rng is None:
                self._rng = np.random.default_rng(self.seed)
            self._draws[key] = self._draw(self._rng)
            if len(self._draws) > 100_000:
                self._draws.pop(next(iter(self._draws)))
        team, opponent = self._draws[key]
        _, seat = parse_agent_id(agent)
        return SHARED_POLICY if team < 0 or seat % 2 == team else opponent

    def _draw(self, rng: np.random.Generator) -> tuple[int, str]:
        kind = int(rng.choice(len(self.KINDS), p=self.probs))
        team = int(rng.integers(2))
        if kind == 0:
            return -1, SHARED_POLICY
        if kind == 1:
            return team, snapshot_id(int(rng.integers(self.snapshots)))
        return team, self.KINDS[kind]


# ----------------------------------------------------------------------------- RLlib config
FIXED_AGENTS = (RULE_POLICY, RANDOM_POLICY)
"""Module ids of the fixed agents (their registry names)."""


def module_ids(s: Settings) -> list[str]:
    snapshots = (snapshot_id(i) for i in range(s.snapshot_pool))
    return [SHARED_POLICY, *snapshots, RULE_POLICY, RANDOM_POLICY]


def build_config(s: Settings) -> PPOConfig:
    """The PPO config of a run (RLlib's new API stack), for any :data:`PATHS` entry."""
    runners = s.num_env_runners
    net: dict[str, Any] = arch_of(s) | {"teacher": s.teacher}
    specs = {mid: RLModuleSpec(module_class=ActorCriticModule, model_config=net)
             for mid in module_ids(s) if mid not in FIXED_AGENTS}  # fmt: skip
    for mid in FIXED_AGENTS:
        fixed = {"agent": mid, "seed": s.seed}
        specs[mid] = RLModuleSpec(module_class=FixedAgentModule, model_config=fixed)
    env_config: dict[str, Any] = {"reward_scale": s.reward_scale, "seed": s.seed}
    per_runner = math.ceil(s.train_batch / max(1, runners))
    if s.env_path == "pettingzoo":
        env: type = PettingZooHandEnv
        runner_options: dict[str, Any] = {"batch_mode": "truncate_episodes"}
    else:
        env = BatchedHandsEnv
        env_config["num_hands"] = s.num_hands
        env_config["obs_dtype"] = "uint8"  # ActorCritic casts and scales: 4x smaller episodes
        runner_options = {"batch_mode": "complete_episodes"}
        if s.env_path == "fast":
            runner_options["env_runner_cls"] = BatchedHandsEnvRunner
    return (
        PPOConfig()
        .environment(env, env_config=env_config, disable_env_checking=True)
        .env_runners(
            num_env_runners=runners,
            num_envs_per_env_runner=1,
            num_cpus_per_env_runner=1,
            rollout_fragment_length=per_runner,
            sample_timeout_s=600.0,
            **runner_options,
        )
        .learners(num_learners=s.num_learners, num_gpus_per_learner=s.gpus_per_learner)
        .training(
            train_batch_size_per_learner=s.train_batch,
            minibatch_size=s.minibatch,
            num_epochs=s.update_epochs,
            lr=s.learning_rate,
            gamma=s.gamma,
            lambda_=s.gae_lambda,
            clip_param=s.clip_coef,
            entropy_coeff=s.ent_coef,
            vf_loss_coeff=s.vf_coef,
            vf_clip_param=1e6,  # returns are scaled; clipping the squared error drops gradients
            grad_clip=s.max_grad_norm or None,
            use_kl_loss=False,
            learner_class=RecipeLearner,
            learner_config_dict={RECIPE_KEY: recipe_of(s)},
        )
        .multi_agent(
            policies=module_ids(s),
            policy_mapping_fn=LeagueMapping(s.opponent_probs(), s.snapshot_pool, s.seed),
            policies_to_train=[SHARED_POLICY],
            count_steps_by="agent_steps",
        )
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=specs))
        .debugging(seed=s.seed, log_level="ERROR")
    )


def arch_of(s: Settings) -> dict[str, Any]:
    """The network options of a run (:data:`MODULE_DEFAULTS`' keys)."""
    return {k: getattr(s, k) for k in MODULE_DEFAULTS}


def recipe_of(s: Settings) -> dict[str, Any]:
    """What :class:`RecipeLearner` reads from ``learner_config_dict``: the loss weights and
    the schedules' settings."""
    coefs = {f.name: getattr(s, f.name) for f in fields(LossCoefs)}
    names = ("learning_rate", "anneal_lr", "lr_final", "teacher", "teacher_coef", "teacher_until")
    return {"coefs": coefs, "schedule": {k: getattr(s, k) for k in names}}


def decisions_sampled(result: Mapping[str, Any]) -> int:
    """Decisions (agent steps of every seat) the env runners sampled in one iteration."""
    steps = result.get("env_runners", {}).get("num_agent_steps_sampled", {})
    values = steps.values() if isinstance(steps, Mapping) else [steps]
    return int(sum(float(v) for v in values if not math.isnan(float(v))))


def learner_weights(algo: Algorithm, module_id: str) -> dict[str, Any]:
    """The learner's weights of one module (the ones training updates: ``get_module`` would
    answer from an env runner, which may be stale or remote)."""
    return algo.learner_group.get_weights(module_ids=[module_id])[module_id]


def shared_model(algo: Algorithm, s: Settings) -> ActorCritic:
    """The shared policy as a plain :class:`ActorCritic` on the CPU (for the arena and the
    export), from the learner's weights."""
    net = ActorCritic(**arch_of(s))
    prefix = "net."
    state = {
        k[len(prefix) :]: torch.as_tensor(np.asarray(v))
        for k, v in learner_weights(algo, SHARED_POLICY).items()
        if k.startswith(prefix)
    }
    net.load_state_dict(state)
    return net.eval()


def copy_module(algo: Algorithm, source: str, targets: list[str]) -> None:
    """Copy module ``source``'s weights into ``targets`` on the learner and every runner."""
    modules = dict.fromkeys(targets, learner_weights(algo, source))
    algo.set_state({"learner_group": {"learner": {"rl_module": modules}}})
    # Straight to every runner: ``sync_weights`` would skip them, as their weights are
    # already as new (by sequence number) as the learner's.
    algo.env_runner_group.foreach_env_runner(
        lambda runner: runner.set_state({"rl_module": modules}), local_env_runner=True
    )


def runner_nodes(algo: Algorithm) -> list[str]:
    """The Ray node id of each remote env runner (the driver's node for local sampling)."""
    group = algo.env_runner_group
    if group.num_remote_workers() == 0:
        return [ray.get_runtime_context().get_node_id()]
    return list(
        group.foreach_env_runner(
            lambda runner: ray.get_runtime_context().get_node_id(), local_env_runner=False
        )
    )


# ----------------------------------------------------------------------------- Ray session
@contextlib.contextmanager
def ray_session(s: Settings) -> Iterator[None]:
    """Join ``--address``, or start a local Ray that stays on this machine and dies with
    this process (:func:`train.local_ray.local_cluster`: every daemon on 127.0.0.1, token
    auth, a supervisor that stops it also after a ``kill -9`` of the driver); disconnect
    (local: stop it) at the end. A loopback ``--address`` is kept as given (Ray would
    replace it by the outward address, where a loopback-only cluster does not listen).
    Inside a process that already runs Ray, use that one and leave it."""
    if ray.is_initialized():
        yield
        return
    if not s.address:
        num_cpus = max(os.cpu_count() or 1, s.num_env_runners + s.num_learners)
        with local_cluster(num_cpus, s.object_store_mb * 2**20):
            yield
        return
    keep_loopback()  # no-op unless the address is a loopback one
    ray.init(address=s.address, logging_level="ERROR", log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


# ----------------------------------------------------------------------------- run files
SETTINGS_NAME = "settings.json"
CHECKPOINT_DIR = "checkpoint"
PREVIOUS_DIR = "checkpoint.prev"
PROGRESS_NAME = "butifarra_progress.json"
CSV_NAME = "metrics.csv"
CSV_FIELDS = (
    "iteration", "decisions", "hands", "minutes", "decisions_per_s", "sample_s", "learn_s",
    "episode_len_mean", "train_vs_snapshot", "train_vs_rule", "policy_loss", "vf_loss",
    "entropy", "vf_explained_var", "eval_rule_mean", "eval_rule_ci95", "eval_s",
    "train_vs_random", "iteration_s", "runner_sample_s", "learning_rate", "teacher_weight",
    "loss_belief", "loss_teacher", "approx_kl", "clipfrac",
)  # fmt: skip
"""metrics.csv columns (new ones go last: a resumed run's older file gets today's header).
``sample_s``, ``learn_s``, ``iteration_s``: this iteration's wall seconds (:class:`PhaseTimer`,
``algo.train()``); ``decisions``: every seat's decisions played (learner and opponents),
``train_batch`` counts the learner's."""
TB_GROUPS = {k: "eval" if k.startswith("eval_") else "train" for k in CSV_FIELDS[1:]}
"""TensorBoard tag group of each logged metric (``iteration`` is the step)."""


@dataclass
class Progress:
    """What a checkpoint adds to RLlib's state: the loop's counters and the run's id."""

    run_id: str
    iteration: int = 0
    decisions: int = 0
    hands: int = 0
    elapsed_s: float = 0.0
    snapshots_taken: int = 0


def read_progress(folder: Path) -> Progress:
    """The progress file of a checkpoint folder; ValueError naming it when unreadable."""
    path = folder / PROGRESS_NAME
    try:
        data = json.loads(path.read_text())
        return Progress(**{f.name: data[f.name] for f in fields(Progress)})
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"checkpoint {str(folder)!r} is incomplete: {exc}") from exc


def newest_checkpoint(out_dir: Path) -> tuple[Path | None, Progress | None, list[str]]:
    """``checkpoint/``, else ``checkpoint.prev/``, with its progress and the reasons a newer
    one was passed over; ``(None, None, [])`` when the run has no checkpoint yet; RunRefused
    when it has some but none is readable."""
    progress, folder, problems = newest_readable(
        out_dir / CHECKPOINT_DIR, out_dir / PREVIOUS_DIR, read_progress
    )
    return folder, progress, problems


def save_checkpoint(
    algo: Algorithm, out_dir: Path, progress: Progress, newest_unreadable: bool = False
) -> Path:
    """RLlib checkpoint plus progress, rotated into place (:func:`train.run_folder.
    save_rotating_folder`): the newest becomes ``checkpoint.prev/`` (set aside instead when
    ``newest_unreadable``) and the new one ``checkpoint/``. Every moment one complete
    checkpoint exists (``checkpoint/``, else ``checkpoint.prev/``)."""

    def write(folder: Path) -> None:
        algo.save_to_path(str(folder.resolve()))
        atomic_write_text(folder / PROGRESS_NAME, json.dumps(asdict(progress), indent=1))

    current = out_dir / CHECKPOINT_DIR
    kept = save_rotating_folder(write, current, out_dir / PREVIOUS_DIR, newest_unreadable)
    if kept is not None:
        print(f"note: the unreadable {str(current)!r} was kept as {str(kept)!r}", file=sys.stderr)
    return current


def export_agent(algo: Algorithm, s: Settings, progress: Progress) -> Path:
    """The shared policy as a ``butifarra-ppo`` agent checkpoint at ``s.export``."""
    net = shared_model(algo, s)
    extra = {
        "update": progress.iteration,
        "global_step": progress.decisions,
        "elapsed_s": progress.elapsed_s,
        "run_id": progress.run_id,
        "trainer": "rllib",
    }
    save_torch(model_payload(net, asdict(s), extra), s.export)
    return s.export


# ----------------------------------------------------------------------------- evaluation
def evaluate(algo: Algorithm, s: Settings) -> dict[str, float]:
    """The greedy shared policy against the rule-based agent over ``eval_deals`` duplicate
    deals (``agents.evaluation.arena.duel``): mean points per hand and the 95% CI half-width."""
    t0 = time.perf_counter()
    net = shared_model(algo, s)
    result = duel(PPOAgent.from_model(net, seed=0), "rule", n_deals=s.eval_deals, seed=s.eval_seed)
    return {
        "eval_rule_mean": result.mean,
        "eval_rule_ci95": result.ci_half_width,
        "eval_s": time.perf_counter() - t0,
    }


def iteration_metrics(result: Mapping[str, Any], reward_scale: float) -> dict[str, float]:
    """The figures of one RLlib result worth a CSV column; ``train_vs_*`` are the shared
    policy's points per hand against each kind of opponent (sampled play);
    ``runner_sample_s`` the slowest env runner's ``sample()`` wall time in this iteration
    (fast path only). RLlib's own timers are moving averages: not used (see
    :class:`PhaseTimer`)."""
    runners = result.get("env_runners", {})
    learner = result.get("learners", {}).get(SHARED_POLICY, {})
    modules = runners.get("module_episode_returns_mean", {})
    out = {
        "episode_len_mean": runners.get("episode_len_mean", math.nan),
        "policy_loss": learner.get("policy_loss", math.nan),
        "vf_loss": learner.get("vf_loss", math.nan),
        "entropy": learner.get("entropy", math.nan),
        "vf_explained_var": learner.get("vf_explained_var", math.nan),
        "runner_sample_s": runners.get(SAMPLE_WALL_S, math.nan),
    }
    for key in ("loss_belief", "loss_teacher", "approx_kl", "clipfrac", "teacher_weight"):
        out[key] = learner.get(key, math.nan)
    for kind in ("snapshot", RULE_POLICY, RANDOM_POLICY):
        rewards = [v for k, v in modules.items() if k.startswith(kind)]
        if rewards:  # an opponent module's return is its two seats' rewards: minus ours
            out[f"train_vs_{kind}"] = -float(np.mean(rewards)) / 2 / reward_scale
    return {k: float(v) for k, v in out.items()}


class PhaseTimer:
    """Wall seconds of this iteration's two phases, measured in the driver (RLlib's timers
    are moving averages over iterations): sampling, from the start of ``training_step``
    to the learner update (the runners play and their episodes arrive), and learning
    (``learner_group.update``). Installed on ``algo``'s instance; :meth:`take` reads and
    resets."""

    def __init__(self, algo: Algorithm) -> None:
        self.sample_s = self.learn_s = 0.0
        self._started: float | None = None
        training_step, update = algo.training_step, algo.learner_group.update

        def timed_step(*args: Any, **kwargs: Any) -> Any:
            self._started = time.perf_counter()
            return training_step(*args, **kwargs)

        def timed_update(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            if self._started is not None:
                self.sample_s += t0 - self._started
                self._started = None
            try:
                return update(*args, **kwargs)
            finally:
                self.learn_s += time.perf_counter() - t0

        algo.training_step = timed_step  # type: ignore[method-assign]
        algo.learner_group.update = timed_update  # type: ignore[method-assign]

    def take(self) -> dict[str, float]:
        out = {"sample_s": self.sample_s, "learn_s": self.learn_s}
        self.sample_s = self.learn_s = 0.0
        return out


# ----------------------------------------------------------------------------- the loop
class Run:
    """One run. The constructor checks everything (settings, run folder, checkpoints, export
    path, budget) and raises RunRefused before anything is written; :meth:`train` then runs
    in the caller's Ray session."""

    def __init__(self, s: Settings) -> None:
        s.validate()
        out_dir = s.out_dir
        check_writable_folder(out_dir, "run folder")
        folder: Path | None = None
        progress: Progress | None = None
        problems: list[str] = []
        if s.resume and (out_dir / SETTINGS_NAME).exists():
            s = self._resumed_settings(s, out_dir)
            folder, progress, problems = newest_checkpoint(out_dir)
            if folder is None and s.export.exists():
                raise RunRefused(self._no_checkpoint_message(s, out_dir))
        elif s.resume:
            print(f"note: {str(out_dir)!r} holds no run yet: starting one", file=sys.stderr)
        elif found := existing_run_files(out_dir, prefixes=("",)):  # any file at all
            raise RunRefused(
                f"run folder {str(out_dir)!r} already holds a run ({', '.join(found[:3])}); "
                f"pass --resume to continue it, or another --run-name for a new run "
                f"(nothing was changed)"
            )
        self.progress = progress or Progress(run_id=uuid.uuid4().hex)
        own = [out_dir / CSV_NAME, out_dir / SETTINGS_NAME]
        check_export_path(str(s.export), self.progress.run_id, own)
        if self.budget_spent(s):
            raise RunRefused(self._budget_spent_message(s, out_dir))
        self.s, self.out_dir, self.resume_from, self.problems = s, out_dir, folder, problems
        self.newest_unreadable = (
            folder is not None
            and folder.name == PREVIOUS_DIR
            and (out_dir / CHECKPOINT_DIR).exists()
        )

    @staticmethod
    def _resumed_settings(s: Settings, out_dir: Path) -> Settings:
        """The run's own settings from its settings.json, except RESUME_OVERRIDES (taken from
        the command line). RunRefused for a file this version cannot read: unreadable, or
        with settings it does not know (an older version's names, :data:`RENAMED`)."""
        path = out_dir / SETTINGS_NAME
        try:
            saved = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise RunRefused(f"cannot resume: {str(path)!r} is unreadable ({exc})") from exc
        if not isinstance(saved, dict):
            raise RunRefused(f"cannot resume: {str(path)!r} does not hold a settings object")
        known = {f.name for f in fields(Settings)}
        unknown = sorted(set(saved) - known)
        if unknown:
            named = [f"{k!r} (now {RENAMED[k]!r})" if k in RENAMED else repr(k) for k in unknown]
            raise RunRefused(
                f"cannot resume: {str(path)!r} holds settings this train.rllib_ppo does not "
                f"know: {', '.join(named)}; it was written by an older version (settings now "
                f"use train/ppo.py's names), which can resume it; or start a new run "
                f"(nothing was changed)"
            )
        own = {k: v for k, v in saved.items() if k not in RESUME_OVERRIDES}
        own = {k: v for k, v in BEFORE_RECIPE.items() if k not in saved} | own
        merged = dataclasses.replace(s, **own)
        merged.validate()
        return merged

    @staticmethod
    def _no_checkpoint_message(s: Settings, out_dir: Path) -> str:
        """Why a ``--resume`` of a run whose checkpoints are gone (but that saved before:
        its export is there) is refused, what the folder holds and what to do."""
        held = sorted(p.name + ("/" if p.is_dir() else "") for p in out_dir.iterdir())
        return (
            f"cannot resume: run folder {str(out_dir)!r} has no checkpoint to resume from "
            f"(neither {CHECKPOINT_DIR}/ nor {PREVIOUS_DIR}/; it holds {', '.join(held)}), "
            f"although the run saved before: its agent {str(s.export)!r} is from its last "
            f"save. Put the checkpoint folders back to continue, or start a new run (another "
            f"--run-name; the export stays playable: butifarra arena ppo:{s.export} rule) "
            f"(nothing was changed)"
        )

    def _budget_spent_message(self, s: Settings, out_dir: Path) -> str:
        """Why a ``--resume`` of a finished run is refused (``train/ppo.py``'s words)."""
        p, spent = self.progress, []
        if s.total_updates and p.iteration >= s.total_updates:
            spent.append(f"update {p.iteration} of --total-updates {s.total_updates}")
        if s.total_minutes and p.elapsed_s >= s.total_minutes * 60:
            spent.append(f"{p.elapsed_s / 60:.2f} of --total-minutes {s.total_minutes:g}")
        return (
            f"run {str(out_dir)!r} has already spent its budget ({' and '.join(spent)}); to "
            f"train it further, --resume with a larger --total-updates or --total-minutes "
            f"(nothing was changed)"
        )

    def budget_spent(self, s: Settings | None = None) -> bool:
        s = s or self.s
        p = self.progress
        return bool(s.total_updates and p.iteration >= s.total_updates) or bool(
            s.total_minutes and p.elapsed_s >= s.total_minutes * 60
        )

    def resume_command(self) -> str:
        """The command line that continues this run with the same budget, cluster, threads
        and export."""
        s, default = self.s, Settings()
        args = ["--run-dir", s.run_dir, "--run-name", s.name, "--total-updates",
                str(s.total_updates), "--total-minutes", f"{s.total_minutes:g}"]  # fmt: skip
        for name in ("address", "num_env_runners", "num_learners", "gpus_per_learner",
                     "torch_threads", "object_store_mb", "export_path"):  # fmt: skip
            value = getattr(s, name)
            if value != getattr(default, name):
                args += [f"--{name.replace('_', '-')}", f"{value:g}" if isinstance(value, float)
                         else str(value)]  # fmt: skip
        return resume_command("train.rllib_ppo", args)

    def train(self) -> dict[str, float]:
        """Train until the budget is spent (in the Ray session of the caller); returns the
        last metrics row. Ctrl-C: finish the iteration, save, raise TrainingInterrupted."""
        s, out_dir, p = self.s, self.out_dir, self.progress
        out_dir.mkdir(parents=True, exist_ok=True)
        clean_stale_folders(out_dir / CHECKPOINT_DIR)
        clean_stale_temps(out_dir)
        if not s.resume or not (out_dir / SETTINGS_NAME).exists():
            atomic_write_text(out_dir / SETTINGS_NAME, json.dumps(asdict(s), indent=1))
        if self.problems:
            print(f"warning: {'; '.join(self.problems)}: resuming from {self.resume_from}",
                  file=sys.stderr)  # fmt: skip
        torch.set_num_threads(s.torch_threads or min(2, os.cpu_count() or 1))
        algo = build_config(s).build_algo()
        self.timer = PhaseTimer(algo)
        try:
            return self._loop(algo, s, out_dir, p)
        finally:
            algo.stop()

    def _save(self, algo: Algorithm, s: Settings, out_dir: Path, p: Progress) -> None:
        save_checkpoint(algo, out_dir, p, self.newest_unreadable)
        self.newest_unreadable = False
        export_agent(algo, s, p)

    def _loop(self, algo: Algorithm, s: Settings, out_dir: Path, p: Progress) -> dict[str, float]:
        if self.resume_from is not None:
            algo.restore_from_path(str(self.resume_from.resolve()))
        else:
            copy_module(algo, SHARED_POLICY, [snapshot_id(i) for i in range(s.snapshot_pool)])
        nodes = runner_nodes(algo)
        atomic_write_text(out_dir / "cluster.json", json.dumps({"runner_nodes": nodes}))
        print(f"{s.name}: iteration {p.iteration}, {len(nodes)} env runner(s) on "
              f"{len(set(nodes))} node(s)", file=sys.stderr, flush=True)  # fmt: skip
        repair_csv(out_dir / CSV_NAME, CSV_FIELDS, p.iteration, key="iteration")
        writer = self._writer(out_dir, p.iteration, s.tensorboard)
        metrics: dict[str, float] = {}
        saved_at = p.iteration
        with deferred_interrupt() as interrupted:
            while not self.budget_spent() and not interrupted:
                metrics = self._one_iteration(algo, s, p)
                self._log(metrics, out_dir, writer, p.iteration)
                if p.iteration % s.checkpoint_every == 0 or self.budget_spent() or interrupted:
                    self._save(algo, s, out_dir, p)
                    saved_at = p.iteration
            if saved_at != p.iteration:
                self._save(algo, s, out_dir, p)
        if writer is not None:
            writer.close()
        if interrupted:
            raise TrainingInterrupted(
                f"interrupted: saved iteration {p.iteration} in {str(out_dir / CHECKPOINT_DIR)!r}"
                f" and {str(s.export)!r}; continue with: {self.resume_command()}"
            )
        return metrics

    def _one_iteration(self, algo: Algorithm, s: Settings, p: Progress) -> dict[str, float]:
        t0 = time.perf_counter()
        # RLlib shuffles minibatches with numpy's global generator: reseed it from (seed,
        # iteration), so that a resumed run shuffles as an uninterrupted one does.
        seed = np.random.SeedSequence([s.seed, p.iteration]).generate_state(1)[0]
        np.random.seed(seed)  # noqa: NPY002 - the legacy global generator is what RLlib uses
        schedule = self._schedules(algo, s, p)
        result = algo.train()
        dt = time.perf_counter() - t0
        decisions = decisions_sampled(result)
        p.iteration += 1
        p.decisions += decisions
        p.hands += int(result.get("env_runners", {}).get("num_episodes", 0) or 0)
        metrics = iteration_metrics(result, s.reward_scale) | self.timer.take() | schedule
        metrics |= {"iteration": p.iteration, "decisions": p.decisions, "hands": p.hands}
        metrics["iteration_s"] = dt
        metrics["decisions_per_s"] = decisions / max(dt, 1e-9)
        if s.snapshot_every and p.iteration % s.snapshot_every == 0:
            copy_module(algo, SHARED_POLICY, [snapshot_id(p.snapshots_taken % s.snapshot_pool)])
            p.snapshots_taken += 1
        if s.eval_every and p.iteration % s.eval_every == 0:
            metrics |= evaluate(algo, s)
        p.elapsed_s += time.perf_counter() - t0
        metrics["minutes"] = p.elapsed_s / 60
        return metrics

    def _schedules(self, algo: Algorithm, s: Settings, p: Progress) -> dict[str, float]:
        """Before an iteration: the learners' step size and imitation weight for the share
        of the budget spent (``train/ppo.py``'s ``budget_progress``), and, when it changes,
        which decisions the env runners ask the teacher about (all while the imitation
        weight is above 0, then the bidding and doubling ones)."""
        progress = budget_progress(s.total_updates, s.total_minutes, p.iteration, p.elapsed_s)
        calls = algo.learner_group.foreach_learner(lambda learner: learner.set_progress(progress))
        row = [call.get() for call in calls][0]  # the same on every learner
        bids_only = s.teacher is not None and row["teacher_weight"] <= 0
        if bids_only != getattr(self, "_bids_only", None):
            algo.env_runner_group.foreach_env_runner(
                lambda runner: getattr(runner, "set_teacher_scope", lambda b: None)(bids_only),
                local_env_runner=True,
            )
            self._bids_only = bids_only
        return {k: float(v) for k, v in row.items()}

    @staticmethod
    def _writer(out_dir: Path, iteration: int, enabled: bool) -> SummaryWriter | None:
        try:
            return open_tensorboard(out_dir, iteration, enabled)
        except ImportError:  # tensorboard is optional ([train] extra)
            return None

    @staticmethod
    def _log(
        metrics: Mapping[str, float], out_dir: Path, writer: SummaryWriter | None, step: int
    ) -> None:
        append_csv(out_dir / CSV_NAME, CSV_FIELDS, metrics)
        if writer is not None:
            log_scalars(writer, metrics, TB_GROUPS, step)
            writer.flush()


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> None:
    """Parse, check, train. Bad flags and runs that cannot start as asked: one ``error:``
    line, exit status 2, nothing changed. Ctrl-C: a final checkpoint, how to resume, 130."""
    try:
        run = Run(parse_settings(argv))
    except ValueError as exc:
        print("error: " + " ".join(str(exc).split()), file=sys.stderr)
        raise SystemExit(2) from None
    try:
        with ray_session(run.s):
            metrics = run.train()
    except TrainingInterrupted as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(130) from None
    except KeyboardInterrupt:
        print(f"interrupted at once: no final checkpoint; continue with: {run.resume_command()}",
              file=sys.stderr)  # fmt: skip
        raise SystemExit(130) from None
    shown = ("iteration", "decisions", "minutes", "decisions_per_s", "eval_rule_mean")
    print({k: round(metrics[k], 3) for k in shown if k in metrics})
    print(f"export: {run.s.export}")


if __name__ == "__main__":
    main()
