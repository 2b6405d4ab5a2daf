"""Self-play PPO for Butifarra, in one file: config -> env factory -> model -> training loop.

Read top to bottom (in the spirit of CleanRL's ``ppo.py``). Four seats act in turn inside
each hand, so the bookkeeping is per seat: a transition's "next state" is the same seat's
next decision in the same hand, and the hand's (scaled) team score difference is that
seat's reward on its last decision of the hand (:func:`per_seat_gae`).

Each hand of the batched engine pits the learner's team against an opponent team drawn
per hand from a pool: the current policy (pure self-play: all four seats learn), a past
snapshot, the rule-based agent or the random agent. Only learner decisions enter the PPO
buffer. Hands still in progress when a rollout ends are carried into the next rollout (their
stored log-probs make the one-update staleness harmless under PPO's ratio clipping).

Usage::

    python -m train.ppo --help
    python -m train.ppo --total-minutes 60 --export-path agents/checkpoints/ppo_butifarra.pt
    python -m train.ppo --run-name NAME --resume      # continue an interrupted run

Checkpoints (``runs/NAME/checkpoint.pt``) are written atomically and hold everything a
bit-exact resume needs; they load with ``torch.load(..., weights_only=True)``.
"""

from __future__ import annotations

import csv
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from butifarra_env.actions import N_ACTIONS
from butifarra_env.cards import N_CARDS
from butifarra_env.observation import FIELDS, OBS_SIZE, OFFSETS
from butifarra_env.rules import N_SEATS

CHECKPOINT_FORMAT = "butifarra-ppo"
CHECKPOINT_VERSION = 1
MASK_VALUE = -1e8
"""Logit given to illegal actions: finite (no NaN in softmax/entropy), exp() underflows to 0."""
MAX_LEARNER_STEPS_PER_HAND = 64
"""Upper bound on decisions in one hand (48 cards + at most 2 trump choices + 8 doubling)."""

OPPONENTS = ("self", "snapshot", "rule", "random")


# ----------------------------------------------------------------------------- config
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

    learning_rate: float = 5e-4
    """Adam step size."""
    anneal_lr: bool = False
    """Linearly anneal the step size to 0 over total_updates (needs total_updates > 0)."""
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

    opp_self: float = 0.15
    """Share of hands in pure self-play (all four seats are the learner)."""
    opp_snapshot: float = 0.05
    """Share of hands against a past snapshot of the policy."""
    opp_rule: float = 0.7
    """Share of hands against the rule-based agent."""
    opp_random: float = 0.1
    """Share of hands against the uniformly random agent."""
    snapshot_every: int = 10
    """Add the current policy to the snapshot pool every this many updates."""
    snapshot_pool: int = 8
    """Most snapshots kept (oldest dropped)."""

    eval_every: int = 30
    """Evaluate vs random and vs rule-based every this many updates (0 = never)."""
    eval_deals: int = 1000
    """Duplicate deals per interval evaluation (each played with both seatings)."""
    eval_backend: str = "arena"
    """"arena": agents/arena.py duel (reference engine); "batched": same protocol on the
    batched engine (faster, used where the arena is unavailable)."""
    eval_seed: int = 12345
    """Seed of the fixed evaluation deal set."""
    checkpoint_every: int = 10
    """Write runs/NAME/checkpoint.pt every this many updates (and at the end)."""
    export_path: str | None = None
    """Also write the model alone (an agent checkpoint) here at each checkpoint."""
    resume: bool = False
    """Continue from runs/NAME/checkpoint.pt if it exists."""
    tensorboard: bool = True
    """Write TensorBoard events next to the CSV log."""
    progress: bool = True
    """Show a tqdm progress bar with live metrics."""

    def validate(self) -> None:
        """Raise ValueError naming the first bad field (before any work is done)."""
        positive_ints = (
            "num_envs", "num_steps", "hidden", "layers", "num_minibatches", "update_epochs",
            "snapshot_every", "snapshot_pool", "checkpoint_every", "eval_deals",
        )  # fmt: skip
        for name in positive_ints:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        for name in ("total_updates", "eval_every", "torch_threads"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an int >= 0, got {v!r}")
        if not (isinstance(self.total_minutes, (int, float)) and self.total_minutes >= 0):
            raise ValueError(f"total_minutes must be >= 0, got {self.total_minutes!r}")
        if self.total_minutes == 0 and self.total_updates == 0:
            raise ValueError("set total_minutes > 0 or total_updates > 0, or the run never ends")
        if self.anneal_lr and self.total_updates == 0:
            raise ValueError("anneal_lr needs total_updates > 0")
        for name in ("learning_rate", "clip_coef", "reward_scale"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        for name in ("gamma", "gae_lambda"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {v!r}")
        for name in ("ent_coef", "vf_coef", "max_grad_norm"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if self.target_kl is not None and not self.target_kl > 0:
            raise ValueError(f"target_kl must be > 0 or None, got {self.target_kl!r}")
        probs = self.opponent_probs()
        if (probs < 0).any() or probs.sum() <= 0:
            raise ValueError(
                "opp_self, opp_snapshot, opp_rule, opp_random must be >= 0 and not all 0, "
                f"got {probs.tolist()}"
            )
        if self.eval_backend not in ("arena", "batched"):
            raise ValueError(f"eval_backend must be 'arena' or 'batched': {self.eval_backend!r}")
        if self.device != "auto" and not (self.device == "cpu" or self.device.startswith("cuda")):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda[:i]', got {self.device!r}")
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device {self.device!r} asked for but CUDA is not available")

    def opponent_probs(self) -> np.ndarray:
        """Per-hand probabilities of OPPONENTS, normalised."""
        p = np.array([self.opp_self, self.opp_snapshot, self.opp_rule, self.opp_random], float)
        return p / p.sum() if p.sum() > 0 and (p >= 0).all() else p

    @property
    def name(self) -> str:
        return self.run_name or f"{self.exp_name}_s{self.seed}"


# ----------------------------------------------------------------------------- env factory
def make_env(num_envs: int, seed: int) -> Any:
    """The batched engine (one hand per episode, raw rewards; we scale them ourselves)."""
    from butifarra_env.batched import BatchedEnv

    return BatchedEnv(num_envs, seed=seed)


def make_rule_agent(seed: int | None) -> Any:
    """The rule-based opponent from the agent registry (vectorised ``act_batch``)."""
    try:
        from agents import make_agent
    except ImportError:
        from agents.base import make_agent
    return make_agent("rule", seed=seed)


def random_actions(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Uniform legal action per row, vectorised (argmax of random keys on legal entries)."""
    keys = rng.random(mask.shape) + 1.0
    return np.argmax(np.where(mask > 0, keys, 0.0), axis=1).astype(np.int64)


# ----------------------------------------------------------------------------- model
def observation_scale() -> np.ndarray:
    """Per-feature multipliers so every input is roughly in [0, 1] (counts are divided)."""
    scale = np.ones(OBS_SIZE, np.float32)
    divisors = {
        "team_tricks": 12.0,
        "team_points": 72.0,
        "hand_number": 255.0,
        "match_scores": 255.0,
        "target_score": 255.0,
        "max_doubling_level": 4.0,
        "butifarra_base": 2.0,
    }
    for name, size, _ in FIELDS:
        if name in divisors:
            scale[OFFSETS[name] : OFFSETS[name] + size] = 1.0 / divisors[name]
    return scale


def masked_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Replace illegal logits with a large finite negative (never -inf: no NaN anywhere)."""
    return torch.where(mask.bool(), logits, torch.full_like(logits, MASK_VALUE))


def masked_log_probs(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Log-probabilities of the masked categorical (illegal entries are ~ -1e8)."""
    return torch.log_softmax(masked_logits(logits, mask), dim=-1)


def masked_entropy(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Entropy over legal actions only (0 when a single action is legal)."""
    logp = masked_log_probs(logits, mask)
    plogp = torch.where(mask.bool(), logp.exp() * logp, torch.zeros_like(logp))
    return -plogp.sum(-1)


def sample_masked(
    logits: torch.Tensor, mask: torch.Tensor, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample one legal action per row; returns (actions, their log-probs)."""
    logp = masked_log_probs(logits, mask)
    actions = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
    return actions, logp.gather(-1, actions[:, None]).squeeze(-1)


def layer_init(layer: nn.Linear, std: float = math.sqrt(2), bias: float = 0.0) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


def mlp(width_in: int, hidden: int, layers: int) -> nn.Sequential:
    mods: list[nn.Module] = []
    for _ in range(layers):
        mods += [layer_init(nn.Linear(width_in, hidden)), nn.ReLU()]
        width_in = hidden
    return nn.Sequential(*mods)


HIDDEN_HANDS_SIZE = 3 * N_CARDS
"""Extra critic input: the other three hands, relative to the mover (next, partner, previous)."""


def hidden_hands(state: np.ndarray, seat: np.ndarray) -> np.ndarray:
    """(N, 144) uint8 from the engine's full state (N, 639): the hands the mover cannot see,
    in relative seat order, for the centralised critic (never given to the policy)."""
    hands = np.asarray(state)[:, : N_SEATS * N_CARDS].reshape(-1, N_SEATS, N_CARDS)
    rel = (np.asarray(seat)[:, None] + np.arange(1, N_SEATS)[None, :]) % N_SEATS
    return hands[np.arange(len(hands))[:, None], rel].reshape(len(hands), HIDDEN_HANDS_SIZE)


def _suit_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gather indices that relabel suits so the trump suit is always suit 0.

    Row ``t`` of each table is for trump value ``t`` as the observation one-hot stores it
    (0-3 a suit, 4 butifarra, 5 not chosen yet; the last two keep the identity). Returns
    (observation gather (6, 491), card gather (6, 48) for masks and hidden hands, action
    gather (6, 56) that maps canonical logits back to real action ids).
    """
    obs_idx = np.tile(np.arange(OBS_SIZE), (6, 1))
    card_idx = np.tile(np.arange(N_CARDS), (6, 1))
    act_idx = np.tile(np.arange(N_ACTIONS), (6, 1))
    for t in range(4):
        order = [t] + [s for s in range(4) if s != t]  # canonical suit k <- real suit order[k]
        canon_cards = np.array([order[k] * 12 + n for k in range(4) for n in range(12)])
        card_idx[t] = canon_cards
        for name in ("hand", "played", "trick"):
            for block in range(dict((f[0], f[1]) for f in FIELDS)[name] // N_CARDS):
                base = OFFSETS[name] + block * N_CARDS
                obs_idx[t, base : base + N_CARDS] = base + canon_cards
        for seat in range(N_SEATS):
            base = OFFSETS["voids"] + seat * 4
            obs_idx[t, base : base + 4] = base + np.array(order)
        obs_idx[t, OFFSETS["trump"] : OFFSETS["trump"] + 4] = OFFSETS["trump"] + np.array(order)
        real_to_canon = np.argsort(canon_cards)  # real card c sits at canonical position
        act_idx[t, :N_CARDS] = real_to_canon
    return obs_idx, card_idx, act_idx


class ActorCritic(nn.Module):
    """Policy MLP on the 491-byte observation with a 56-way head, and a value head.

    * ``canonical_suits``: suits are relabelled inside the model so that trump is always
      suit 0 (cards, voids, masks, hidden hands; logits mapped back), so what is learnt
      about playing trumps in one suit holds in all four. Observations stay as they are.
    * ``mask_input``: the legal-action mask is also an input (it summarises the trick).
    * ``central_value``: the value comes from its own MLP that also sees the three hidden
      hands (a centralised critic: lower-variance advantages; the policy never sees them).
      Without it, the value head shares the policy trunk.
    """

    def __init__(
        self,
        hidden: int = 256,
        layers: int = 2,
        central_value: bool = False,
        canonical_suits: bool = True,
        mask_input: bool = True,
    ) -> None:
        super().__init__()
        self.arch = {"obs_size": OBS_SIZE, "n_actions": N_ACTIONS, "hidden": hidden,
                     "layers": layers, "activation": "relu",
                     "central_value": bool(central_value),
                     "canonical_suits": bool(canonical_suits),
                     "mask_input": bool(mask_input)}  # fmt: skip
        self.central_value = bool(central_value)
        self.canonical_suits = bool(canonical_suits)
        self.mask_input = bool(mask_input)
        self.register_buffer("obs_scale", torch.from_numpy(observation_scale()))
        obs_idx, card_idx, act_idx = _suit_tables()
        self.register_buffer("obs_idx", torch.from_numpy(obs_idx), persistent=False)
        self.register_buffer("card_idx", torch.from_numpy(card_idx), persistent=False)
        self.register_buffer("act_idx", torch.from_numpy(act_idx), persistent=False)
        width = OBS_SIZE + (N_ACTIONS if self.mask_input else 0)
        self.trunk = mlp(width, hidden, layers)
        self.policy = layer_init(nn.Linear(hidden, N_ACTIONS), std=0.01)
        if self.central_value:
            self.critic = mlp(width + HIDDEN_HANDS_SIZE, hidden, layers)
        self.value = layer_init(nn.Linear(hidden, 1), std=1.0)

    def _inputs(
        self, obs: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Scaled (and suit-canonical) policy input, and the trump index per row."""
        trump = None
        if self.canonical_suits:
            t0 = OFFSETS["trump"]
            trump = obs[:, t0 : t0 + 6].argmax(-1)
            obs = obs.gather(1, self.obs_idx[trump])
        x = obs.float() * self.obs_scale
        if self.mask_input:
            m = mask.to(x.dtype)
            if trump is not None:
                cards = m[:, :N_CARDS].gather(1, self.card_idx[trump])
                m = torch.cat([cards, m[:, N_CARDS:]], dim=-1)
            x = torch.cat([x, m], dim=-1)
        return x, trump

    def _real_logits(self, logits: torch.Tensor, trump: torch.Tensor | None) -> torch.Tensor:
        return logits if trump is None else logits.gather(1, self.act_idx[trump])

    def logits(self, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Policy logits (N, 56) from observations and masks (no hidden information)."""
        x, trump = self._inputs(obs, mask)
        return self._real_logits(self.policy(self.trunk(x)), trump)

    def forward(
        self, obs: torch.Tensor, mask: torch.Tensor, hidden: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits (N,56), values (N,)); ``hidden`` (N,144) is required by a central critic."""
        x, trump = self._inputs(obs, mask)
        h = self.trunk(x)
        if self.central_value:
            if hidden is None:
                raise ValueError("a central-value model needs the hidden hands for its value")
            if trump is not None:
                hidden = hidden.reshape(-1, 3, N_CARDS).gather(
                    2, self.card_idx[trump][:, None, :].expand(-1, 3, -1)
                )
            hv = self.critic(torch.cat([x, hidden.reshape(-1, HIDDEN_HANDS_SIZE).float()], -1))
        else:
            hv = h
        return self._real_logits(self.policy(h), trump), self.value(hv).squeeze(-1)


def model_for(cfg: Config) -> ActorCritic:
    """The network a config asks for."""
    return ActorCritic(
        cfg.hidden, cfg.layers, cfg.central_value, cfg.canonical_suits, cfg.mask_input
    )


def build_model(arch: dict[str, Any]) -> ActorCritic:
    """Rebuild a model from a checkpoint's ``arch`` dict (raises ValueError if unknown)."""
    if arch.get("obs_size") != OBS_SIZE or arch.get("n_actions") != N_ACTIONS:
        raise ValueError(
            f"architecture mismatch: checkpoint has obs_size={arch.get('obs_size')}, "
            f"n_actions={arch.get('n_actions')}; this code needs {OBS_SIZE} and {N_ACTIONS}"
        )
    if arch.get("activation", "relu") != "relu":
        raise ValueError(f"unknown activation {arch.get('activation')!r}")
    return ActorCritic(
        hidden=int(arch["hidden"]),
        layers=int(arch["layers"]),
        central_value=bool(arch.get("central_value", False)),
        canonical_suits=bool(arch.get("canonical_suits", False)),
        mask_input=bool(arch.get("mask_input", False)),
    )


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


# ----------------------------------------------------------------------------- evaluation
def evaluate(
    policy: Callable[[np.ndarray, np.ndarray], np.ndarray],
    opponent: Callable[[np.ndarray, np.ndarray], np.ndarray],
    n_deals: int,
    seed: int,
    env_factory: Callable[[int, int], Any] = make_env,
) -> dict[str, float]:
    """Duplicate-deal match: every deal is played twice, the policy on each team once.

    Each of the ``n_deals`` engine slots plays exactly its first hand (deals fixed by
    ``seed``); the per-deal result is the policy team's mean raw points over both seatings.
    Returns mean points/hand, the 95% CI half-width and the number of deals.
    """
    per_side = []
    for team in (0, 1):
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
        per_side.append(result)
    per_deal = (per_side[0] + per_side[1]) / 2.0
    mean = float(per_deal.mean())
    ci = float(1.96 * per_deal.std(ddof=1) / math.sqrt(n_deals)) if n_deals > 1 else float("nan")
    return {"mean": mean, "ci95": ci, "deals": float(n_deals)}


def greedy_policy(model: ActorCritic, device: torch.device) -> Callable:
    """Argmax-of-legal-logits policy over numpy batches (what PPOAgent does by default)."""

    def act(obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            o = torch.from_numpy(np.ascontiguousarray(obs)).to(device)
            m = torch.from_numpy(np.ascontiguousarray(mask)).to(device)
            logits = model.logits(o, m)
            return masked_logits(logits, m).argmax(-1).cpu().numpy()

    return act


# ----------------------------------------------------------------------------- checkpoints
def atomic_save(obj: dict[str, Any], path: str | os.PathLike) -> None:
    """torch.save to a temp file in the same folder, then os.replace (never a torn file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def model_payload(model: ActorCritic, cfg: Config, extra: dict[str, Any]) -> dict[str, Any]:
    """Agent checkpoint: tensors and plain containers only (loads with weights_only=True)."""
    return {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "arch": dict(model.arch),
        "model": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
        "config": asdict(cfg),
        **extra,
    }


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Load and sanity-check a checkpoint; ValueError naming the file on any problem."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"checkpoint {str(path)!r} does not exist")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a corrupt file
        raise ValueError(f"checkpoint {str(path)!r} is corrupt or not a torch file: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"checkpoint {str(path)!r} is not a {CHECKPOINT_FORMAT} checkpoint")
    if data.get("version") != CHECKPOINT_VERSION:
        raise ValueError(
            f"checkpoint {str(path)!r} has version {data.get('version')!r}, "
            f"expected {CHECKPOINT_VERSION}"
        )
    return data


def model_from_checkpoint(data: dict[str, Any], path: str | os.PathLike) -> ActorCritic:
    """Build the model of a loaded checkpoint; ValueError on architecture mismatch."""
    try:
        model = build_model(data["arch"])
        model.load_state_dict(data["model"])
    except (KeyError, RuntimeError, ValueError, TypeError) as exc:
        raise ValueError(f"checkpoint {str(path)!r} does not fit this model: {exc}") from exc
    return model


# ----------------------------------------------------------------------------- training
RESUME_OVERRIDES = (
    "total_minutes", "total_updates", "resume", "progress", "device", "torch_threads",
    "run_dir", "run_name", "exp_name", "export_path",
)  # fmt: skip
"""Config fields a ``--resume`` takes from the command line; all others come from the
checkpoint, so a resumed run cannot silently change its hyper-parameters."""


class Trainer:
    """One run: owns engine, model, optimiser, opponent pool, logs; ``train()`` runs it."""

    def __init__(self, cfg: Config, env_factory: Callable[[int, int], Any] = make_env) -> None:
        cfg.validate()
        ckpt_path = Path(cfg.run_dir) / cfg.name / "checkpoint.pt"
        resume_data = load_checkpoint(ckpt_path) if cfg.resume and ckpt_path.exists() else None
        if resume_data is not None:  # the run's own settings win, except the budget knobs
            saved = {
                k: v for k, v in resume_data["config"].items() if k in Config.__dataclass_fields__
            }
            keep = {k: getattr(cfg, k) for k in RESUME_OVERRIDES}
            cfg = Config(**{**saved, **keep})
            cfg.validate()
        self.cfg = cfg
        self.env_factory = env_factory
        threads = cfg.torch_threads or min(2, os.cpu_count() or 1)
        torch.set_num_threads(threads)
        if cfg.deterministic:
            torch.use_deterministic_algorithms(True)
        if cfg.device == "auto":
            self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        else:
            self.device = torch.device(cfg.device)
        torch.manual_seed(cfg.seed)
        self.rng = np.random.default_rng(cfg.seed)
        self.model = model_for(cfg).to(self.device)
        self.snapshot_model = model_for(cfg).to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.learning_rate, eps=1e-5)
        self.snapshots: list[dict[str, torch.Tensor]] = []
        self.update = 0
        self.global_step = 0
        self.hands = 0
        self.elapsed = 0.0
        self.last_metrics: dict[str, float] = {}
        self.out_dir = Path(cfg.run_dir) / cfg.name
        self.ckpt_path = self.out_dir / "checkpoint.pt"
        self.csv_path = self.out_dir / "metrics.csv"
        self.rule_agent = None
        if cfg.opp_rule > 0 or cfg.eval_every > 0:
            self.rule_agent = make_rule_agent(cfg.seed)
        if resume_data is not None:
            self._restore(resume_data)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._truncate_csv()
        self.writer = None
        if cfg.tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(self.out_dir), purge_step=self.update + 1)

    # ---------------------------------------------------------------- state
    def _rng_state(self) -> dict[str, Any]:
        return {"torch": torch.get_rng_state(), "numpy": self.rng.bit_generator.state}

    def _restore(self, data: dict[str, Any]) -> None:
        self.model.load_state_dict(model_from_checkpoint(data, self.ckpt_path).state_dict())
        self.optimizer.load_state_dict(data["optimizer"])
        self.snapshots = list(data["snapshots"])
        self.update = int(data["update"])
        self.global_step = int(data["global_step"])
        self.hands = int(data["hands"])
        self.elapsed = float(data["elapsed_s"])
        self.last_metrics = dict(data.get("metrics", {}))
        torch.set_rng_state(data["rng"]["torch"])
        self.rng.bit_generator.state = data["rng"]["numpy"]

    def save(self) -> None:
        """Atomic full checkpoint (resume) and, if asked, the exported agent checkpoint."""
        info = {
            "update": self.update,
            "global_step": self.global_step,
            "hands": self.hands,
            "elapsed_s": self.elapsed,
            "metrics": {k: float(v) for k, v in self.last_metrics.items()},
        }
        full = model_payload(self.model, self.cfg, info)
        full["optimizer"] = self.optimizer.state_dict()
        full["snapshots"] = self.snapshots
        full["rng"] = self._rng_state()
        atomic_save(full, self.ckpt_path)
        if self.cfg.export_path:
            atomic_save(model_payload(self.model, self.cfg, info), self.cfg.export_path)

    def _truncate_csv(self) -> None:
        """Drop CSV rows newer than the restored update (the lost interval is redone)."""
        if not self.csv_path.exists():
            return
        with open(self.csv_path, newline="") as f:
            rows = list(csv.DictReader(f))
        keep = [r for r in rows if int(r["update"]) <= self.update]
        if len(keep) != len(rows) or self.update == 0:
            self._write_csv(keep if self.update else [])

    def _write_csv(self, rows: list[dict[str, Any]]) -> None:
        tmp = self.csv_path.with_name(self.csv_path.name + ".tmp")
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
            w.writeheader()
            w.writerows(rows)
        os.replace(tmp, self.csv_path)

    def _log(self, metrics: dict[str, float]) -> None:
        row = {k: metrics.get(k, "") for k in CSV_FIELDS}
        new = not self.csv_path.exists()
        with open(self.csv_path, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
            if new:
                w.writeheader()
            w.writerow(row)
        if self.writer is not None:
            for k, v in metrics.items():
                if k in TB_GROUPS and v == v:
                    self.writer.add_scalar(f"{TB_GROUPS[k]}/{k}", v, self.update)

    # ---------------------------------------------------------------- rollout
    def _start_interval(self) -> None:
        """Fresh engine and empty staging; done at every checkpoint boundary so that a
        resumed run replays exactly what an uninterrupted one does (in-progress hands of the
        previous interval are dropped: at most one per engine slot per interval)."""
        cfg = self.cfg
        n = cfg.num_envs
        env_seed = int(np.random.SeedSequence([cfg.seed, self.update]).generate_state(1)[0])
        self.env = self.env_factory(n, env_seed)
        obs, mask, seat = self.env.reset(seed=env_seed)
        self.obs, self.mask, self.seat = np.asarray(obs), np.asarray(mask), np.asarray(seat)
        if self.rule_agent is not None:
            self.rule_agent.reset(seed=env_seed)
        length = MAX_LEARNER_STEPS_PER_HAND
        self.st_obs = np.zeros((n, length, OBS_SIZE), np.uint8)
        self.st_mask = np.zeros((n, length, N_ACTIONS), np.int8)
        self.st_act = np.zeros((n, length), np.int64)
        self.st_logp = np.zeros((n, length), np.float32)
        self.st_val = np.zeros((n, length), np.float32)
        self.st_seat = np.zeros((n, length), np.int8)
        self.st_hid = np.zeros((n, length, HIDDEN_HANDS_SIZE if cfg.central_value else 0), np.uint8)
        self.st_len = np.zeros(n, np.int64)
        self.learner_team = self.rng.integers(0, 2, n)
        self.opp = self._draw_opponents(n)

    def _draw_opponents(self, n: int) -> np.ndarray:
        opp = self.rng.choice(len(OPPONENTS), size=n, p=self.cfg.opponent_probs())
        if not self.snapshots:
            opp[opp == OPPONENTS.index("snapshot")] = OPPONENTS.index("self")
        return opp

    def rollout(self) -> dict[str, np.ndarray]:
        """num_steps engine steps; returns the finished hands' learner transitions."""
        cfg, dev = self.cfg, self.device
        n = cfg.num_envs
        rows = np.arange(n)
        if self.snapshots:
            pick = int(self.rng.integers(len(self.snapshots)))
            self.snapshot_model.load_state_dict(self.snapshots[pick])
        self.opp_points = np.zeros(len(OPPONENTS))
        self.opp_hands = np.zeros(len(OPPONENTS))
        done_chunks: list[tuple[np.ndarray, np.ndarray]] = []  # (env ids, rewards (k, 4))
        done_data: list[dict[str, np.ndarray]] = []
        self.model.eval()
        for _ in range(cfg.num_steps):
            obs, mask, seat = self.obs, self.mask, self.seat
            learner = (self.opp == 0) | ((seat & 1) == self.learner_team)
            actions = np.zeros(n, np.int64)
            with torch.no_grad():
                idx = np.flatnonzero(learner)
                if len(idx):
                    o = torch.from_numpy(obs[idx]).to(dev)
                    m = torch.from_numpy(mask[idx]).to(dev)
                    hid = None
                    if cfg.central_value:
                        hid_np = hidden_hands(self.env.state(), seat)[idx]
                        hid = torch.from_numpy(hid_np).to(dev)
                    logits, values = self.model(o, m, hid)
                    a, logp = sample_masked(logits, m)
                    a_np = a.cpu().numpy()
                    actions[idx] = a_np
                    pos = self.st_len[idx]
                    self.st_obs[idx, pos] = obs[idx]
                    self.st_mask[idx, pos] = mask[idx]
                    self.st_act[idx, pos] = a_np
                    self.st_logp[idx, pos] = logp.cpu().numpy()
                    self.st_val[idx, pos] = values.cpu().numpy()
                    self.st_seat[idx, pos] = seat[idx]
                    if cfg.central_value:
                        self.st_hid[idx, pos] = hid_np
                    self.st_len[idx] += 1
                snap = np.flatnonzero(~learner & (self.opp == 1))
                if len(snap):
                    ms = torch.from_numpy(mask[snap]).to(dev)
                    logits = self.snapshot_model.logits(torch.from_numpy(obs[snap]).to(dev), ms)
                    a, _ = sample_masked(logits, ms)
                    actions[snap] = a.cpu().numpy()
            rule = np.flatnonzero(~learner & (self.opp == 2))
            if len(rule):
                actions[rule] = self.rule_agent.act_batch(obs[rule], mask[rule])
            rand = np.flatnonzero(~learner & (self.opp == 3))
            if len(rand):
                actions[rand] = random_actions(mask[rand], self.rng)
            obs, mask, seat, rewards, done = self.env.step(actions)
            self.obs, self.mask, self.seat = np.asarray(obs), np.asarray(mask), np.asarray(seat)
            done = np.asarray(done)
            self.global_step += n
            if done.any():
                d = rows[done]
                keep = d[self.st_len[d] > 0]
                if len(keep):
                    done_chunks.append((keep, np.asarray(rewards)[keep] * cfg.reward_scale))
                    done_data.append(
                        {
                            "obs": self.st_obs[keep].copy(),
                            "mask": self.st_mask[keep].copy(),
                            "act": self.st_act[keep].copy(),
                            "logp": self.st_logp[keep].copy(),
                            "val": self.st_val[keep].copy(),
                            "seat": self.st_seat[keep].copy(),
                            "hid": self.st_hid[keep].copy(),
                            "len": self.st_len[keep].copy(),
                        }
                    )
                raw = np.asarray(rewards)[d, self.learner_team[d]]
                np.add.at(self.opp_points, self.opp[d], raw)
                np.add.at(self.opp_hands, self.opp[d], 1)
                self.hands += len(d)
                self.st_len[d] = 0
                self.learner_team[d] = self.rng.integers(0, 2, len(d))
                self.opp[d] = self._draw_opponents(len(d))
        if not done_data:
            return {}
        batch = {k: np.concatenate([c[k] for c in done_data]) for k in done_data[0]}
        batch["rew"] = np.concatenate([r for _, r in done_chunks]).astype(np.float64)
        return batch

    # ---------------------------------------------------------------- update
    def ppo_update(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        """Per-seat GAE on the finished hands, then clipped PPO epochs over minibatches."""
        cfg, dev = self.cfg, self.device
        adv, ret = per_seat_gae(
            batch["val"], batch["seat"], batch["len"], batch["rew"], cfg.gamma, cfg.gae_lambda
        )
        valid = np.arange(batch["val"].shape[1])[None, :] < batch["len"][:, None]
        b_obs = torch.from_numpy(batch["obs"][valid]).to(dev)
        b_mask = torch.from_numpy(batch["mask"][valid]).to(dev)
        b_act = torch.from_numpy(batch["act"][valid]).to(dev)
        b_logp = torch.from_numpy(batch["logp"][valid]).to(dev)
        b_val = torch.from_numpy(batch["val"][valid]).to(dev)
        b_hid = torch.from_numpy(batch["hid"][valid]).to(dev) if cfg.central_value else None
        b_adv = torch.from_numpy(adv[valid]).to(dev)
        b_ret = torch.from_numpy(ret[valid]).to(dev)
        size = len(b_act)
        mb = max(1, math.ceil(size / cfg.num_minibatches))
        if cfg.anneal_lr:
            frac = 1.0 - self.update / cfg.total_updates
            self.optimizer.param_groups[0]["lr"] = frac * cfg.learning_rate
        self.model.train()
        stats: dict[str, list[float]] = {k: [] for k in ("pg", "v", "ent", "kl", "clip")}
        for _ in range(cfg.update_epochs):
            perm = torch.randperm(size, device=dev)
            for start in range(0, size, mb):
                j = perm[start : start + mb]
                hid = None if b_hid is None else b_hid[j]
                logits, value = self.model(b_obs[j], b_mask[j], hid)
                logp_all = masked_log_probs(logits, b_mask[j])
                new_logp = logp_all.gather(-1, b_act[j][:, None]).squeeze(-1)
                entropy = masked_entropy(logits, b_mask[j]).mean()
                log_ratio = new_logp - b_logp[j]
                ratio = log_ratio.exp()
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - log_ratio).mean()
                    clipfrac = ((ratio - 1.0).abs() > cfg.clip_coef).float().mean()
                a = b_adv[j]
                if cfg.norm_adv and len(j) > 1:
                    a = (a - a.mean()) / (a.std() + 1e-8)
                pg_loss = torch.max(
                    -a * ratio, -a * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)
                ).mean()
                if cfg.clip_vloss:
                    v_clip = b_val[j] + (value - b_val[j]).clamp(-cfg.clip_coef, cfg.clip_coef)
                    v_loss = (
                        0.5 * torch.max((value - b_ret[j]) ** 2, (v_clip - b_ret[j]) ** 2).mean()
                    )
                else:
                    v_loss = 0.5 * ((value - b_ret[j]) ** 2).mean()
                loss = pg_loss - cfg.ent_coef * entropy + cfg.vf_coef * v_loss
                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
                for k, v in zip(
                    ("pg", "v", "ent", "kl", "clip"),
                    (pg_loss, v_loss, entropy, approx_kl, clipfrac),
                    strict=True,
                ):
                    stats[k].append(float(v.detach()))
            if cfg.target_kl is not None and stats["kl"][-1] > cfg.target_kl:
                break
        var_y = float(b_ret.var()) if size > 1 else float("nan")
        explained = float("nan") if not var_y > 0 else 1 - float((b_ret - b_val).var()) / var_y
        return {
            "loss_policy": float(np.mean(stats["pg"])),
            "loss_value": float(np.mean(stats["v"])),
            "entropy": float(np.mean(stats["ent"])),
            "approx_kl": float(np.mean(stats["kl"])),
            "clipfrac": float(np.mean(stats["clip"])),
            "explained_variance": explained,
            "batch_transitions": float(size),
            "learning_rate": float(self.optimizer.param_groups[0]["lr"]),
        }

    # ---------------------------------------------------------------- evaluation
    def evaluate_now(self) -> dict[str, float]:
        """Points/hand of the greedy policy vs random and vs rule-based (fixed deal set)."""
        cfg = self.cfg
        self.model.eval()
        pol = greedy_policy(self.model, self.device)
        eval_rng = np.random.default_rng(cfg.eval_seed)
        out: dict[str, float] = {}
        if cfg.eval_backend == "arena":
            from agents.arena import duel
            from agents.ppo_agent import PPOAgent

            me = PPOAgent.from_model(self.model, device=str(self.device), seed=0)
            names = ("random", "rule") if self.rule_agent is not None else ("random",)
            for name in names:
                r = duel(me, name, n_deals=cfg.eval_deals, seed=cfg.eval_seed)
                out[f"eval_{name}_mean"] = r.mean
                out[f"eval_{name}_ci95"] = r.ci_half_width
            return out
        opponents: dict[str, Callable] = {"random": lambda o, m: random_actions(m, eval_rng)}
        if self.rule_agent is not None:
            rule = make_rule_agent(cfg.eval_seed)
            opponents["rule"] = rule.act_batch
        for name, opp in opponents.items():
            r = evaluate(pol, opp, cfg.eval_deals, cfg.eval_seed, self.env_factory)
            out[f"eval_{name}_mean"] = r["mean"]
            out[f"eval_{name}_ci95"] = r["ci95"]
        return out

    # ---------------------------------------------------------------- loop
    def done(self) -> bool:
        cfg = self.cfg
        if cfg.total_updates and self.update >= cfg.total_updates:
            return True
        return bool(cfg.total_minutes) and self.elapsed >= cfg.total_minutes * 60

    def train(self, on_update: Callable[[Trainer], None] | None = None) -> dict[str, float]:
        """Run until the budget is spent; returns the last metrics row."""
        from tqdm import tqdm

        cfg = self.cfg
        total = cfg.total_updates or None
        bar = tqdm(total=total, initial=self.update, disable=not cfg.progress, unit="upd")
        t_last = time.perf_counter()
        while not self.done():
            if self.update % cfg.checkpoint_every == 0 or not hasattr(self, "env"):
                self._start_interval()
            if self.update % cfg.snapshot_every == 0:
                sd = {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}
                self.snapshots = (self.snapshots + [sd])[-cfg.snapshot_pool :]
            steps0 = self.global_step
            batch = self.rollout()
            metrics = self.ppo_update(batch) if batch else {}
            self.update += 1
            now = time.perf_counter()
            dt, t_last = now - t_last, now
            self.elapsed += dt
            for i, opp in enumerate(OPPONENTS[1:], start=1):
                if self.opp_hands[i]:
                    metrics[f"train_vs_{opp}"] = self.opp_points[i] / self.opp_hands[i]
            metrics.update(
                update=self.update,
                global_step=self.global_step,
                hands=self.hands,
                minutes=self.elapsed / 60.0,
                steps_per_second=(self.global_step - steps0) / max(dt, 1e-9),
            )
            if cfg.eval_every and self.update % cfg.eval_every == 0:
                t0 = time.perf_counter()
                metrics.update(self.evaluate_now())
                metrics["eval_seconds"] = time.perf_counter() - t0
                t_last = time.perf_counter()
                self.elapsed += metrics["eval_seconds"]
            self.last_metrics = metrics
            self._log(metrics)
            if self.update % cfg.checkpoint_every == 0 or self.done():
                self.save()
            bar.update(1)
            bar.set_postfix(
                {
                    k: f"{metrics[k]:.3g}"
                    for k in ("entropy", "train_vs_rule", "eval_random_mean", "eval_rule_mean")
                    if k in metrics
                }
                | {"min": f"{self.elapsed / 60:.1f}"}
            )
            if on_update is not None:
                on_update(self)
        bar.close()
        if self.writer is not None:
            self.writer.close()
        return self.last_metrics


CSV_FIELDS = (
    "update", "global_step", "hands", "minutes", "steps_per_second", "batch_transitions",
    "train_vs_snapshot", "train_vs_rule", "train_vs_random",
    "loss_policy", "loss_value", "entropy", "approx_kl", "clipfrac", "explained_variance",
    "learning_rate", "eval_random_mean", "eval_random_ci95", "eval_rule_mean", "eval_rule_ci95",
    "eval_seconds",
)  # fmt: skip
TB_GROUPS = {
    **{k: "losses" for k in ("loss_policy", "loss_value", "entropy", "approx_kl", "clipfrac")},
    **{k: "charts" for k in ("explained_variance", "learning_rate")},
    **{k: "charts" for k in ("steps_per_second", "batch_transitions", "hands", "minutes")},
    **{k: "eval" for k in CSV_FIELDS if k.startswith("eval_")},
    **{k: "train" for k in CSV_FIELDS if k.startswith("train_vs_")},
}


def main(argv: list[str] | None = None) -> None:
    """CLI entry: parse the Config with tyro and train."""
    import tyro

    cfg = tyro.cli(Config, args=argv, description=__doc__.split("\n\n")[0])
    try:
        cfg.validate()
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from exc
    metrics = Trainer(cfg).train()
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()})


if __name__ == "__main__":
    main()
