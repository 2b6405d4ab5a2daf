"""Where a second of ``train/ppo.py`` goes: a profile of its updates at the shipped settings.

    python benchmarks/profile_training.py [--updates 10] [--phase both] [--rev REV]
        [--critic-hidden N]

Runs :func:`train.ppo.train` in-process (today's defaults, one torch thread, no TensorBoard or
progress bar) for one warm-up update and ``--updates`` measured ones, with a timer wrapped
around each part of an update (the policy forward in the rollout, each opponent, the teacher,
the per-card features, the engine, GAE, the update's forward, backward and optimiser, logging
and checkpoints), and prints a markdown table: seconds per update and share of the update.

Time is *exclusive*: a part nested in another (the per-card features inside a forward, the
engine's ``state()`` inside the learner's turn) is counted in the inner row only, so the rows
add up to the measured time; what no timer covers is the ``other`` row of its phase. The
checkpoint (every ``checkpoint_every`` = 10 updates) and the interval evaluation (every
``eval_every`` updates of the profiled tree's defaults: 240, 60 before 2026-12-07; 1,000
duplicate deals against each of random and rule-based) are
timed when they happen and shown *amortised* over those intervals; the evaluation is run once,
at the last update, to time it (``--no-eval`` leaves it out).

The shipped 60-minute run asks the teacher at every learner decision for its first quarter
(``early``) and at bidding decisions only afterwards (``late``); ``--phase both`` profiles the
two. ``--rev REV`` profiles a git revision instead of this tree (a temporary ``git worktree``,
as :mod:`benchmarks.compare_revisions` does): the "before" table of a change. Absolute times
on a busy machine are inflated; the shares are what to read there.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

PHASES = {"early": 1.0, "late": 0.0}
"""Phase -> ``teacher_until``: the teacher asked at every learner decision, or at bids only."""

Label = str | Callable[[list[str]], str]
CHECKPOINT = "checkpoint (amortised: one per checkpoint_every updates)"
EVALUATION = "interval evaluation (amortised: one per eval_every updates)"
ABSORBING = (CHECKPOINT, EVALUATION)
"""Rows that take in the time of every timed call inside them."""


class Timers:
    """Exclusive time per label: a call's time minus that of the timed calls inside it
    (``clock``: wall time, or this process's CPU time, steadier on a busy machine)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.stack: list[list[Any]] = []  # [label, seconds of timed calls inside]

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()

    def wrap(self, fn: Callable[..., Any], label: Label) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            outer = [s[0] for s in self.stack]
            absorbing = [s for s in outer if s in ABSORBING]
            if absorbing:  # what an evaluation or a checkpoint does is counted in its row
                name = absorbing[0]
            else:
                name = label if isinstance(label, str) else label(outer)
            self.stack.append([name, 0.0])
            start = self.clock()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = self.clock() - start
                _, inner = self.stack.pop()
                self.seconds[name] += elapsed - inner
                self.calls[name] += 1
                if self.stack:
                    self.stack[-1][1] += elapsed

        return timed


def phase_of(stack: list[str]) -> str:
    """``update`` inside the PPO update, else ``rollout``."""
    return "update" if any(s.startswith("update") for s in stack) else "rollout"


def forward_label(stack: list[str]) -> str:
    """A network forward, named by who asked for it."""
    if any(s.startswith("opponent: snapshot") for s in stack):
        return "opponent: snapshot policy"
    if phase_of(stack) == "update":
        return "update: forward + loss"
    return "rollout: policy forward + sampling (learner)"


def in_phase(what: str) -> Callable[[list[str]], str]:
    return lambda stack: f"{phase_of(stack)}: {what}"


HOOKS: list[tuple[str, str, Label]] = [
    # (module, attribute path, label); a missing attribute is skipped (older revisions)
    ("train.ppo", "collect_rollout", "rollout: other (buffers, finished hands, draws)"),
    ("train.ppo", "start_rollouts", "rollout: new engine and buffers (checkpoints)"),
    ("train.ppo", "sample_masked", forward_label),
    ("train.ppo", "policy_samples", "opponent: snapshot policy"),
    ("train.ppo", "random_legal_actions", "opponent: random"),
    ("train.ppo", "hidden_hands", "rollout: hidden hands for the critic"),
    ("agents.ppo_net", "ActorCritic.forward_all", forward_label),
    ("agents.ppo_net", "ActorCritic.logits", forward_label),
    ("agents.ppo_net", "ActorCritic.forward_inputs", forward_label),
    ("agents.ppo_net", "ActorCritic._inputs", in_phase("network inputs (suits, scaling)")),
    ("agents.ppo_net", "ActorCritic.inputs", in_phase("network inputs (suits, scaling)")),
    ("agents.ppo_net", "card_inputs", in_phase("per-card features")),
    ("butifarra_env.envs.batched", "BatchedEnv.step", "engine: step (obs, mask, rewards)"),
    ("butifarra_env.envs.batched", "BatchedEnv.reset", "engine: step (obs, mask, rewards)"),
    ("butifarra_env.envs.batched", "BatchedEnv.state", "engine: state (for hidden hands)"),
    ("train.ppo", "ppo_update", "update: other (zero_grad, diagnostics)"),
    ("train.ppo", "flat_batch", "update: flatten the batch"),
    ("train.ppo", "per_seat_gae", "update: per-seat GAE"),
    ("train.ppo", "ppo_loss", "update: forward + loss"),
    ("torch", "Tensor.backward", "update: backward"),
    ("torch.nn.utils", "clip_grad_norm_", "update: gradient clipping"),
    ("torch.optim", "Adam.step", "update: optimizer step"),
    ("train.ppo", "label_positions", "distillation: search labels (rollouts, double-dummy)"),
    ("train.ppo", "OpponentPool.add_snapshot", "logging: snapshots, metrics.csv, milestones"),
    ("train.ppo_metrics", "MetricsLog.write", "logging: snapshots, metrics.csv, milestones"),
    ("train.ppo_checkpoint", "save_milestones", "logging: snapshots, metrics.csv, milestones"),
]
LOOP_OTHER = "loop: other"


def install(timers: Timers) -> list[str]:
    """Wrap every hook that exists; returns the ones this tree lacks."""
    missing = []
    for module_name, path, label in HOOKS:
        owner: Any = importlib.import_module(module_name)
        *parents, attr = path.split(".")
        for p in parents:
            owner = getattr(owner, p, None)
        if owner is None or not hasattr(owner, attr):
            missing.append(f"{module_name}.{path}")
            continue
        setattr(owner, attr, timers.wrap(getattr(owner, attr), label))
    ppo: Any = importlib.import_module("train.ppo")
    ppo.checkpoint.save = timers.wrap(ppo.checkpoint.save, CHECKPOINT)
    ppo.evaluate = timers.wrap(ppo.evaluate, EVALUATION)
    return missing


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def profile(
    timers: Timers,
    phase: str,
    updates: int,
    seed: int,
    evaluate: bool,
    tmp: str,
    settings: dict[str, Any] | None = None,
) -> dict[str, float]:
    """Seconds per update by label (exclusive), over the updates after the first one
    (``settings``: Config fields that differ from the shipped recipe)."""
    from agents import Agent
    from train.ppo import Config, train
    from train.ppo_settings import make_opponent_agent

    shipped = Config()
    total = updates + 1
    cfg = Config(
        seed=seed, total_updates=total, total_minutes=0.0, torch_threads=1,
        teacher_until=PHASES[phase], eval_every=total if evaluate else 0,
        tensorboard=False, progress=False, milestone_minutes=(), run_dir=tmp,
        run_name=f"profile_{phase}", **(settings or {}),
    )  # fmt: skip
    agents: dict[str, Agent] = {}
    for role, spec, label in (
        ("opponent", cfg.opponent_agent, "opponent: rule-based"),
        ("teacher", cfg.teacher, "teacher: rule-based"),
    ):
        assert spec is not None
        agent = make_opponent_agent(spec, seed)
        agent.act_batch = timers.wrap(agent.act_batch, label)  # type: ignore[method-assign]
        agents[role] = agent
    marks: list[float] = []

    def on_update(metrics: dict[str, float]) -> None:
        marks.append(timers.clock())
        if len(marks) == 1:  # the first update warms up (imports, first allocations)
            timers.reset()

    train(cfg, on_update, opponent=agents["opponent"], teacher=agents["teacher"])
    wall = marks[-1] - marks[0]
    seconds = dict(timers.seconds)
    loop_other = wall - sum(seconds.values())
    saves = timers.calls.get(CHECKPOINT, 0)
    if saves:  # one save per checkpoint_every updates in a long run
        seconds[CHECKPOINT] *= updates / (saves * shipped.checkpoint_every)
    if EVALUATION in seconds:
        seconds[EVALUATION] *= updates / shipped.eval_every
    per_update = {k: v / updates for k, v in seconds.items()}
    per_update[LOOP_OTHER] = loop_other / updates
    return per_update


ORDER = (
    "rollout", "opponent", "teacher", "engine", "distillation", "update", "logging", "checkpoint",
)  # fmt: skip


Profile = dict[str, dict[str, float]]
"""Phase -> label -> seconds per update."""


def table(results: Profile) -> str:
    """Markdown: one row per label, seconds per update and share for each phase."""
    labels = sorted(
        {k for r in results.values() for k in r},
        key=lambda k: (
            next((i for i, p in enumerate(ORDER) if k.startswith(p)), len(ORDER)),
            -max(r.get(k, 0.0) for r in results.values()),
        ),
    )
    head = "| part of an update |" + "".join(f" {p}: s/update | {p}: share |" for p in results)
    lines = [head, "|---|" + "---:|---:|" * len(results)]
    totals = {p: sum(r.values()) for p, r in results.items()}
    for label in labels:
        cells = ""
        for p, r in results.items():
            s = r.get(label, 0.0)
            cells += f" {s:.3f} | {100 * s / totals[p]:.1f}% |"
        lines.append(f"| {label} |{cells}")
    lines.append("| **total** |" + "".join(f" **{totals[p]:.3f}** | 100% |" for p in results))
    return "\n".join(lines)


def by_part(results: Profile) -> Profile:
    """The same, summed by the first word of each label (rollout, opponent, update...)."""
    out: Profile = {}
    for phase, r in results.items():
        out[phase] = defaultdict(float)
        for k, v in r.items():
            out[phase][k.split(":")[0].split(" (")[0]] += v
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--updates", type=int, default=10, help="measured updates per phase (>= 1)")
    p.add_argument("--phase", choices=("early", "late", "both"), default="both")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-eval", action="store_true", help="leave the interval evaluation out")
    p.add_argument(
        "--clock", choices=tuple(CLOCKS), default="wall",
        help="wall time, or CPU time of this process (steadier when other work shares the CPU)",
    )  # fmt: skip
    p.add_argument(
        "--distill-coef", type=float, default=0.0,
        help="profile search distillation at this weight (train.ppo --distill-coef; 0: off)",
    )  # fmt: skip
    p.add_argument("--distill-labels", type=int, default=128, help="with --distill-coef")
    p.add_argument(
        "--critic-hidden", type=int, default=0,
        help="profile a centralised critic this wide (train.ppo --critic-hidden; 0: the trunk's)",
    )  # fmt: skip
    p.add_argument("--rev", help="profile this git revision (e.g. HEAD) instead of this tree")
    p.add_argument("--tree", help=argparse.SUPPRESS)  # the tree to import (set by --rev)
    p.add_argument("--label", help=argparse.SUPPRESS)  # its name in the output
    args = p.parse_args()
    if args.updates < 1:
        p.error("--updates must be >= 1")
    if args.rev:
        return profile_revision(args.rev, sys.argv[1:])
    sys.path.insert(0, str(Path(args.tree) if args.tree else ROOT))
    phases = list(PHASES) if args.phase == "both" else [args.phase]
    timers = Timers(CLOCKS[args.clock])
    missing = install(timers)
    settings = {}
    if args.distill_coef:
        settings = {"distill_coef": args.distill_coef, "distill_labels": args.distill_labels}
    if args.critic_hidden:
        settings["critic_hidden"] = args.critic_hidden
    results: Profile = {}
    with tempfile.TemporaryDirectory() as tmp:
        for phase in phases:
            timers.reset()
            results[phase] = profile(
                timers, phase, args.updates, args.seed, not args.no_eval, tmp, settings
            )
    import torch

    from train.ppo import Config

    cfg = Config()
    print(f"{args.label or 'this tree'}: {args.updates} updates per phase after one warm-up,")
    print(f"num_envs={cfg.num_envs} x num_steps={cfg.num_steps} engine steps per update,")
    print(f"torch {torch.__version__}, one thread; {args.clock} seconds per update (exclusive)\n")
    print(table(results))
    print("\nby part:\n")
    print(table(by_part(results)))
    if missing:
        print(f"\n(not in this tree, not timed: {', '.join(missing)})")
    return 0


def profile_revision(rev: str, argv: list[str]) -> int:
    """Run this script on a temporary worktree of ``rev`` (its code, these timers)."""
    rest = [a for i, a in enumerate(argv) if a != "--rev" and (i == 0 or argv[i - 1] != "--rev")]
    rest = [a for a in rest if not a.startswith("--rev=")]
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "rev"
        add = ["git", "worktree", "add", "-q", "--detach", str(tree), rev]
        subprocess.run(add, cwd=ROOT, check=True)
        try:
            cmd = [sys.executable, __file__, "--tree", str(tree), "--label", rev, *rest]
            return subprocess.run(cmd, cwd=tree).returncode
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)


if __name__ == "__main__":
    raise SystemExit(main())
