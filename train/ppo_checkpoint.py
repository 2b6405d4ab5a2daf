"""A PPO run's state on disk, kept out of :mod:`train.ppo` so that the algorithm reads top to
bottom: the checks before a run may start (:func:`prepare_run`: a new run or a resumed one,
whose own settings win), the full checkpoint (what a bit-exact resume needs: model,
optimiser, snapshot pool, counters, random generators; :func:`save`, :func:`restore`), the
agent-checkpoint export, the milestone models, and the message of a Ctrl-C.

The files themselves are written by :mod:`train.run_folder` (atomic, the previous checkpoint
kept, never over another run).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.ppo_net import (
    ActorCritic,
    Checkpoint,
    check_arch,
    make_arch,
    model_from_checkpoint,
    model_payload,
)
from train import run_folder
from train.ppo_config import Config
from train.ppo_settings import (
    ADDED_LATER,
    ARCH_FIELDS,
    budget_spent,
    budget_spent_message,
    init_weights,
    load_training_checkpoint,
)
from train.run_folder import RunRefused, TrainingInterrupted

Snapshots = list[dict[str, torch.Tensor]]
"""The snapshot pool: state_dicts of past policies, oldest first."""


@dataclass
class Counters:
    """How far a run is: saved in every checkpoint, restored on resume."""

    update: int = 0
    global_step: int = 0
    hands: int = 0
    elapsed_s: float = 0.0
    """Wall-clock seconds of training and evaluation, summed over resumes."""

    @classmethod
    def of(cls, checkpoint: Mapping[str, Any]) -> Counters:
        return cls(*(checkpoint[f.name] for f in fields(cls)))


def run_finished(cfg: Config, at: Counters) -> bool:
    """The budget is spent and some hand has finished: a run whose time budget runs out
    before any hand ends goes on until one does (it never reports figures from 0 hands;
    :func:`~train.ppo_settings.check_hands_can_finish` sees to the update budget)."""
    spent = budget_spent(cfg.total_updates, cfg.total_minutes, at.update, at.elapsed_s)
    return spent and at.hands > 0


# ----------------------------------------------------------------------------- preparing a run
RESUME_OVERRIDES = (
    "total_minutes", "total_updates", "resume", "progress", "device", "torch_threads",
    "run_dir", "run_name", "exp_name", "export_path",
)  # fmt: skip
"""Config fields a ``--resume`` takes from the command line; all others come from the
checkpoint, so a resumed run cannot silently change its hyper-parameters."""


@dataclass
class Run:
    """A run that may start (every check passed, nothing written yet): its settings, where
    it writes, and what it continues from."""

    cfg: Config
    run_id: str
    """Identifies the run in its checkpoints and exports (an export path may only be
    overwritten by the run that wrote it)."""
    resume: Checkpoint | None = None
    """The checkpoint it continues from (None for a run from scratch)..."""
    resumed_from: Path | None = None
    """...and its file."""
    init: dict[str, torch.Tensor] | None = None
    """The ``init_from`` weights of a run from scratch."""
    newest_unreadable: bool = False
    """It resumed from ``checkpoint.prev.pt``: the unreadable newest is set aside, not rotated."""

    @property
    def previous_path(self) -> Path:
        return self.cfg.out_dir / "checkpoint.prev.pt"


def resumed_config(cfg: Config, saved: Mapping[str, Any], arch: Mapping[str, Any]) -> Config:
    """The run's own settings (``saved``, from its checkpoint; its network ``arch``,
    :data:`ADDED_LATER` and the numpy engine fill what an older file lacks), except the
    :data:`RESUME_OVERRIDES`, which come from ``cfg``."""
    earlier = ADDED_LATER | {"engine": "numpy"}  # before --engine: the numpy engine
    own = {**earlier, **{k: arch[k] for k in ARCH_FIELDS if k in arch}, **saved}
    names = {f.name for f in fields(cfg)}
    own = {k: v for k, v in own.items() if k in names}
    merged = type(cfg)(**{**own, **{k: getattr(cfg, k) for k in RESUME_OVERRIDES}})
    merged.validate()
    return merged


def _readable_checkpoint(cfg: Config) -> tuple[Checkpoint | None, Path | None, list[str]]:
    """The newest readable of the run's two checkpoints, its file and why a newer one was
    passed over (:func:`~train.run_folder.newest_readable`)."""
    previous = cfg.out_dir / "checkpoint.prev.pt"
    return run_folder.newest_readable(cfg.checkpoint_path, previous, load_training_checkpoint)


def _own_config(cfg: Config, resume: Checkpoint, path: Path | None) -> Config:
    """:func:`resumed_config` of a checkpoint, RunRefused when its settings are invalid or
    do not match its network."""
    try:
        own = resumed_config(cfg, resume["config"], check_arch(resume["arch"]))
    except (TypeError, ValueError) as exc:
        raise RunRefused(f"checkpoint {str(path)!r} holds invalid settings: {exc}") from exc
    if make_arch(**{k: getattr(own, k) for k in ARCH_FIELDS}) != check_arch(resume["arch"]):
        raise RunRefused(f"checkpoint {str(path)!r}: its settings do not match its network")
    return own


def prepare_run(cfg: Config) -> Run:
    """Every check a run needs, before anything is written; RunRefused (naming what and
    what to do) for a new run in a folder that holds one, a ``resume`` whose checkpoints are
    all unreadable or whose budget is spent, an ``export_path`` that is not this run's, an
    unusable ``init_from``."""
    try:
        cfg.validate()
    except ValueError as exc:
        raise RunRefused(str(exc)) from None
    out_dir = cfg.out_dir
    run_folder.check_writable_folder(out_dir, "run folder")
    resume: Checkpoint | None = None
    path: Path | None = None
    problems: list[str] = []
    if cfg.resume:
        resume, path, problems = _readable_checkpoint(cfg)
    elif found := run_folder.existing_run_files(out_dir):
        raise RunRefused(
            f"run folder {str(out_dir)!r} already holds a run ({', '.join(found[:3])}); "
            f"pass --resume to continue it, or another --run-name for a new run "
            f"(nothing was changed)"
        )
    if resume is not None:  # the run's own settings win, except the budget knobs
        cfg = _own_config(cfg, resume, path)
        done = Counters.of(resume)
        if run_finished(cfg, done):
            raise RunRefused(
                budget_spent_message(
                    cfg.total_updates, cfg.total_minutes, out_dir, done.update, done.elapsed_s
                )
            )
    # the engine a run trains with is part of its settings (kept by a resume), never "auto"
    cfg = replace(cfg, engine=cfg.resolved_engine)
    run_id = str(resume.get("run_id") or "") if resume is not None else ""
    run = Run(cfg, run_id or uuid.uuid4().hex, resume, path)
    own = [cfg.checkpoint_path, run.previous_path, cfg.csv_path]
    run_folder.check_export_path(cfg.export_path, run.run_id, own)
    if resume is None and cfg.init_from is not None:
        run.init = init_weights(cfg.init_from, {k: getattr(cfg, k) for k in ARCH_FIELDS})
    run.newest_unreadable = path == run.previous_path and cfg.checkpoint_path.exists()
    if problems:
        at = resume["update"] if resume else 0
        why = f"{'; '.join(problems)}: resuming from the previous checkpoint"
        print(f"warning: {why} {str(path)!r} (update {at})", file=sys.stderr)
    elif cfg.resume and resume is None:
        note = f"note: {str(out_dir)!r} has no checkpoint yet: starting at update 0"
        print(note, file=sys.stderr)
    return run


def saved_run(cfg: Config) -> tuple[Config, Checkpoint, bool] | None:
    """The run in ``cfg``'s folder as a ``resume`` would take it: its own settings, its
    newest readable checkpoint and whether it is finished (:func:`run_finished`); None
    when it has no checkpoint. RunRefused when none is readable or its settings are invalid."""
    resume, path = _readable_checkpoint(cfg)[:2]
    if resume is None:
        return None
    own = _own_config(cfg, resume, path)
    return own, resume, run_finished(own, Counters.of(resume))


def setup_run_folder(run: Run) -> None:
    """Every check passed: create the run folder and remove what interrupted writes left."""
    cfg = run.cfg
    cfg.out_dir.mkdir(parents=True, exist_ok=True)
    names = ("checkpoint.pt", "checkpoint.prev.pt", "metrics.csv")
    for stale in run_folder.clean_stale_temps(cfg.out_dir, names):
        print(f"note: removed {str(stale)!r}, left by an interrupted write", file=sys.stderr)


# ----------------------------------------------------------------------------- checkpoints
def restore(
    run: Run, model: ActorCritic, optimizer: torch.optim.Optimizer, rng: np.random.Generator
) -> tuple[Counters, dict[str, float], Snapshots]:
    """Load a resumed run's model, optimiser and random generators (in place); returns its
    counters, last metrics row and snapshot pool (zeros, {} and [] for a run from scratch).
    RunRefused when the checkpoint does not fit them."""
    if run.resume is None:
        return Counters(), {}, []
    path = str(run.resumed_from)
    try:
        model.load_state_dict(model_from_checkpoint(run.resume, path).state_dict())
        optimizer.load_state_dict(run.resume["optimizer"])
        snapshots = list(run.resume["snapshots"])
        torch.set_rng_state(run.resume["rng"]["torch"])
        rng.bit_generator.state = run.resume["rng"]["numpy"]
    except (KeyError, TypeError, RuntimeError, ValueError) as exc:
        raise RunRefused(f"checkpoint {path!r} cannot be restored: {exc}") from exc
    return Counters.of(run.resume), dict(run.resume.get("metrics", {})), snapshots


def save(
    run: Run,
    model: ActorCritic,
    optimizer: torch.optim.Optimizer,
    snapshots: Snapshots,
    rng: np.random.Generator,
    at: Counters,
    metrics: Mapping[str, float],
    extra: Mapping[str, Any] | None = None,
) -> None:
    """The full checkpoint (everything a bit-exact resume needs; the one it replaces becomes
    checkpoint.prev.pt; ``extra``: more of the trainer's state, such as the search labels)
    and, with ``export_path``, the agent checkpoint (the model)."""
    cfg = run.cfg
    info = asdict(at) | {"metrics": {k: float(v) for k, v in metrics.items()}}
    info |= {"run_id": run.run_id}
    rng_states = {"torch": torch.get_rng_state(), "numpy": rng.bit_generator.state}
    training = {"optimizer": optimizer.state_dict(), "snapshots": snapshots, **(extra or {})}
    full = model_payload(model, asdict(cfg), info | training | {"rng": rng_states})
    kept = run_folder.save_rotating(
        full, cfg.checkpoint_path, run.previous_path, run.newest_unreadable
    )
    if kept is not None:
        print(f"note: kept the unreadable checkpoint as {str(kept)!r}", file=sys.stderr)
    run.newest_unreadable = False
    if cfg.export_path:
        run_folder.save_torch(model_payload(model, asdict(cfg), info), cfg.export_path)


def save_milestones(run: Run, model: ActorCritic, at: Counters) -> None:
    """The model, once, as of each ``milestone_minutes`` the run has just passed
    (``model_at_{M}min.pt``, never replaced)."""
    cfg = run.cfg
    for minutes in cfg.milestone_minutes:
        path = cfg.out_dir / f"model_at_{minutes:g}min.pt"
        if at.elapsed_s >= 60.0 * minutes and not path.exists():
            info = {"update": at.update, "elapsed_s": at.elapsed_s, "run_id": run.run_id}
            run_folder.save_torch(model_payload(model, asdict(cfg), info), path)


def interrupted(cfg: Config, update: int) -> TrainingInterrupted:
    """What a Ctrl-C raises once the final checkpoint is saved: where it is, how to resume."""
    if not cfg.checkpoint_path.exists():
        return TrainingInterrupted(f"interrupted at update {update}: no checkpoint yet")
    return TrainingInterrupted(
        f"interrupted: saved checkpoint {str(cfg.checkpoint_path)!r} (update {update}); "
        f"continue with: {cfg.resume_command()}"
    )
