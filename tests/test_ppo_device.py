"""PPO with the torch engine: TorchBatchedEnv on the training device, the rollout, opponents,
GAE and update there; which engine a run gets (``--engine auto``: torch on a named
``--device``). CPU runs here (CI); CUDA variants skip without one."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.extras import need

torch = need("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from agents import make_agent  # noqa: E402
from agents.ppo_net import load_checkpoint  # noqa: E402
from agents.random_agent import RandomAgent  # noqa: E402
from agents.rule_based import RuleBasedAgent  # noqa: E402
from agents.rule_batch import decide_batch  # noqa: E402
from tests.test_ppo import assert_same_weights, tiny_config, train_crashing_at  # noqa: E402
from train import ppo_checkpoint  # noqa: E402
from train.ppo import (  # noqa: E402
    Config,
    DeviceRuleAgent,
    NumpyArrays,
    OpponentPool,
    RolloutState,
    TorchArrays,
    begin_rollout,
    collect_rollout,
    device_players,
    model_for,
    parse_config,
    per_seat_gae,
    per_seat_gae_torch,
    rollout_step,
    start_rollouts,
    train,
)

CUDA = torch.cuda.is_available()
CPU = torch.device("cpu")


def device_config(tmp_path: Path, **kw: Any) -> Config:
    """A tiny run through the torch engine, every opponent kind drawn, the teacher asked."""
    base = tiny_config(
        tmp_path, engine="torch", device="cpu", opp_self=0.2, opp_snapshot=0.2, opp_rule=0.4,
        opp_random=0.2, teacher_bid_floor=0.3, num_steps=30,
    )  # fmt: skip
    return replace(base, **kw)


# ----------------------------------------------------------------------------- which engine
@pytest.mark.parametrize(
    ("flags", "engine"),
    [
        ([], "numpy"),  # the shipped recipe: no device flag, the numpy engine
        (["--device", "cpu"], "torch"),
        (["--engine", "numpy", "--device", "cpu"], "numpy"),
        (["--engine", "torch"], "torch"),
        (["--engine", "numpy"], "numpy"),
    ],
)
def test_the_engine_follows_the_device_flag(tmp_path: Path, flags: list[str], engine: str) -> None:
    cfg = parse_config([*flags, "--run-dir", str(tmp_path)])
    assert cfg.resolved_engine == engine
    # the run records what it resolved to (nothing is written before the run starts)
    assert ppo_checkpoint.prepare_run(cfg).cfg.engine == engine
    assert not tmp_path.joinpath(cfg.name).exists()


def test_engine_is_checked() -> None:
    with pytest.raises(ValueError, match="engine must be 'auto'.*'numpy' or 'torch', got 'jax'"):
        replace(device_config(Path(".")), engine="jax").validate()


@pytest.mark.skipif(CUDA, reason="checks the refusal where CUDA is missing")
def test_cuda_without_cuda_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="'cuda' asked for but it is not available.*'cpu'"):
        replace(device_config(Path(".")), device="cuda").validate()


def test_a_resume_keeps_the_engine_of_the_run(tmp_path: Path) -> None:
    """``--resume`` with another ``--device`` keeps the run's engine: a numpy run resumed
    with ``--device cpu`` stays numpy, a torch run resumed without a device flag stays torch;
    a checkpoint from before ``--engine`` existed was a numpy run."""
    for engine, device, resume_device in (("auto", "auto", "cpu"), ("auto", "cpu", "auto")):
        cfg = tiny_config(tmp_path / device, engine=engine, device=device, total_updates=2)
        train(cfg)
        want = cfg.resolved_engine
        train(replace(cfg, device=resume_device, resume=True, total_updates=4))
        saved = load_checkpoint(cfg.checkpoint_path)
        assert (saved["update"], saved["config"]["engine"]) == (4, want)
    old = {k: v for k, v in asdict(Config()).items() if k != "engine"}
    merged = ppo_checkpoint.resumed_config(Config(device="cpu"), old, {})
    assert merged.resolved_engine == "numpy"


# ----------------------------------------------------------------------------- training
def test_torch_engine_trains_and_writes_a_loadable_checkpoint(tmp_path: Path) -> None:
    export = tmp_path / "agent.pt"
    cfg = device_config(tmp_path, engine="auto", export_path=str(export))  # --device cpu
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
    exported = torch.load(export, map_location="cpu", weights_only=True)
    assert exported["config"]["engine"] == "torch"
    from agents.evaluation.arena import duel

    result = duel(make_agent(f"ppo:{export}", seed=1), "random", n_deals=8, seed=0)
    assert result.summary()


def test_torch_engine_same_seed_same_weights_and_resume_is_bit_exact(tmp_path: Path) -> None:
    train(device_config(tmp_path / "a"))
    cfg = device_config(tmp_path / "b")
    train_crashing_at(cfg, 3)
    assert load_checkpoint(cfg.checkpoint_path)["update"] == 2
    train(replace(cfg, resume=True))
    full = load_checkpoint(tmp_path / "a" / "t" / "checkpoint.pt")
    resumed = load_checkpoint(cfg.checkpoint_path)
    assert resumed["update"] == 4
    assert_same_weights(full, resumed)


def test_a_registry_opponent_falls_back_to_the_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = device_config(tmp_path, total_updates=2, checkpoint_every=2)
    metrics = train(cfg, opponent=RandomAgent(seed=0))
    assert "runs on the host" in capsys.readouterr().err
    assert math.isfinite(metrics["loss_policy"])


# ----------------------------------------------------------------------------- the rollout
Setup = tuple[RolloutState, Any, OpponentPool, Config, np.random.Generator]


def rollout_setup(tmp_path: Path, xp: NumpyArrays, **kw: Any) -> Setup:
    """A fresh engine of ``xp``'s kind, every opponent kind possible (a snapshot exists),
    the rule-based opponent and teacher, the teacher asked."""
    cfg = device_config(tmp_path, **{"num_steps": 64, **kw})
    torch.manual_seed(0)
    model = model_for(cfg).to(xp.device)
    rng = np.random.default_rng(0)
    rule = RuleBasedAgent()
    fixed, teacher = device_players(rule, rule) if isinstance(xp, TorchArrays) else (rule, rule)
    assert fixed is teacher  # one rule-based player in both roles (it answers a step once)
    pool = OpponentPool(model_for(cfg).to(xp.device), fixed, teacher)
    pool.add_snapshot(model, 2)
    st = start_rollouts(cfg, 0, xp.make_env, rng, pool, 0.0, xp)
    st.ask_teacher = True
    return st, model, pool, cfg, rng


def finished_hands(setup: Setup, rollouts: int) -> Iterator[dict[str, np.ndarray]]:
    """Each hand finished in ``rollouts`` rollouts of ``setup``, its fields as numpy arrays
    cut to its length (``rew``, one row per hand, left out)."""
    st, model, pool, cfg, rng = setup
    for _ in range(rollouts):
        batch, _ = collect_rollout(st, model, pool, cfg, rng, CPU)
        if batch is None:
            continue
        b = {k: np.asarray(v) for k, v in batch.items() if k != "rew"}
        for h, n in enumerate(b.pop("len")):
            yield {k: v[h, :n] for k, v in b.items()}


def one_rollout(tmp_path: Path, xp: NumpyArrays) -> dict[str, Any]:
    st, model, pool, cfg, rng = rollout_setup(tmp_path, xp)
    batch, stats = collect_rollout(st, model, pool, cfg, rng, xp.device)
    assert batch is not None and stats.hands.sum() > 0
    return batch


def test_torch_rollout_gives_the_same_kinds_of_batches(tmp_path: Path) -> None:
    host = one_rollout(tmp_path, NumpyArrays(CPU))
    dev = one_rollout(tmp_path, TorchArrays(CPU))
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


@pytest.mark.parametrize("kind", [NumpyArrays, TorchArrays])
def test_each_finished_hand_is_one_whole_hand_of_the_learner(
    tmp_path: Path, kind: type[NumpyArrays]
) -> None:
    """Rollouts of 30 steps (a hand takes at least 49: every hand spans two rollouts, so the
    torch engine's buffers carry it over): each finished hand holds the learner's decisions
    of one hand, its team's 24 card plays (all 48 in self-play; forced moves included, with
    ``skip_forced`` off) and nothing of the other team's, and the teacher's action where it
    was asked is the rule-based one."""
    setup = rollout_setup(tmp_path, kind(CPU), num_steps=30, skip_forced=False)
    cfg = setup[3]
    hands = 0
    for hand in finished_hands(setup, 5):
        mask, seat, teach = hand["mask"], hand["seat"], hand["teach"]
        plays = mask[:, :48].any(1)
        assert plays.sum() in (24, 48), plays.sum()
        seats = set(seat[plays].tolist())
        assert seats in ({0, 2}, {1, 3}, {0, 1, 2, 3}), seats
        asked = teach >= 0
        assert asked.any()
        np.testing.assert_array_equal(teach[asked], decide_batch(hand["obs"][asked], mask[asked]))
        hands += 1
    assert hands >= 2 * cfg.num_envs  # the first hands and the next ones


def test_the_device_rule_player_answers_a_step_once() -> None:
    """As opponent and teacher at once it is asked twice about a step's tensors: the second
    answer is the first one's, unless the tensors changed in between."""
    env = TorchArrays(CPU).make_env(16, 0)
    obs, mask, _ = env.reset(seed=0)
    player = DeviceRuleAgent()
    first = player.act_rows(obs, mask, mask[:, 0] >= 0)
    assert player.act_rows(obs, mask, mask[:, 0] >= 0) is first
    np.testing.assert_array_equal(first.numpy(), decide_batch(obs.numpy(), mask.numpy()))
    obs2, mask2, *_ = env.step(first)
    obs.copy_(obs2)  # the same tensors with the next step's contents
    mask.copy_(mask2)
    again = player.act_rows(obs, mask, mask[:, 0] >= 0)
    assert again is not first
    np.testing.assert_array_equal(again.numpy(), decide_batch(obs2.numpy(), mask2.numpy()))


class HostReadFound(AssertionError):
    """An operation inside a rollout step waits for the device or hands a host array to it."""


class _RefuseHostReads(TorchDispatchMode):
    """Every aten call: refuse the ones whose result depends on the tensors' values on the
    host (``.item()`` and ``bool()``, ``nonzero``, boolean indexing, ``masked_select``)."""

    READS = (
        "aten._local_scalar_dense.default", "aten.is_nonzero.default", "aten.nonzero.default",
        "aten.masked_select.default",
    )  # fmt: skip
    INDEXING = (
        "aten.index.Tensor", "aten.index_put.default", "aten.index_put_.default",
        "aten._index_put_impl_.default",
    )  # fmt: skip

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        name = str(func)
        if name in self.READS:
            raise HostReadFound(f"{name} reads the device")
        if name in self.INDEXING and any(
            isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8)
            for i in args[1]
            if i is not None
        ):
            raise HostReadFound(f"{name} with a boolean mask (its shape depends on the values)")
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def no_host_reads() -> Iterator[None]:
    """Fail on any device-to-host read inside the block, on CPU tensors too (where
    ``torch.cuda.set_sync_debug_mode`` sees nothing): the Python reads (``item``,
    ``tolist``, ``bool``, ``int``, ``float``, ``cpu``, ``numpy``, ``nonzero``), the aten ones
    (:class:`_RefuseHostReads`), and host arrays handed to the device (``torch.as_tensor``,
    ``torch.tensor``, ``torch.from_numpy`` of non-tensors: a copy that waits on CUDA)."""

    def refuse(name: str) -> Callable[..., Any]:
        def read(*args: Any, **kwargs: Any) -> Any:
            raise HostReadFound(f"{name} reads the device")

        return read

    def tensors_only(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def make(data: Any, *args: Any, **kwargs: Any) -> Any:
            if not isinstance(data, torch.Tensor):
                raise HostReadFound(f"torch.{name} of a host {type(data).__name__}")
            return real(data, *args, **kwargs)

        return make

    reads = ("item", "tolist", "__bool__", "__int__", "__float__", "__index__", "cpu", "numpy")
    with pytest.MonkeyPatch.context() as mp:
        for name in (*reads, "nonzero"):
            mp.setattr(torch.Tensor, name, refuse(f"Tensor.{name}"))
        mp.setattr(torch, "nonzero", refuse("torch.nonzero"))
        for name in ("as_tensor", "tensor", "from_numpy"):
            mp.setattr(torch, name, tensors_only(name, getattr(torch, name)))
        with _RefuseHostReads():
            yield


@pytest.mark.parametrize("card_head", [False, True])
def test_a_torch_rollout_step_reads_nothing_back(tmp_path: Path, card_head: bool) -> None:
    """Every step of a rollout (learner, snapshot, rule-based and random players, the
    teacher at every decision and at bids only, hands ending and dealt again) issues no
    device-to-host read: on CUDA the host queues the steps without waiting for them. Only
    the rollout's end reads (how many hands finished, the per-opponent counts)."""
    xp = TorchArrays(CPU)
    st, model, pool, cfg, rng = rollout_setup(
        tmp_path, xp, card_features=card_head, card_head=card_head
    )
    stats = begin_rollout(st, pool, rng)
    assert st.may_face.all()  # every player acts
    rollout_step(st, model, pool, cfg, rng, CPU, stats)  # first calls copy tables to the device
    with no_host_reads():
        for step in range(1, cfg.num_steps):
            st.teach_bids_only = step % 2 == 0
            rollout_step(st, model, pool, cfg, rng, CPU, stats)
    assert stats.host().hands.sum() > 0  # hands ended inside the checked steps
    assert st.buffers.collect([]) is not None


def test_the_read_detector_catches_each_kind_of_read() -> None:
    """:func:`no_host_reads` is not blind: each of these reads is caught on CPU."""
    x = torch.arange(6.0)
    reads: list[Callable[[], Any]] = [
        lambda: x[x > 2], lambda: x.sum().item(), lambda: bool(x.any()), lambda: x.tolist(),
        lambda: torch.nonzero(x), lambda: x.nonzero(), lambda: x.numpy(), lambda: x.cpu(),
        lambda: int(x[0]), lambda: torch.as_tensor(np.zeros(2)), lambda: x.masked_select(x > 1),
    ]  # fmt: skip
    for read in reads:
        with pytest.raises(HostReadFound), no_host_reads():
            read()
    with no_host_reads():  # device-side selection is fine
        torch.where(x > 2, x, 0).sum()


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


# ----------------------------------------------------------------------------- CUDA
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_cuda_torch_engine_trains_and_loads_on_cpu(tmp_path: Path) -> None:
    export = tmp_path / "agent.pt"
    cfg = device_config(tmp_path, engine="auto", device="cuda", export_path=str(export))
    metrics = train(replace(cfg, deterministic=False))
    assert math.isfinite(metrics["loss_policy"]) and metrics["batch_transitions"] > 0
    saved = torch.load(cfg.checkpoint_path, map_location="cpu", weights_only=True)
    assert saved["config"]["engine"] == "torch"
    assert all(v.device.type == "cpu" for v in saved["model"].values())
    from agents.evaluation.arena import duel

    assert duel(make_agent(f"ppo:{export}", seed=1), "random", n_deals=8, seed=0).summary()


@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_cuda_rollout_steps_do_not_synchronise(tmp_path: Path) -> None:
    """The CUDA rollout's steps under ``torch.cuda.set_sync_debug_mode("error")``: any
    operation that waits for the device raises; the batch stays on the device. As a CUDA
    run is advised to (``--no-deterministic``), without torch's deterministic algorithms."""
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(False)
    try:
        batch, stats = _cuda_steps_without_sync(tmp_path)
    finally:
        torch.use_deterministic_algorithms(deterministic)
    assert batch is not None and stats.host().hands.sum() > 0
    assert all(torch.as_tensor(v).device.type == "cuda" for v in batch.values())


def _cuda_steps_without_sync(tmp_path: Path) -> tuple[Any, Any]:
    xp = TorchArrays(torch.device("cuda"))
    st, model, pool, cfg, rng = rollout_setup(tmp_path, xp)
    stats = begin_rollout(st, pool, rng)
    rollout_step(st, model, pool, cfg, rng, xp.device, stats)  # tables copied on first use
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(1, cfg.num_steps):
            rollout_step(st, model, pool, cfg, rng, xp.device, stats)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    return st.buffers.collect([]), stats
