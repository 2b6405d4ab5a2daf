"""What a PPO run reports, kept out of :mod:`train.ppo` so that the algorithm reads top to
bottom: the metrics.csv columns (:data:`CSV_FIELDS`), their TensorBoard groups, the interval
evaluation (:func:`evaluate`: the arena's duplicate duel) and :class:`MetricsLog` (the CSV,
TensorBoard and the progress bar, one row per update)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import torch

from agents import Agent
from agents.evaluation.arena import duel
from agents.ppo_agent import PPOAgent
from agents.ppo_net import ActorCritic
from train import run_folder
from train.ppo_config import Config
from train.ppo_settings import make_opponent_agent

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter

CSV_FIELDS = (
    "update", "global_step", "hands", "minutes", "steps_per_second", "batch_transitions",
    "train_vs_snapshot", "train_vs_rule", "train_vs_random",
    "loss_policy", "loss_value", "entropy", "approx_kl", "clipfrac", "explained_variance",
    "learning_rate", "eval_random_mean", "eval_random_ci95", "eval_rule_mean", "eval_rule_ci95",
    "eval_seconds", "eval_opponent_mean", "eval_opponent_ci95", "loss_belief", "loss_teacher",
    "loss_distill", "distill_seconds", "grad_norm", "grad_clipped",
)  # fmt: skip
"""metrics.csv columns (new ones go last: a resumed run's older file is rewritten with them)."""
TB_GROUPS = {
    **{k: "losses" for k in CSV_FIELDS if k.startswith("loss_")},
    **{k: "losses" for k in ("entropy", "approx_kl", "clipfrac", "grad_norm", "grad_clipped")},
    **{k: "charts" for k in ("explained_variance", "learning_rate", "steps_per_second")},
    "learner_decisions_per_second": "charts",  # not in metrics.csv, which has its factors
    **{k: "charts" for k in ("batch_transitions", "hands", "minutes", "distill_seconds")},
    **{k: "eval" for k in CSV_FIELDS if k.startswith("eval_")},
    **{k: "train" for k in CSV_FIELDS if k.startswith("train_vs_")},
}
"""TensorBoard tag group of each logged metric."""
SHOWN = ("entropy", "train_vs_rule", "eval_random_mean", "eval_rule_mean")
"""The metrics on the progress bar."""


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


class MetricsLog:
    """metrics.csv (repaired to end at the update a run starts from), the TensorBoard events
    (``cfg.tensorboard``) and the progress bar (``cfg.progress``) of a run."""

    def __init__(self, cfg: Config, update: int) -> None:
        from tqdm import tqdm

        self.csv_path = cfg.csv_path
        run_folder.repair_csv(self.csv_path, CSV_FIELDS, update)
        self.writer: SummaryWriter | None = run_folder.open_tensorboard(
            cfg.out_dir, update, cfg.tensorboard
        )
        self.bar = tqdm(total=cfg.total_updates or None, initial=update, disable=not cfg.progress)

    def write(self, metrics: Mapping[str, float]) -> None:
        """One update's row: CSV, TensorBoard scalars, a step of the bar."""
        run_folder.append_csv(self.csv_path, CSV_FIELDS, metrics)
        run_folder.log_scalars(self.writer, metrics, TB_GROUPS, int(metrics["update"]))
        self.bar.update(1)
        self.bar.set_postfix({k: f"{metrics[k]:.3g}" for k in SHOWN if k in metrics})

    def close(self, finished: bool) -> None:
        """Close the bar and flush the events; a ``finished`` run also closes its writer."""
        self.bar.close()
        if self.writer is not None:
            self.writer.flush()
            if finished:
                self.writer.close()
