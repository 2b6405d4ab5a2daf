"""Self-play PPO for Butifarra on Ray RLlib's new API stack, on one machine or a cluster.

One shared policy plays all four seats (action masking inside the model), optionally
against frozen snapshots of itself and the rule-based agent, chosen per hand through RLlib's
policy mapping. The network is the project's own :class:`agents.ppo_net.ActorCritic`
wrapped as an RLModule, so the export is a ``butifarra-ppo`` checkpoint:
``butifarra arena ppo:runs/NAME/export.pt rule`` plays it, as notebooks can.

It reads top to bottom: settings -> RLModules -> league mapping -> the RLlib config ->
the Ray session -> run files (checkpoints, export, logs) -> evaluation -> the loop -> main.

Usage::

    python -m train.rllib_ppo --minutes 10                       # local Ray on this machine
    python -m train.rllib_ppo --address HEAD:6379 --num-env-runners 16 --minutes 60
    python -m train.rllib_ppo --run-name NAME --resume           # continue a run

A run lives in ``runs/NAME/``: ``settings.json`` (its hyper-parameters), RLlib checkpoints
``checkpoint/`` and ``checkpoint.prev/``, ``export.pt`` (the agent), ``metrics.csv`` and
TensorBoard events (decisions/s, losses, the arena's duplicate-deal results vs the
rule-based agent). A new run never starts in a folder that holds one; ``--resume``
continues it (from ``checkpoint.prev/`` if the newest is unreadable). Ctrl-C finishes the
iteration, saves, and says how to resume. Guide: ``docs/distributed.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import json
import math
import os
import shlex
import shutil
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import ray
import torch
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
from ray.rllib.core.rl_module.rl_module import RLModule, RLModuleSpec
from ray.rllib.core.rl_module.torch import TorchRLModule

from agents.evaluation.arena import duel
from agents.ppo_agent import PPOAgent
from agents.ppo_net import ActorCritic, masked_logits, model_payload
from agents.registry import make_agent
from butifarra_env.core.fileio import atomic_write_text
from butifarra_env.integrations.rllib import (
    MASK_KEY,
    OBS_KEY,
    SHARED_POLICY,
    BatchedHandsEnv,
    BatchedHandsEnvRunner,
    PettingZooHandEnv,
    parse_agent_id,
)
from train.ppo import (
    RunRefused,
    TrainingInterrupted,
    check_export_path,
    check_writable_folder,
    deferred_interrupt,
    save_torch,
)

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter

PATHS = ("fast", "batched", "pettingzoo")
"""How env runners sample: ``fast`` = :class:`BatchedHandsEnv` with
:class:`BatchedHandsEnvRunner` (bulk bookkeeping); ``batched`` = the same env on RLlib's own
``MultiAgentEnvRunner``; ``pettingzoo`` = one ``butifarra_v0`` hand per env (the plain path)."""
RULE_POLICY = "rule"
"""Module id of the rule-based opponent."""


# ----------------------------------------------------------------------------- settings
@dataclass
class Settings:
    """Every knob of a run; each is a flag (``python -m train.rllib_ppo --help``)."""

    run_name: str | None = None
    """Folder under run_dir; default rllib_ppo_s{seed}. --resume continues it."""
    run_dir: str = "runs"
    """Where runs live (RUN_DIR/NAME/: checkpoints, export, metrics, TensorBoard)."""
    seed: int = 1
    """Seeds RLlib (torch, numpy, env runners), the deals and the opponent draws."""
    address: str | None = None
    """Ray cluster to join (HOST:PORT or 'auto'); default: start a local Ray on 127.0.0.1."""
    env_path: str = "fast"
    """fast (batched engine, bulk episodes), batched (same env, RLlib's runner), pettingzoo."""
    num_env_runners: int = 2
    """Env runner actors (0: sample in the driver process)."""
    num_hands: int = 64
    """Hands in play at once per env runner (fast and batched paths)."""
    num_learners: int = 0
    """Learner actors (0: learn in the driver process). With GPUs: 1 per GPU."""
    gpus_per_learner: float = 0.0
    """GPUs per learner (with --num-learners 0: a GPU for the driver's learner)."""
    iterations: int = 0
    """Stop after this many training iterations in total (0: no limit)."""
    minutes: float = 10.0
    """Wall-clock budget in minutes, summed over resumes (0: no limit)."""
    train_batch: int = 8192
    """Decisions (agent steps) per training iteration, all runners together."""
    minibatch: int = 2048
    """Decisions per SGD minibatch."""
    epochs: int = 2
    """Passes over each training batch."""
    lr: float = 5e-4
    """Adam step size."""
    gamma: float = 1.0
    """Discount per own decision: 1.0, the hand's score undiscounted."""
    gae_lambda: float = 0.95
    """GAE lambda along each seat's own decisions."""
    clip: float = 0.2
    """PPO ratio clipping."""
    entropy: float = 0.01
    """Entropy bonus (over legal actions only)."""
    vf_coef: float = 0.5
    """Value-loss weight."""
    grad_clip: float = 0.5
    """Global gradient-norm clipping."""
    reward_scale: float = 1.0 / 36.0
    """Hand score difference (up to +-1152 points) times this is the reward."""
    hidden: int = 256
    """Width of the ActorCritic MLP."""
    layers: int = 2
    """Hidden layers of the ActorCritic MLP."""
    opp_self: float = 0.5
    """Share of hands in pure self-play (all four seats learn)."""
    opp_snapshot: float = 0.1
    """Share of hands against a frozen snapshot of the shared policy."""
    opp_rule: float = 0.4
    """Share of hands against the rule-based agent."""
    snapshots: int = 2
    """Frozen snapshot modules (refreshed round-robin)."""
    snapshot_every: int = 10
    """Copy the shared policy into the oldest snapshot every this many iterations."""
    eval_every: int = 20
    """Duplicate-deal evaluation against the rule-based agent every this many iterations
    (0: never)."""
    eval_deals: int = 500
    """Duplicate deals per evaluation (each played twice, seats swapped)."""
    eval_seed: int = 12345
    """Seed of the fixed evaluation deals."""
    checkpoint_every: int = 5
    """RLlib checkpoint (and export) every this many iterations, and at the end."""
    export_path: str | None = None
    """Where to write the agent checkpoint; default runs/NAME/export.pt."""
    resume: bool = False
    """Continue runs/NAME from its newest readable checkpoint."""
    torch_threads: int = 1
    """torch threads in the driver (learner and local sampling); 1 is best on shared cores."""
    object_store_mb: int = 256
    """Object store of a local Ray (ignored with --address)."""

    @property
    def name(self) -> str:
        return self.run_name or f"rllib_ppo_s{self.seed}"

    @property
    def out_dir(self) -> Path:
        return Path(self.run_dir) / self.name

    @property
    def export(self) -> Path:
        return Path(self.export_path) if self.export_path else self.out_dir / "export.pt"

    def opponent_probs(self) -> tuple[float, float, float]:
        """(self, snapshot, rule) shares, normalised."""
        p = (self.opp_self, self.opp_snapshot, self.opp_rule)
        total = sum(p)
        return (p[0] / total, p[1] / total, p[2] / total)

    def validate(self) -> None:
        """ValueError naming the first bad flag, before anything starts."""
        ints = {
            "num_hands": 1, "train_batch": 1, "minibatch": 1, "epochs": 1, "hidden": 1,
            "layers": 1, "snapshots": 1, "snapshot_every": 1, "eval_deals": 1,
            "checkpoint_every": 1, "torch_threads": 1, "object_store_mb": 64,
            "num_env_runners": 0, "iterations": 0, "eval_every": 0, "seed": 0, "eval_seed": 0,
            "num_learners": 0,
        }  # fmt: skip
        for name, low in ints.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"--{flag(name)} must be an integer >= {low}, got {v!r}")
        positive = ("lr", "clip", "reward_scale")
        for name in positive:
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"--{flag(name)} must be a finite number > 0, got {v!r}")
        for name in ("entropy", "vf_coef", "grad_clip", "minutes", "opp_self", "opp_snapshot",
                     "opp_rule", "gpus_per_learner"):  # fmt: skip
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"--{flag(name)} must be a finite number >= 0, got {v!r}")
        for name in ("gamma", "gae_lambda"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"--{flag(name)} must be in [0, 1], got {v!r}")
        if self.iterations == 0 and self.minutes == 0:
            raise ValueError("set --iterations > 0 or --minutes > 0, or the run never ends")
        if self.opp_self + self.opp_snapshot + self.opp_rule <= 0:
            raise ValueError("--opp-self, --opp-snapshot and --opp-rule cannot all be 0")
        if self.minibatch > self.train_batch:
            raise ValueError(
                f"--minibatch ({self.minibatch}) must not exceed --train-batch ({self.train_batch})"
            )
        if self.env_path not in PATHS:
            raise ValueError(f"--env-path must be one of {', '.join(PATHS)}, got {self.env_path!r}")
        if self.run_name is not None and (not self.run_name or "/" in self.run_name):
            raise ValueError(f"--run-name must be a plain folder name, got {self.run_name!r}")


RESUME_OVERRIDES = (
    "iterations", "minutes", "resume", "address", "num_env_runners", "torch_threads",
    "export_path", "object_store_mb", "run_dir", "run_name", "num_learners", "gpus_per_learner",
)  # fmt: skip
"""Settings a ``--resume`` takes from the command line; all others are the run's own."""


def flag(name: str) -> str:
    return name.replace("_", "-")


# ----------------------------------------------------------------------------- RLModules
class ActorCriticModule(TorchRLModule, ValueFunctionAPI):
    """:class:`agents.ppo_net.ActorCritic` as an RLlib module: masked logits (illegal
    actions at -1e8) from ``{"observations", "action_mask"}``; the value head shares the
    trunk. ``model_config``: ``hidden``, ``layers``. The train pass returns the values as
    its embeddings so the PPO loss does not run the network twice."""

    def setup(self) -> None:
        cfg = dict(self.model_config or {})
        self.net = ActorCritic(
            hidden=int(cfg.get("hidden", 256)),
            layers=int(cfg.get("layers", 2)),
            central_value=False,
            canonical_suits=True,
            mask_input=True,
        )

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs, mask = batch[Columns.OBS][OBS_KEY], batch[Columns.OBS][MASK_KEY]
        return {Columns.ACTION_DIST_INPUTS: masked_logits(self.net.logits(obs, mask), mask)}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs, mask = batch[Columns.OBS][OBS_KEY], batch[Columns.OBS][MASK_KEY]
        logits, values = self.net(obs, mask)
        return {Columns.ACTION_DIST_INPUTS: masked_logits(logits, mask), Columns.EMBEDDINGS: values}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        if embeddings is not None:
            return embeddings
        obs = batch[Columns.OBS]
        return self.net(obs[OBS_KEY], obs[MASK_KEY])[1]


class RuleModule(RLModule):
    """The rule-based agent (:mod:`agents.rule_based`, batched) as a frozen RLlib module."""

    def setup(self) -> None:
        self.agent = make_agent("rule", seed=int((self.model_config or {}).get("seed", 0)))

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs = np.asarray(batch[Columns.OBS][OBS_KEY]).astype(np.uint8)
        mask = np.asarray(batch[Columns.OBS][MASK_KEY]).astype(np.int8)
        return {Columns.ACTIONS: torch.from_numpy(self.agent.act_batch(obs, mask))}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        raise NotImplementedError("the rule-based module is not trainable")


# ----------------------------------------------------------------------------- league
def snapshot_id(i: int) -> str:
    return f"snapshot_{i}"


class LeagueMapping:
    """RLlib ``policy_mapping_fn``: per hand (episode), all four seats play the shared policy
    (probability ``p_self``), or one team does and the other is a snapshot or the rule-based
    agent. Draws come from a seeded generator, once per episode, so a hand's four agents
    agree; the last draws are cached by episode id."""

    def __init__(self, probs: tuple[float, float, float], snapshots: int, seed: int) -> None:
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
        kind = int(rng.choice(3, p=self.probs))
        team = int(rng.integers(2))
        if kind == 0:
            return -1, SHARED_POLICY
        if kind == 1:
            return team, snapshot_id(int(rng.integers(self.snapshots)))
        return team, RULE_POLICY


# ----------------------------------------------------------------------------- RLlib config
def module_ids(s: Settings) -> list[str]:
    return [SHARED_POLICY, *(snapshot_id(i) for i in range(s.snapshots)), RULE_POLICY]


def build_config(s: Settings) -> PPOConfig:
    """The PPO config of a run (RLlib's new API stack), for any :data:`PATHS` entry."""
    runners = s.num_env_runners
    net = {"hidden": s.hidden, "layers": s.layers}
    specs = {mid: RLModuleSpec(module_class=ActorCriticModule, model_config=net)
             for mid in module_ids(s) if mid != RULE_POLICY}  # fmt: skip
    specs[RULE_POLICY] = RLModuleSpec(module_class=RuleModule, model_config={"seed": s.seed})
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
            num_epochs=s.epochs,
            lr=s.lr,
            gamma=s.gamma,
            lambda_=s.gae_lambda,
            clip_param=s.clip,
            entropy_coeff=s.entropy,
            vf_loss_coeff=s.vf_coef,
            vf_clip_param=1e6,  # returns are scaled; clipping the squared error drops gradients
            grad_clip=s.grad_clip or None,
            use_kl_loss=False,
        )
        .multi_agent(
            policies=module_ids(s),
            policy_mapping_fn=LeagueMapping(s.opponent_probs(), s.snapshots, s.seed),
            policies_to_train=[SHARED_POLICY],
            count_steps_by="agent_steps",
        )
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=specs))
        .debugging(seed=s.seed, log_level="ERROR")
    )


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
    net = ActorCritic(s.hidden, s.layers, central_value=False)
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
    """Join ``--address``, or start a local Ray bound to 127.0.0.1; disconnect (local: shut
    down) at the end. Inside a process that already runs Ray, use that one and leave it."""
    if ray.is_initialized():
        yield
        return
    if s.address:
        ray.init(address=s.address, logging_level="ERROR", log_to_driver=False)
    else:
        ray.init(
            address="local",
            num_cpus=max(os.cpu_count() or 1, s.num_env_runners + s.num_learners),
            include_dashboard=False,
            object_store_memory=s.object_store_mb * 2**20,
            _node_ip_address="127.0.0.1",
            logging_level="ERROR",
            log_to_driver=False,
        )
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
)  # fmt: skip


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
    one was passed over; ``(None, None, [])`` when the run has no checkpoint yet."""
    problems: list[str] = []
    for name in (CHECKPOINT_DIR, PREVIOUS_DIR):
        folder = out_dir / name
        if not folder.is_dir():
            if name == CHECKPOINT_DIR and (out_dir / PREVIOUS_DIR).is_dir():
                problems.append(f"checkpoint {str(folder)!r} is missing")
            continue
        try:
            return folder, read_progress(folder), problems
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise RunRefused(f"cannot resume: no readable checkpoint ({'; '.join(problems)})")
    return None, None, []


def save_checkpoint(algo: Algorithm, out_dir: Path, progress: Progress) -> Path:
    """RLlib checkpoint plus progress into a hidden folder, then rotated into place: the
    newest becomes ``checkpoint.prev/`` and the new one ``checkpoint/``. Every moment one
    complete checkpoint exists (``checkpoint/``, else ``checkpoint.prev/``)."""
    new = out_dir / f".{CHECKPOINT_DIR}.new.{os.getpid()}"
    old = out_dir / f".{CHECKPOINT_DIR}.old.{os.getpid()}"
    for stale in (new, old):
        shutil.rmtree(stale, ignore_errors=True)
    algo.save_to_path(str(new.resolve()))
    atomic_write_text(new / PROGRESS_NAME, json.dumps(asdict(progress), indent=1))
    current, previous = out_dir / CHECKPOINT_DIR, out_dir / PREVIOUS_DIR
    if current.is_dir():
        if previous.exists():
            os.replace(previous, old)
        os.replace(current, previous)
    os.replace(new, current)
    shutil.rmtree(old, ignore_errors=True)
    return current


def clean_stale(out_dir: Path) -> None:
    """Hidden leftovers of interrupted saves (only at start, when nothing else writes)."""
    for path in out_dir.glob(f".{CHECKPOINT_DIR}.*"):
        shutil.rmtree(path, ignore_errors=True)


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


def trim_csv(path: Path, iteration: int) -> None:
    """Drop the rows after ``iteration`` (a resumed run redoes them)."""
    if not path.exists():
        return
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if int(r["iteration"]) <= iteration]
    lines = [",".join(CSV_FIELDS)] + [",".join(r.get(k, "") for k in CSV_FIELDS) for r in rows]
    atomic_write_text(path, "\n".join(lines) + "\n")


def append_csv(path: Path, metrics: Mapping[str, float]) -> None:
    new = not path.exists()
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        if new:
            w.writeheader()
        w.writerow({k: metrics.get(k, "") for k in CSV_FIELDS})


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
    policy's points per hand against each kind of opponent (sampled play)."""
    runners = result.get("env_runners", {})
    learner = result.get("learners", {}).get(SHARED_POLICY, {})
    timers = result.get("timers", {})
    modules = runners.get("module_episode_returns_mean", {})
    out = {
        "episode_len_mean": runners.get("episode_len_mean", math.nan),
        "policy_loss": learner.get("policy_loss", math.nan),
        "vf_loss": learner.get("vf_loss", math.nan),
        "entropy": learner.get("entropy", math.nan),
        "vf_explained_var": learner.get("vf_explained_var", math.nan),
        "sample_s": timers.get("env_runner_sampling_timer", math.nan),
        "learn_s": timers.get("learner_update_timer", math.nan),
    }
    for kind in ("snapshot", "rule"):
        rewards = [v for k, v in modules.items() if k.startswith(kind)]
        if rewards:  # an opponent module's return is its two seats' rewards: minus ours
            out[f"train_vs_{kind}"] = -float(np.mean(rewards)) / 2 / reward_scale
    return {k: float(v) for k, v in out.items()}


# ----------------------------------------------------------------------------- the loop
class Run:
    """One run. The constructor checks everything (flags, run folder, checkpoints, export
    path, budget) and raises RunRefused before anything is written; :meth:`train` then runs
    in the caller's Ray session."""

    def __init__(self, s: Settings) -> None:
        s.validate()
        out_dir = s.out_dir
        check_writable_folder(out_dir, "run folder")
        folder, progress, problems = None, None, []
        if s.resume and (out_dir / SETTINGS_NAME).exists():
            folder, progress, problems = newest_checkpoint(out_dir)
            s = self._resumed_settings(s, out_dir)
        elif s.resume:
            print(f"note: {str(out_dir)!r} holds no run yet: starting one", file=sys.stderr)
        elif found := sorted(p.name for p in out_dir.glob("*")) if out_dir.is_dir() else []:
            raise RunRefused(
                f"run folder {str(out_dir)!r} already holds a run ({', '.join(found[:3])}); "
                f"pass --resume to continue it, or another --run-name for a new run "
                f"(nothing was changed)"
            )
        self.progress = progress or Progress(run_id=uuid.uuid4().hex)
        own = [out_dir / CSV_NAME, out_dir / SETTINGS_NAME]
        check_export_path(str(s.export), self.progress.run_id, own)
        if self.budget_spent(s):
            raise RunRefused(
                f"run {str(out_dir)!r} has already spent its budget (iteration "
                f"{self.progress.iteration}, {self.progress.elapsed_s / 60:.2f} minutes); "
                f"--resume with a larger --iterations or --minutes (nothing was changed)"
            )
        self.s, self.out_dir, self.resume_from, self.problems = s, out_dir, folder, problems

    @staticmethod
    def _resumed_settings(s: Settings, out_dir: Path) -> Settings:
        path = out_dir / SETTINGS_NAME
        try:
            saved = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise RunRefused(f"cannot resume: {str(path)!r} is unreadable ({exc})") from exc
        known = {f.name for f in fields(Settings)}
        own = {k: v for k, v in saved.items() if k in known and k not in RESUME_OVERRIDES}
        merged = dataclasses.replace(s, **own)
        merged.validate()
        return merged

    def budget_spent(self, s: Settings | None = None) -> bool:
        s = s or self.s
        p = self.progress
        return bool(s.iterations and p.iteration >= s.iterations) or bool(
            s.minutes and p.elapsed_s >= s.minutes * 60
        )

    def resume_command(self) -> str:
        s = self.s
        args = ["python", "-m", "train.rllib_ppo", "--run-dir", s.run_dir, "--run-name", s.name,
                "--iterations", str(s.iterations), "--minutes", f"{s.minutes:g}"]  # fmt: skip
        if s.address:
            args += ["--address", s.address]
        if s.export_path:
            args += ["--export-path", s.export_path]
        return shlex.join(args + ["--resume"])

    def train(self) -> dict[str, float]:
        """Train until the budget is spent (in the Ray session of the caller); returns the
        last metrics row. Ctrl-C: finish the iteration, save, raise TrainingInterrupted."""
        s, out_dir, p = self.s, self.out_dir, self.progress
        out_dir.mkdir(parents=True, exist_ok=True)
        clean_stale(out_dir)
        if not s.resume or not (out_dir / SETTINGS_NAME).exists():
            atomic_write_text(out_dir / SETTINGS_NAME, json.dumps(asdict(s), indent=1))
        if self.problems:
            print(f"warning: {'; '.join(self.problems)}: resuming from {self.resume_from}",
                  file=sys.stderr)  # fmt: skip
        torch.set_num_threads(s.torch_threads)
        algo = build_config(s).build_algo()
        try:
            return self._loop(algo, s, out_dir, p)
        finally:
            algo.stop()

    def _loop(self, algo: Algorithm, s: Settings, out_dir: Path, p: Progress) -> dict[str, float]:
        if self.resume_from is not None:
            algo.restore_from_path(str(self.resume_from.resolve()))
        else:
            copy_module(algo, SHARED_POLICY, [snapshot_id(i) for i in range(s.snapshots)])
        nodes = runner_nodes(algo)
        atomic_write_text(out_dir / "cluster.json", json.dumps({"runner_nodes": nodes}))
        print(f"{s.name}: iteration {p.iteration}, {len(nodes)} env runner(s) on "
              f"{len(set(nodes))} node(s)", file=sys.stderr, flush=True)  # fmt: skip
        trim_csv(out_dir / CSV_NAME, p.iteration)
        writer = self._writer(out_dir, p.iteration)
        metrics: dict[str, float] = {}
        saved_at = p.iteration
        with deferred_interrupt() as interrupted:
            while not self.budget_spent() and not interrupted:
                metrics = self._one_iteration(algo, s, p)
                self._log(metrics, out_dir, writer, p.iteration)
                if p.iteration % s.checkpoint_every == 0 or self.budget_spent() or interrupted:
                    save_checkpoint(algo, out_dir, p)
                    export_agent(algo, s, p)
                    saved_at = p.iteration
            if saved_at != p.iteration:
                save_checkpoint(algo, out_dir, p)
                export_agent(algo, s, p)
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
        result = algo.train()
        dt = time.perf_counter() - t0
        decisions = decisions_sampled(result)
        p.iteration += 1
        p.decisions += decisions
        p.hands += int(result.get("env_runners", {}).get("num_episodes", 0) or 0)
        metrics = iteration_metrics(result, s.reward_scale)
        metrics |= {"iteration": p.iteration, "decisions": p.decisions, "hands": p.hands}
        metrics["decisions_per_s"] = decisions / max(dt, 1e-9)
        if s.snapshot_every and p.iteration % s.snapshot_every == 0:
            copy_module(algo, SHARED_POLICY, [snapshot_id(p.snapshots_taken % s.snapshots)])
            p.snapshots_taken += 1
        if s.eval_every and p.iteration % s.eval_every == 0:
            metrics |= evaluate(algo, s)
        p.elapsed_s += time.perf_counter() - t0
        metrics["minutes"] = p.elapsed_s / 60
        return metrics

    @staticmethod
    def _writer(out_dir: Path, iteration: int) -> SummaryWriter | None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # tensorboard is optional ([train] extra)
            return None
        return SummaryWriter(str(out_dir), purge_step=iteration + 1)

    @staticmethod
    def _log(
        metrics: Mapping[str, float], out_dir: Path, writer: SummaryWriter | None, step: int
    ) -> None:
        append_csv(out_dir / CSV_NAME, metrics)
        if writer is None:
            return
        for k, v in metrics.items():
            if k != "iteration" and not math.isnan(v):
                group = "eval" if k.startswith("eval_") else "train"
                writer.add_scalar(f"{group}/{k}", v, step)
        writer.flush()


# ----------------------------------------------------------------------------- main
class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one ``error:`` line (exit status 2)."""

    def error(self, message: str) -> Any:
        self.exit(2, f"error: {message} (see --help)\n")


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="python -m train.rllib_ppo", description=(__doc__ or "").split("\n\n")[0]
    )
    defaults = Settings()
    docs = _field_docs()
    for f in fields(Settings):
        name = "--" + flag(f.name)
        default = getattr(defaults, f.name)
        help_text = f"{docs.get(f.name, '')} (default: {default})"
        if f.type in ("bool",):
            p.add_argument(name, action="store_true", help=docs.get(f.name))
        elif f.name in ("run_name", "address", "export_path"):
            p.add_argument(name, default=None, help=help_text)
        elif f.name == "env_path":
            p.add_argument(name, default=default, choices=PATHS, help=help_text)
        else:
            kind = int if isinstance(default, int) else float if isinstance(default, float) else str
            p.add_argument(name, type=kind, default=default, help=help_text)
    return p


def _field_docs() -> dict[str, str]:
    """The attribute docstrings of :class:`Settings` (for --help)."""
    import ast
    import inspect

    (cls,) = ast.parse(inspect.getsource(Settings)).body
    assert isinstance(cls, ast.ClassDef)
    docs: dict[str, str] = {}
    for node, nxt in zip(cls.body, cls.body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
        ):
            docs[node.target.id] = " ".join(str(nxt.value.value).split())
    return docs


def parse_settings(argv: list[str] | None = None) -> Settings:
    args = parser().parse_args(argv)
    return Settings(**{f.name: getattr(args, f.name) for f in fields(Settings)})


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
