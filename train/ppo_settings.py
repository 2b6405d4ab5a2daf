"""The rules a PPO run's settings follow, kept out of :mod:`train.ppo` so that the algorithm
reads top to bottom: the opponent-schedule format, the budget (how much of it is spent), how
long a hand can be, ``init_from`` (which checkpoint, which network), what a resumable
checkpoint holds and how the registry agents of a run are built.

Pure functions of plain values (no ``Config``): :mod:`train.ppo_config` and the modules
around :mod:`train.ppo` pass its fields.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents import Agent, make_agent
from agents.ppo_net import ARCH_DEFAULTS, Checkpoint, check_arch, check_weights, load_checkpoint
from agents.registry import DEFAULT_PPO_CHECKPOINT
from butifarra_env.core.actions import N_CARDS
from butifarra_env.core.options import MAX_DOUBLING_LEVEL
from train.run_folder import RunRefused

MAX_NUM_ENVS = 1 << 16
"""Most engine slots a run may ask for (each holds ~45 KB of rollout buffers; ~140 KB on the
torch engine at 64 steps, which also keeps finished hands on the device)."""

# ----------------------------------------------------------------------------- opponent schedule
OPP_SCHEDULE_FORM = 'stages "FROM:name=share,...;..." with names self, snapshot, rule, random'


def parse_opp_schedule(text: str, names: Sequence[str]) -> list[tuple[float, np.ndarray]]:
    """``opp_schedule`` as (start share, normalised probabilities over ``names``) stages, in
    order; ValueError naming what is wrong (the format is in ``Config.opp_schedule``)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"opp_schedule must be {OPP_SCHEDULE_FORM}, got {text!r}")
    stages: list[tuple[float, np.ndarray]] = []
    for stage in text.split(";"):
        start_text, sep, mix = stage.partition(":")
        start = _float_or_nan(start_text)
        if not sep or not 0.0 <= start < 1.0:
            raise ValueError(f"opp_schedule stage {stage!r}: FROM must be a share in [0, 1)")
        p = np.zeros(len(names))
        for item in mix.split(","):
            name, eq, value = (part.strip() for part in item.partition("="))
            share = _float_or_nan(value)
            if not eq or name not in names or not 0.0 <= share < math.inf:
                raise ValueError(
                    f"opp_schedule stage {stage!r}: {item.strip()!r} is not name=share "
                    f"with name one of {', '.join(names)} and share >= 0"
                )
            p[list(names).index(name)] = share
        if p.sum() <= 0:
            raise ValueError(f"opp_schedule stage {stage!r}: the shares must not all be 0")
        if stages and start <= stages[-1][0]:
            raise ValueError(f"opp_schedule stage {stage!r}: stages must start in increasing order")
        stages.append((start, p / p.sum()))
    if stages[0][0] != 0.0:
        raise ValueError(f"opp_schedule: the first stage must start at 0, got {stages[0][0]}")
    return stages


def _float_or_nan(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


# ----------------------------------------------------------------------------- budget
def budget_progress(
    total_updates: int, total_minutes: float, update: int, elapsed_s: float
) -> float:
    """Share of the budget spent at ``update``/``elapsed_s``: the larger of the update and
    wall-clock shares (a time-limited run's schedules follow the clock); at most 1."""
    shares = [0.0]
    if total_updates:
        shares.append(update / total_updates)
    if total_minutes:
        shares.append(elapsed_s / (60.0 * total_minutes))
    return min(1.0, max(shares))


def budget_spent(total_updates: int, total_minutes: float, update: int, elapsed_s: float) -> bool:
    """The update or wall-clock budget is used up at ``update``/``elapsed_s``."""
    if total_updates and update >= total_updates:
        return True
    return bool(total_minutes) and elapsed_s >= total_minutes * 60


def budget_spent_message(
    total_updates: int, total_minutes: float, out_dir: Path, update: int, elapsed_s: float
) -> str:
    """Why a ``--resume`` of a finished run is refused, and what to pass instead."""
    spent = []
    if total_updates and update >= total_updates:
        spent.append(f"update {update} of --total-updates {total_updates}")
    if total_minutes and elapsed_s >= total_minutes * 60:
        spent.append(f"{elapsed_s / 60:.2f} of --total-minutes {total_minutes:g}")
    return (
        f"run {str(out_dir)!r} has already spent its budget ({' and '.join(spent)}); to "
        f"train it further, --resume with a larger --total-updates or --total-minutes "
        f"(nothing was changed)"
    )


# ----------------------------------------------------------------------------- hand length
MAX_HAND_STEPS = N_CARDS + 2 + 2 * MAX_DOUBLING_LEVEL
"""Most engine steps (decisions of any seat) one hand can take: 58. The 48 cards (12 per
seat), at most 2 trump decisions (the dealer delegates, the partner chooses) and at most 2
per doubling level (a pass then a double, by the two players of the team asked), up to
``MAX_DOUBLING_LEVEL`` (4) levels."""


def check_hands_can_finish(num_steps: int, checkpoint_every: int, total_updates: int) -> None:
    """ValueError unless every engine slot can finish a hand between two restarts of the
    engine (:func:`~train.ppo.start_rollouts` deals afresh at every checkpoint, dropping the
    hands in progress) and before an update budget ends: else a run trains on nothing."""
    span = {"checkpoint_every": checkpoint_every}
    if total_updates:
        span["total_updates"] = min(checkpoint_every, total_updates)
    for name, updates in span.items():
        if updates * num_steps < MAX_HAND_STEPS:
            raise ValueError(
                f"num_steps x {name} = {num_steps} x {updates} = {num_steps * updates} engine "
                f"steps, but a hand can take {MAX_HAND_STEPS} (12 cards for each of the 4 "
                f"seats, up to 2 trump decisions and 2 for each of {MAX_DOUBLING_LEVEL} "
                f"doubling levels) and the engine deals afresh at every checkpoint: hands "
                f"would not finish and the run would train on nothing; make num_steps x "
                f"{name} at least {MAX_HAND_STEPS}"
            )


# ----------------------------------------------------------------------------- init_from
SHIPPED = "shipped"
"""``init_from`` value naming the shipped PPO weights (``make_agent("ppo")``'s checkpoint)."""
ARCH_FIELDS = (
    "hidden", "layers", "central_value", "canonical_suits", "mask_input", "belief",
    "card_features", "card_head", "obs_version", "critic_hidden",
)  # fmt: skip
"""Config fields that define the network (an ``init_from`` checkpoint's ``arch`` sets them)."""


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
    return arch_settings(init_checkpoint(init_from)["arch"])


def arch_settings(arch: object) -> dict[str, Any]:
    """The :data:`ARCH_FIELDS` settings of a checkpoint's ``arch`` (checked; the keys a v0
    network's arch leaves out, ``obs_version``, at their defaults)."""
    full = {**ARCH_DEFAULTS, **check_arch(arch)}
    return {k: full[k] for k in ARCH_FIELDS}


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


def init_weights(init_from: str, asked: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The weights of ``init_from``; RunRefused when the file is not a usable agent
    checkpoint or holds another network than the ``asked`` :data:`ARCH_FIELDS` settings."""
    data = init_checkpoint(init_from)
    theirs = arch_settings(data["arch"])
    if theirs != {k: asked[k] for k in ARCH_FIELDS}:
        differ = ", ".join(
            f"{k}={theirs[k]!r} (asked: {asked[k]!r})" for k in ARCH_FIELDS if theirs[k] != asked[k]
        )
        raise RunRefused(
            f"init_from {init_from!r} holds another network: {differ}; leave these flags "
            f"out or pass {arch_flags(theirs)} (nothing was changed)"
        )
    return dict(data["model"])


# ----------------------------------------------------------------------------- resuming
ADDED_LATER = {
    "card_features": False, "card_head": False, "teacher_bid_floor": 0.0, "obs_version": 0,
    "adv_per_multiplier": False, "skip_forced": False, "critic_hidden": 0,
}  # fmt: skip
"""Settings a checkpoint written before they existed lacks, with the value such a run had
(the option off): a resume must not switch them on because today's defaults do."""


def load_training_checkpoint(path: Path) -> Checkpoint:
    """A full training checkpoint (verified, ``weights_only=True``); ValueError naming
    ``path`` unless it holds everything a bit-exact resume needs."""
    data = load_checkpoint(path)
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
    return data


# ----------------------------------------------------------------------------- agents
def make_opponent_agent(spec: str, seed: int | None) -> Agent:
    """An agent from the registry (the fixed opponent, the teacher); ValueError naming what
    is wrong with ``spec``. Built with torch's global generator set aside, so that building
    it (a PPO agent initialises a network before loading its weights) never changes the
    training run's random stream."""
    with torch.random.fork_rng(devices=[]):
        return make_agent(spec, seed=seed)


# ------------------------------------------------------------------ schedules both trainers use
def bidding_rows(mask: Any) -> Any:
    """Rows of a (N, 56) legal-action mask (numpy or torch) with no card to play: the
    bidding and doubling decisions (``teacher_bid_floor`` keeps teaching those)."""
    return ~mask[:, :N_CARDS].any(-1)


def annealed_lr(learning_rate: float, lr_final: float, anneal: bool, progress: float) -> float:
    """The step size when ``progress`` (0 to 1) of the budget is spent: linear from
    ``learning_rate`` to ``lr_final`` x learning_rate (constant without ``anneal``)."""
    if not anneal:
        return learning_rate
    return (1.0 - (1.0 - lr_final) * min(1.0, progress)) * learning_rate


def teacher_weight(teacher: str | None, coef: float, until: float, progress: float) -> float:
    """Weight of the imitation loss when ``progress`` of the budget is spent: ``coef``
    falling linearly to 0 at ``until`` (0 without a teacher)."""
    if teacher is None or until <= 0:
        return 0.0
    return coef * max(0.0, 1.0 - progress / until)
