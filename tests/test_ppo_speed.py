"""The trainer's faster paths compute what the plain ones do: the network inputs computed once
per batch, the card head on the legal cards only, acting without the belief head, the
bfloat16 update option, the learner-decision rate, and the profile's exclusive timers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.extras import need

torch = need("torch")

from agents.ppo_net import ActorCritic, hidden_hands, masked_log_probs  # noqa: E402
from butifarra_env.envs.batched import BatchedEnv  # noqa: E402
from tests.test_ppo import tiny_config  # noqa: E402
from train.ppo import train  # noqa: E402

RECIPE = (True, True, True, True, True, True)
"""The shipped network's options, in ActorCritic's order after the width and depth:
central_value, canonical_suits, mask_input, belief, card_features, card_head."""


def positions(n: int = 64, steps: int = 60, seed: int = 5) -> tuple[Any, ...]:
    """(obs, mask, hidden hands) of every slot at each step of random play: bids, doublings,
    trump choices and every trick, the decisions a training batch holds."""
    env, rng = BatchedEnv(n, seed=seed), np.random.default_rng(seed)
    obs, mask, seat = (np.asarray(x) for x in env.reset(seed=seed))
    out: list[list[np.ndarray]] = [[], [], []]
    for _ in range(steps):
        out[0].append(obs)
        out[1].append(mask)
        out[2].append(hidden_hands(np.asarray(env.state()), seat))
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        obs, mask, seat, _, _ = (np.asarray(x) for x in env.step(actions))
    return tuple(torch.from_numpy(np.concatenate(x)) for x in out)


@pytest.fixture(scope="module")
def batch() -> tuple[Any, ...]:
    return positions()


def test_the_training_path_gives_the_plain_policy_and_values(batch: tuple) -> None:
    """Inputs computed once and read by minibatch, with the card head on the legal cards
    only, give the masked log-probabilities, values and belief loss of ``forward_all`` (to
    float rounding: the products run over other rows); only the raw logits of illegal cards,
    masked everywhere, differ."""
    obs, mask, hid = batch
    torch.manual_seed(0)
    model = ActorCritic(64, 2, *RECIPE)
    legal = mask.bool()
    assert 0 < float(legal[:, :48].sum(1).float().mean()) < 12  # some held cards are illegal
    with torch.no_grad():
        plain = model.forward_all(obs, mask, hid)
        inputs = model.inputs(obs, mask, legal_cards=True)
        fast = model.forward_inputs(inputs, hid)
        rows = torch.arange(7, len(obs), 3)
        part = model.forward_inputs(inputs.rows(rows), hid[rows])
    close = {"rtol": 1e-5, "atol": 1e-6}
    logp = masked_log_probs(fast[0], mask)
    torch.testing.assert_close(logp, masked_log_probs(plain[0], mask), **close)
    torch.testing.assert_close(fast[0][legal], plain[0][legal], **close)
    torch.testing.assert_close(fast[1], plain[1], **close)
    torch.testing.assert_close(fast[2], plain[2], **close)
    gap = (fast[0] - plain[0]).abs()
    assert float(gap[~legal].max()) > 1e-4 > float(gap[legal].max())  # illegal: no head term
    torch.testing.assert_close(part[0][legal[rows]], plain[0][rows][legal[rows]])
    torch.testing.assert_close(part[1], plain[1][rows])


def test_acting_skips_the_belief_head_only(batch: tuple) -> None:
    """``forward`` (what acting calls) gives forward_all's logits and values and needs no
    hidden hands for a belief model without a central critic; the loss path does."""
    obs, mask, hid = batch
    model = ActorCritic(hidden=32, layers=1, belief=True, card_head=True)
    logits, values = model(obs, mask)
    ref = model.forward_all(obs, mask, hid)
    assert torch.equal(logits, ref[0]) and torch.equal(values, ref[1])
    with pytest.raises(ValueError, match="hidden hands"):
        model.forward_all(obs, mask)


def test_gradients_reach_the_card_head_through_the_legal_cards(batch: tuple) -> None:
    """The legal-card path trains the card head as the plain one does: same gradients of a
    masked loss."""
    obs, mask, hid = batch
    torch.manual_seed(1)
    model = ActorCritic(32, 1, *RECIPE)
    grads = []
    for fast in (False, True):
        model.zero_grad()
        if fast:
            logits, values, belief = model.forward_inputs(
                model.inputs(obs, mask, legal_cards=True), hid
            )
        else:
            logits, values, belief = model.forward_all(obs, mask, hid)
        assert belief is not None
        (masked_log_probs(logits, mask).max(-1).values.sum() + values.sum() + belief).backward()
        grads.append({k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None})
    assert len(grads[0]) == len(grads[1]) == len(list(model.parameters()))
    assert float(grads[1]["card_logit.weight"].abs().sum()) > 0
    # atol 1e-4: the shared card bias's gradient is a sum of softmax terms that cancel
    # (about 1e-5 of float rounding, in either order of summation); a wrong path moves
    # gradients by their own size (0.01 and up)
    for name, g in grads[0].items():
        torch.testing.assert_close(grads[1][name], g, rtol=1e-4, atol=1e-4, msg=name)


def test_metrics_carry_the_learner_decision_rate(tmp_path: Path) -> None:
    """Each update's row says how many learner decisions per second it trained: its batch
    over its time, the engine steps' rate scaled by the batch's share of the steps."""
    rows: list[dict[str, float]] = []
    cfg = tiny_config(tmp_path, total_updates=2)
    train(cfg, rows.append)
    steps = cfg.num_envs * cfg.num_steps
    for r in rows:  # an update in which no hand finished trains nothing
        expected = r.get("batch_transitions", 0.0) * r["steps_per_second"] / steps
        assert r["learner_decisions_per_second"] == pytest.approx(expected, rel=1e-9)
    assert max(r["learner_decisions_per_second"] for r in rows) > 0


def test_a_bf16_update_trains_and_repeats_itself(tmp_path: Path) -> None:
    """``update_bf16`` runs the update's products in bfloat16: the run trains (finite losses,
    weights move), the same seed gives the same run, and it is not the float32 run."""
    cfg = replace(
        tiny_config(tmp_path, total_updates=2), central_value=True, belief=True,
        card_features=True, card_head=True, update_bf16=True,
    )  # fmt: skip
    a = train(cfg)
    b = train(replace(cfg, run_name="again"))
    c = train(replace(cfg, run_name="float32", update_bf16=False))
    assert all(np.isfinite(a[k]) for k in ("loss_policy", "loss_value", "loss_belief"))
    assert a["loss_value"] == b["loss_value"] and a["loss_policy"] == b["loss_policy"]
    assert a["loss_value"] != c["loss_value"]


def test_profile_timers_count_nested_time_once() -> None:
    """The profile's timers give each call its own time minus the timed calls inside it, so
    the rows add up to the time measured."""
    from benchmarks.profile_training import Timers

    now = [0.0]

    def clock() -> float:
        return now[0]

    timers = Timers(clock)

    def inner() -> None:
        now[0] += 2.0

    def outer() -> None:
        now[0] += 1.0
        timed_inner()
        now[0] += 0.5

    timed_inner = timers.wrap(inner, "inner")
    timed_outer = timers.wrap(outer, lambda stack: f"outer under {len(stack)}")
    timed_outer()
    timed_inner()
    assert dict(timers.seconds) == {"outer under 0": 1.5, "inner": 4.0}
    assert dict(timers.calls) == {"outer under 0": 1, "inner": 2}
