"""``--skip-forced``: the learner's forced moves (one legal action) are played without the
network and never stored. What makes that safe is checked here: such a decision carries no
policy gradient and no entropy, the hands still end with every card played, and what is
stored is exactly the learner's other decisions, on both engines."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from tests.extras import need

torch = need("torch")

from agents.ppo_net import masked_entropy, masked_log_probs  # noqa: E402
from tests.test_ppo import tiny_config  # noqa: E402
from tests.test_ppo_device import CPU, finished_hands, rollout_setup  # noqa: E402
from train.ppo import NumpyArrays, TorchArrays, model_for, train  # noqa: E402
from train.ppo_checkpoint import resumed_config  # noqa: E402


def forced_rows(n: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` observations-free rows of logits and masks with exactly one legal action."""
    mask = torch.zeros((n, 56), dtype=torch.int8)
    mask[torch.arange(n), torch.as_tensor(rng.integers(0, 48, n))] = 1
    logits = torch.as_tensor(rng.normal(0, 3, (n, 56)), dtype=torch.float32)
    return logits.requires_grad_(True), mask


def test_a_forced_move_has_no_policy_gradient_and_no_entropy() -> None:
    logits, mask = forced_rows(64, np.random.default_rng(0))
    act = mask.argmax(1)
    logp = masked_log_probs(logits, mask).gather(-1, act[:, None]).squeeze(-1)
    entropy = masked_entropy(logits, mask)
    assert torch.equal(logp, torch.zeros(64)) and torch.equal(entropy, torch.zeros(64))
    adv = torch.as_tensor(np.random.default_rng(1).normal(size=64), dtype=torch.float32)
    ratio = (logp - logp.detach()).exp()  # PPO's ratio against the acting policy
    (-(adv * ratio).mean() - 0.01 * entropy.mean()).backward()
    assert logits.grad is not None and torch.equal(logits.grad, torch.zeros_like(logits))


def test_with_two_legal_actions_there_is_a_gradient() -> None:
    """The check above can fail: one more legal card and the gradient is there."""
    logits, mask = forced_rows(64, np.random.default_rng(0))
    mask[:, 50] = 1
    logp = masked_log_probs(logits, mask).gather(-1, mask[:, :48].argmax(1)[:, None])
    logp.sum().backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 1


def stored_hands(tmp_path: Path, xp: NumpyArrays, skip: bool) -> list[dict[str, np.ndarray]]:
    """The finished hands of four rollouts of 30 steps (every hand spans rollouts)."""
    setup = rollout_setup(tmp_path, xp, num_steps=30, skip_forced=skip)
    hands = list(finished_hands(setup, 4))
    assert len(hands) >= 2 * setup[3].num_envs
    return hands


@pytest.mark.parametrize("kind", [NumpyArrays, TorchArrays])
def test_forced_moves_are_played_but_not_stored(tmp_path: Path, kind: type[NumpyArrays]) -> None:
    """Off: every hand holds its team's 24 card plays (48 in self-play), some forced. On:
    none is forced, the others are all there (a hand's last trick is always forced, so each
    seat stores at most 11 card plays), and the hands still end (they are collected)."""
    off = stored_hands(tmp_path / "off", kind(CPU), skip=False)
    on = stored_hands(tmp_path / "on", kind(CPU), skip=True)
    legal_off = np.concatenate([h["mask"].sum(1) for h in off])
    assert (legal_off == 1).mean() > 0.15  # the recipe's rollouts: about a quarter forced
    for h in on:
        legal = h["mask"].sum(1)
        assert (legal >= 2).all()
        plays = h["mask"][:, :48].any(1)
        per_seat = np.bincount(h["seat"][plays], minlength=4)
        assert per_seat.max() <= 11
        assert np.take_along_axis(h["mask"], h["act"][:, None], 1).all()  # legal actions only
    plays_off = np.mean([h["mask"][:, :48].any(1).sum() for h in off])
    plays_on = np.mean([h["mask"][:, :48].any(1).sum() for h in on])
    assert plays_on < 0.85 * plays_off


def test_a_run_with_forced_moves_skipped_trains(tmp_path: Path) -> None:
    metrics = train(tiny_config(tmp_path, skip_forced=True))
    assert np.isfinite(metrics["loss_policy"]) and metrics["global_step"] > 0


def test_a_checkpoint_from_before_the_option_resumes_with_it_off(tmp_path: Path) -> None:
    """A run saved before ``skip_forced`` (or ``adv_per_multiplier``) existed had them off:
    its resume must not switch them on, whatever today's defaults say."""
    cfg = tiny_config(tmp_path, skip_forced=True, adv_per_multiplier=True)
    saved = {k: v for k, v in asdict(cfg).items() if k not in ("skip_forced", "adv_per_multiplier")}
    arch = model_for(cfg).arch
    own = resumed_config(cfg, saved, arch)
    assert own.skip_forced is False and own.adv_per_multiplier is False
    assert resumed_config(cfg, asdict(cfg), arch).skip_forced is True  # a saved value wins
