"""PPO with the torch engine (``--engine torch``): TorchBatchedEnv on the training device, the
rollout, opponents, GAE and update there. CPU runs here (CI); CUDA variants skip without one."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.extras import need

torch = need("torch")

from agents import make_agent  # noqa: E402
from agents.ppo_net import load_checkpoint  # noqa: E402
from agents.random_agent import RandomAgent  # noqa: E402
from tests.test_ppo import tiny_config  # noqa: E402
from train.ppo import (  # noqa: E402
    Config,
    NumpyArrays,
    OpponentPool,
    TorchArrays,
    collect_rollout,
    model_for,
    per_seat_gae,
    per_seat_gae_torch,
    start_rollouts,
    train,
)

CUDA = torch.cuda.is_available()


def device_config(tmp_path: Path, **kw: Any) -> Config:
    """A tiny run through the torch engine, every opponent kind drawn, the teacher asked."""
    base = tiny_config(
        tmp_path, engine="torch", device="cpu", opp_self=0.2, opp_snapshot=0.2, opp_rule=0.4,
        opp_random=0.2, teacher_bid_floor=0.3, num_steps=30,
    )  # fmt: skip
    return replace(base, **kw)


def test_torch_engine_trains_and_writes_a_loadable_checkpoint(tmp_path: Path) -> None:
    export = tmp_path / "agent.pt"
    cfg = device_config(tmp_path, export_path=str(export))
    torch.manual_seed(cfg.seed)
    initial = model_for(cfg).state_dict()
    metrics = train(cfg)
    for name in ("loss_policy", "loss_value", "loss_teacher", "entropy"):
        assert math.isfinite(metrics[name]), name
    assert metrics["batch_transitions"] > 0 and metrics["hands"] > 0
    saved = load_checkpoint(cfg.checkpoint_path)
    assert saved["config"]["engine"] == "torch"
    assert all(v.device.type == "cpu" for v in saved["model"].values())
    assert any(not torch.equal(initial[k], v) for k, v in saved["model"].items())
    rows = cfg.csv_path.read_text().strip().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["1", "2", "3", "4"]
    # the exported agent loads on CPU (weights_only) and plays the arena
    from agents.evaluation.arena import duel

    result = duel(make_agent(f"ppo:{export}", seed=1), "random", n_deals=8, seed=0)
    assert result.summary()


def test_torch_engine_same_seed_same_weights_and_resume_is_bit_exact(tmp_path: Path) -> None:
    train(device_config(tmp_path / "a"))

    class Crash(RuntimeError):
        pass

    def crash_at_3(metrics: dict[str, float]) -> None:
        if metrics["update"] == 3:
            raise Crash

    cfg = device_config(tmp_path / "b")
    with pytest.raises(Crash):
        train(cfg, on_update=crash_at_3)
    assert load_checkpoint(cfg.checkpoint_path)["update"] == 2
    train(replace(cfg, resume=True))
    full = load_checkpoint(tmp_path / "a" / "t" / "checkpoint.pt")
    resumed = load_checkpoint(cfg.checkpoint_path)
    assert resumed["update"] == 4
    for k, a in full["model"].items():
        assert torch.equal(a, resumed["model"][k]), k


def one_rollout(tmp_path: Path, xp: NumpyArrays) -> dict[str, Any]:
    cfg = device_config(tmp_path, num_steps=64)
    torch.manual_seed(0)
    model = model_for(cfg)
    rng = np.random.default_rng(0)
    from agents.rule_based import RuleBasedAgent
    from train.ppo import on_device

    rule = RuleBasedAgent()
    agent = on_device(rule, "opponent") if isinstance(xp, TorchArrays) else rule
    pool = OpponentPool(model_for(cfg), agent, agent)
    pool.add_snapshot(model, 2)
    st = start_rollouts(cfg, 0, xp.make_env, rng, pool, 0.0, xp)
    st.ask_teacher = True
    batch, stats = collect_rollout(st, model, pool, cfg, rng, torch.device("cpu"))
    assert batch is not None and stats.hands.sum() > 0
    return batch


def test_torch_rollout_gives_the_same_kinds_of_batches(tmp_path: Path) -> None:
    cpu = torch.device("cpu")
    host = one_rollout(tmp_path, NumpyArrays(cpu))
    dev = one_rollout(tmp_path, TorchArrays(cpu))
    assert host.keys() == dev.keys()
    for k, a in host.items():
        t = dev[k]
        assert isinstance(t, torch.Tensor) and isinstance(a, np.ndarray), k
        assert t.shape[1:] == a.shape[1:], k
        assert str(t.dtype).removeprefix("torch.") == str(a.dtype), k
    # the teacher answered somewhere, and only legal actions were stored
    assert (dev["teach"] >= 0).any()
    act, mask, length = dev["act"], dev["mask"], dev["len"]
    valid = torch.arange(act.shape[1])[None, :] < length[:, None]
    assert mask.gather(-1, act[..., None]).squeeze(-1)[valid].bool().all()


def test_per_seat_gae_torch_matches_numpy() -> None:
    rng = np.random.default_rng(4)
    hands, length = 7, 12
    values = rng.normal(size=(hands, length)).astype(np.float32)
    seats = rng.integers(0, 4, (hands, length)).astype(np.int8)
    lengths = rng.integers(1, length + 1, hands).astype(np.int64)
    rewards = rng.normal(size=(hands, 4))
    adv, ret = per_seat_gae(values, seats, lengths, rewards, 0.99, 0.9)
    t = torch.from_numpy
    adv_t, ret_t = per_seat_gae_torch(t(values), t(seats), t(lengths), t(rewards), 0.99, 0.9)
    np.testing.assert_allclose(adv_t.numpy(), adv, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ret_t.numpy(), ret, rtol=1e-6, atol=1e-6)


def test_a_registry_opponent_falls_back_to_the_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = device_config(tmp_path, total_updates=2, checkpoint_every=2)
    metrics = train(cfg, opponent=RandomAgent(seed=0))
    assert "runs on the host" in capsys.readouterr().err
    assert math.isfinite(metrics["loss_policy"])


def test_engine_and_device_are_checked() -> None:
    with pytest.raises(ValueError, match="engine must be 'numpy' or 'torch'"):
        replace(device_config(Path(".")), engine="jax").validate()


@pytest.mark.skipif(CUDA, reason="checks the refusal where CUDA is missing")
def test_cuda_without_cuda_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="'cuda' asked for but it is not available.*'cpu'"):
        replace(device_config(Path(".")), device="cuda").validate()


@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_cuda_torch_engine_trains_and_loads_on_cpu(tmp_path: Path) -> None:
    export = tmp_path / "agent.pt"
    cfg = device_config(tmp_path, device="cuda", export_path=str(export), deterministic=False)
    metrics = train(cfg)
    assert math.isfinite(metrics["loss_policy"]) and metrics["batch_transitions"] > 0
    saved = torch.load(cfg.checkpoint_path, map_location="cpu", weights_only=True)
    assert all(v.device.type == "cpu" for v in saved["model"].values())
    from agents.evaluation.arena import duel

    assert duel(make_agent(f"ppo:{export}", seed=1), "random", n_deals=8, seed=0).summary()


@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_cuda_rollout_stays_on_the_device(tmp_path: Path) -> None:
    cfg = device_config(tmp_path, device="cuda")
    xp = TorchArrays(torch.device("cuda"))
    torch.manual_seed(0)
    model = model_for(cfg).cuda()
    from agents.rule_based import RuleBasedAgent
    from train.ppo import on_device

    rule = RuleBasedAgent()
    pool = OpponentPool(model_for(cfg).cuda(), on_device(rule, "o"), on_device(rule, "t"))
    rng = np.random.default_rng(0)
    st = start_rollouts(cfg, 0, xp.make_env, rng, pool, 0.0, xp)
    st.ask_teacher = True
    batch, _ = collect_rollout(st, model, pool, cfg, rng, torch.device("cuda"))
    assert batch is not None
    assert all(torch.as_tensor(v).device.type == "cuda" for v in batch.values())
