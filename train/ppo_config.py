"""The settings of a PPO run (:class:`Config`, every knob a ``python -m train.ppo`` flag) and
their checks (:func:`check_config`), imported by :mod:`train.ppo` and the modules around it.

The defaults are the shipped checkpoint's recipe. The field docstrings are the ``--help``
text (tyro reads them). The rules the checks apply (the opponent-schedule format, the budget,
how long a hand can be) are pure functions in :mod:`train.ppo_settings`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

import numpy as np
import torch

from agents.ppo_net import MAX_HIDDEN, MAX_LAYERS, check_critic
from agents.search_agent import ENDGAME_MAX, SearchConfig
from butifarra_env.core.observation import check_version
from butifarra_env.core.validate import check_int, check_number
from train import run_folder
from train.ppo_settings import (
    MAX_NUM_ENVS,
    check_hands_can_finish,
    make_opponent_agent,
    parse_opp_schedule,
    teacher_weight,
)


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


MAX_DISTILL_LABELS = 4096
"""The most ``distill_labels`` per update: about 1 ms each (0.6 ms median with
``distill_endgame`` 3), so 4096 is seconds per update, far past any useful share."""
MAX_DISTILL_BUFFER = 262_144
"""The most ``distill_buffer`` rows: about 600 bytes each, 160 MB at the most, held in memory
and in every checkpoint."""
MAX_DISTILL_BATCH = 4096
"""The most ``distill_batch`` rows per minibatch (a minibatch of the shipped recipe is about
1,800 decisions)."""

OPPONENTS = tuple(o.name.lower() for o in Opponent)
"""Opponent names in :class:`Opponent` order: self, snapshot, rule, random."""
ENGINES = ("auto", "numpy", "torch")
"""The values of ``Config.engine`` (:func:`resolve_engine` turns "auto" into one of the others)."""


def resolve_engine(engine: str, device: str) -> str:
    """The engine a run trains with: ``engine`` itself unless it is "auto", which means the
    torch engine on a device named explicitly and the numpy engine (the shipped recipe,
    bit-identical to the runs before the torch engine existed) when ``device`` is "auto"."""
    if engine != "auto":
        return engine
    return "numpy" if device == "auto" else "torch"


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
    """"auto" (CUDA when present, else CPU), "cpu" or "cuda[:i]": where the networks run
    and, with the torch engine, the engine and the whole rollout. Naming a device picks the
    torch engine (``engine`` "auto")."""
    engine: str = "auto"
    """"auto": the torch engine when ``device`` names one ("cpu", "cuda[:i]"), the numpy
    engine when ``device`` is left at "auto" (the shipped recipe). "numpy": the numpy
    BatchedEnv on the host, only the networks on ``device``. "torch": TorchBatchedEnv on
    ``device``, so that rollout, opponents, GAE and update stay there (docs/accelerator.md,
    "PPO on the device"). A run records the engine it resolved to; ``--resume`` keeps it."""
    torch_threads: int = 1
    """torch.set_num_threads; 0 = min(2, CPU count) (small nets gain nothing from more)."""
    deterministic: bool = True
    """torch.use_deterministic_algorithms (cheap on CPU for this MLP)."""
    update_bf16: bool = False
    """Run the PPO update's matrix products in bfloat16 (torch.autocast; the weights, Adam
    and the losses stay float32): about a third less update time on CPUs with AVX512-BF16
    or AMX, more on CPUs without. It changes the learning's arithmetic slightly, so the
    shipped recipe leaves it off (not measured for strength yet)."""

    total_minutes: float = 60.0
    """Wall-clock training budget, summed over resumes; 0 = no time limit."""
    total_updates: int = 0
    """Stop after this many PPO updates; 0 = no limit (then total_minutes must be > 0)."""

    num_envs: int = 256
    """Hands played in parallel by the batched engine."""
    num_steps: int = 64
    """Engine steps (decisions of any seat) per environment per rollout; num_steps x
    checkpoint_every must reach 58, the longest hand (the engine deals afresh at checkpoints)."""
    hidden: int = 128
    """Width of the MLP trunk."""
    layers: int = 2
    """Hidden layers in the MLP trunk."""
    central_value: bool = True
    """Centralised critic: the value MLP also sees the three hidden hands (from eng.state())."""
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
    release 12 (on from release 2 to 11): without it the policy is stronger after 60 minutes,
    against the rule-based player and head to head, on three seeds (docs/ppo_ablation.md)."""
    belief_coef: float = 0.5
    """Weight of the belief loss (binary cross-entropy, mean over 144 outputs)."""
    card_features: bool = True
    """Give the trunk what the rules say about each card: masters, cards that would win
    the trick now, whether the partner is winning it (147 extra inputs)."""
    card_head: bool = True
    """Add to each card's logit the output of one small network shared by all 48 cards,
    reading that card's features and the trunk (card play learnt once for every card)."""
    obs_version: int = 0
    """The observation the network reads: 0 (``butifarra_v0``, the shipped recipe) or 1
    (``butifarra_v1``: v0 plus the trick history and the variants; docs/observation_v1.md).
    The rule-based opponent and teacher read v0 either way."""
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
    gae_lambda: float = 0.6
    """GAE lambda along each seat's own decisions. 0.6 since release 11 (0.95 before; after
    60 minutes the policy is then stronger against the rule-based player on five seeds, and
    head to head against 0.95's runs of the same seed: docs/ppo_ablation.md)."""
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
    ent_coef: float = 0.03
    """Weight of the entropy bonus (entropy over legal actions only). 0.03 since release 10
    (0.01 before; after 60 minutes the policy is then stronger against the rule-based player
    and head to head, on two seeds: docs/ppo_ablation.md)."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    max_grad_norm: float = 0.5
    """Gradient-norm clipping; 0: none (as ``train.rllib_ppo``'s ``--max-grad-norm 0``)."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    adv_per_multiplier: bool = True
    """Divide the advantage of each card decision by its hand's multiplier (trump base x
    doubling factor, fixed and seen before the first card). Each card position's gradient
    is scaled by a positive constant, so the best card play is unchanged; hands played at
    x4 or x8 stop dominating the minibatch's normalised advantages. Bids and doubles keep
    the multiplied advantage, which is what they change. The default since release 7;
    ``--no-adv-per-multiplier`` is the earlier recipe."""
    skip_forced: bool = True
    """Play the learner's forced moves (one legal action: a quarter of its decisions, all
    card plays) without the network and leave them out of the buffers. They carry no
    policy gradient (the probability of the only legal action is 1 under any weights) and
    no entropy; left out, a seat's GAE chains its previous decision straight to its next
    real one, the critic is neither asked nor trained there, and the update and the
    rollout's forward skip a quarter of their rows. The default since release 8;
    ``--no-skip-forced`` is the earlier recipe."""
    target_kl: float | None = None
    """Stop the epochs early when the approximate KL exceeds this (None = never)."""

    opp_self: float = 0.05
    """Share of hands in pure self-play (all four seats are the learner)."""
    opp_snapshot: float = 0.0
    """Share of hands against a past snapshot of the policy."""
    opp_rule: float = 0.95
    """Share of hands against the fixed agent (``opponent_agent``; rule-based by default)."""
    opp_random: float = 0.0
    """Share of hands against the uniformly random agent. 0 since release 9 (0.05 before;
    without them the policy is stronger against the rule-based player and head to head, and
    weaker against random: docs/ppo_ablation.md)."""
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
    distill_coef: float = 0.0
    """Search distillation: weight of an extra loss, minus the log of the policy's
    probability of the cards that the search agent's scoring of one deal rates best, on the
    real deal of a learner position (``agents.search_agent.best_cards_on_deal``: a greedy
    full-information rollout, then the exact double-dummy endgame; the real deal is an exact
    draw from what the mover cannot see). 0 = off (the shipped recipe; measured in
    docs/ppo_ablation.md). The labelling time counts in the budget."""
    distill_labels: int = 64
    """With distill_coef: learner card decisions (with a choice of cards) labelled per update."""
    distill_max_tricks: int = 12
    """With distill_coef: label only positions with at most this many tricks left (the
    current one included): 12 = every card decision; ``distill_endgame`` or less = exact
    double-dummy labels only."""
    distill_endgame: int = 3
    """With distill_coef: tricks left from which the labels are exact double-dummy values
    (the search agent's ``endgame``, 0 to 5); before that a greedy rollout leads there."""
    distill_search: str = ""
    """With distill_coef: label with the search agent's choices instead (expert iteration):
    its options as in the spec ``search:OPTIONS`` (``agents.search_agent.SearchConfig``'s
    keys but ``bidding``, e.g. ``samples=3,endgame=3,infer=0,policy=3``), the learner's
    current policy as its card prior and bidder. The label is the card it would play, from
    what the mover sees; ``distill_max_tricks`` still applies, ``distill_endgame`` does not.
    "" = the best cards on the real deal (above)."""
    distill_buffer: int = 8192
    """With distill_coef: the most recent labelled positions kept for the loss."""
    distill_batch: int = 128
    """With distill_coef: labelled positions drawn for each minibatch of the update."""
    opponent_agent: str = "rule"
    """Registry spec of the fixed agent of the ``opp_rule`` share ("rule", "random", "ppo",
    "ppo:PATH", "search:..."), on both opponent seats; also evaluated against when it is
    neither rule nor random (``eval_opponent_*``)."""
    snapshot_every: int = 10
    """Add the current policy to the snapshot pool every this many updates."""
    snapshot_pool: int = 8
    """Most snapshots kept (oldest dropped)."""

    eval_every: int = 240
    """Evaluate vs random, vs rule-based (and vs ``opponent_agent``) every this many updates
    (0 = never), with agents/evaluation/arena.py's duplicate ``duel``. Logging only (the
    weights an update trains do not depend on it), but its time counts in ``total_minutes``:
    at 240 it is ~2% of a run (at 60, release 12's run, ~9%)."""
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
        folders are checked when :func:`train.ppo.train` starts
        (:func:`~train.ppo_checkpoint.prepare_run`)."""
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
        return teacher_weight(self.teacher, self.teacher_coef, self.teacher_until, progress)

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
    def resolved_engine(self) -> str:
        """The engine this run trains with ("numpy" or "torch"; :func:`resolve_engine`)."""
        return resolve_engine(self.engine, self.device)

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
        """The metrics log, one row per update (:data:`~train.ppo_metrics.CSV_FIELDS`)."""
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


# ----------------------------------------------------------------------------- checking a config
def check_config(cfg: Config) -> None:
    """ValueError naming the first bad field of ``cfg`` (before any work is done)."""
    bounded = {"hidden": MAX_HIDDEN, "layers": MAX_LAYERS, "num_envs": MAX_NUM_ENVS}
    positive_ints = (
        "num_envs", "num_steps", "hidden", "layers", "num_minibatches", "update_epochs",
        "snapshot_every", "snapshot_pool", "checkpoint_every", "eval_deals",
    )  # fmt: skip
    for name in positive_ints:
        check_int(name, getattr(cfg, name), 1, bounded.get(name))
    for name in ("total_updates", "eval_every", "torch_threads", "seed", "eval_seed"):
        check_int(name, getattr(cfg, name), 0)
    check_number("total_minutes", cfg.total_minutes, 0.0, lo_inclusive=True)
    if not isinstance(cfg.milestone_minutes, (tuple, list)):
        raise ValueError(
            f"milestone_minutes must be a list of minutes, got {cfg.milestone_minutes!r}"
        )
    for m in cfg.milestone_minutes:
        check_number("milestone_minutes", m, 0.0)
    if cfg.total_minutes == 0 and cfg.total_updates == 0:
        raise ValueError("set total_minutes > 0 or total_updates > 0, or the run never ends")
    check_hands_can_finish(cfg.num_steps, cfg.checkpoint_every, cfg.total_updates)
    check_version(cfg.obs_version)
    check_int("critic_hidden", cfg.critic_hidden, 0, MAX_HIDDEN)
    check_critic(cfg.critic_hidden, cfg.central_value)
    for name in ("learning_rate", "clip_coef", "reward_scale"):
        check_number(name, getattr(cfg, name), 0.0)
    for name in ("gamma", "gae_lambda", "lr_final", "teacher_until"):
        v = getattr(cfg, name)
        if not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0):
            raise ValueError(f"{name} must be in [0, 1], got {v!r}")
    non_negative = (
        "ent_coef", "vf_coef", "max_grad_norm", "belief_coef", "teacher_coef",
        "teacher_bid_floor", "opp_self", "opp_snapshot", "opp_rule", "opp_random",
    )  # fmt: skip
    for name in non_negative:
        check_number(name, getattr(cfg, name), 0.0, lo_inclusive=True)
    if cfg.target_kl is not None:
        check_number("target_kl", cfg.target_kl, 0.0)
    check_number("distill_coef", cfg.distill_coef, 0.0, lo_inclusive=True)
    check_int("distill_labels", cfg.distill_labels, 1, MAX_DISTILL_LABELS)
    check_int("distill_max_tricks", cfg.distill_max_tricks, 1, 12)
    check_int("distill_endgame", cfg.distill_endgame, 0, ENDGAME_MAX)
    check_int("distill_buffer", cfg.distill_buffer, 1, MAX_DISTILL_BUFFER)
    check_int("distill_batch", cfg.distill_batch, 1, MAX_DISTILL_BATCH)
    distill_search_config(cfg)
    if cfg.opp_schedule is not None:
        cfg.opponent_probs()  # parses the schedule: ValueError naming the bad stage
    elif cfg.opponent_probs().sum() <= 0:
        raise ValueError("opp_self, opp_snapshot, opp_rule, opp_random must not all be 0")
    _check_names(cfg)
    _check_agents(cfg)


def _check_names(cfg: Config) -> None:
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", str(cfg.device)):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:i]', got {cfg.device!r}")
    if cfg.device.startswith("cuda"):
        index = int(cfg.device.partition(":")[2] or 0)
        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            have = torch.cuda.device_count() if torch.cuda.is_available() else 0
            raise ValueError(
                f"device {cfg.device!r} asked for but it is not available (CUDA available: "
                f"{torch.cuda.is_available()}, {have} device(s)); use 'cpu' or 'auto'"
            )
    if cfg.engine not in ENGINES:
        raise ValueError(
            f"engine must be 'auto' (torch on a named --device, else numpy), 'numpy' or "
            f"'torch', got {cfg.engine!r}"
        )
    for name in ("exp_name", "run_name"):
        v = getattr(cfg, name)
        if v is None and name == "run_name":
            continue
        if not isinstance(v, str) or v in ("", ".", "..") or any(c in v for c in ("/", "\\", "\0")):
            raise ValueError(f"{name} must be a plain folder name (no '/'), got {v!r}")
    for name in ("run_dir", "export_path"):
        v = getattr(cfg, name)
        if not (v is None and name == "export_path") and (not isinstance(v, str) or not v):
            raise ValueError(f"{name} must be a non-empty path, got {v!r}")


def _check_agents(cfg: Config) -> None:
    """The fixed agent and the teacher can be built (a typo or a missing checkpoint fails
    here, not minutes into the run); ``init_from`` names a file (read when the run starts)."""
    for name in ("opponent_agent", "teacher"):
        spec = getattr(cfg, name)
        if spec is None:
            continue
        try:
            make_opponent_agent(spec, cfg.seed)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name}: {exc}") from None
    v = cfg.init_from
    if v is not None and (not isinstance(v, str) or not v.strip()):
        raise ValueError(f'init_from must be a checkpoint path or "shipped", got {v!r}')


def distill_search_config(cfg: Config) -> SearchConfig | None:
    """The search options ``distill_search`` names (None when empty): ValueError naming
    what is wrong. They need the distillation loss on (``distill_coef`` > 0); the learner
    bids and is the prior, so ``bidding`` is refused; the search reads ``butifarra_v0``
    observations, so ``obs_version`` must be 0."""
    text = cfg.distill_search
    if not isinstance(text, str):
        raise ValueError(f"distill_search must be search options as text, got {text!r}")
    if not text.strip():
        return None
    if not cfg.distill_coef:
        raise ValueError(
            f"distill_search {text!r} labels for the distillation loss, which is off: "
            "set distill_coef > 0 (e.g. 0.2), or leave distill_search empty"
        )
    try:
        search = SearchConfig.parse(text)
    except ValueError as exc:
        raise ValueError(f"distill_search: {exc}") from None
    if "bidding" in {item.partition("=")[0].strip() for item in text.split(",")}:
        raise ValueError(
            f"distill_search {text!r}: leave out bidding (the learner bids and is the prior)"
        )
    if cfg.obs_version != 0:
        raise ValueError(
            f"distill_search needs obs_version 0 (the search reads butifarra_v0), "
            f"got obs_version {cfg.obs_version}"
        )
    if search.budget:
        raise ValueError(
            f"distill_search {text!r}: leave out budget (labels must not depend on the clock)"
        )
    return search
