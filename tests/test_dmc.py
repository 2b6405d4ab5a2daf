"""Deep Monte Carlo (``train/dmc.py``): the Monte Carlo targets, the regression and the
kickstarting losses, the exported agent in the arena, the run folder (same seed same
weights, refusals, crash and Ctrl-C then resume) and the config checks. Tiny runs: 8 hands
in parallel, a 32-wide one-layer net without the card options."""

from __future__ import annotations

import os
import signal
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.extras import need

torch = need("torch")

from agents import make_agent  # noqa: E402
from agents.evaluation.arena import duel  # noqa: E402
from agents.ppo_net import ActorCritic, load_checkpoint, model_from_checkpoint  # noqa: E402
from butifarra_env.envs.batched import BatchedEnv  # noqa: E402
from train.dmc import (  # noqa: E402
    Decisions,
    DMCConfig,
    collect_rollout,
    dmc_update,
    greedy,
    large_margin_loss,
    main,
    model_for,
    q_values,
    start_rollouts,
    train,
)
from train.run_folder import RunRefused, TrainingInterrupted  # noqa: E402


@pytest.fixture(autouse=True)
def one_thread() -> None:
    """One torch thread, as a run uses (``train`` sets it; the tests that call the pieces
    directly would otherwise run on every core)."""
    torch.set_num_threads(1)


def tiny_config(tmp_path: Path, **kw: Any) -> DMCConfig:
    """A run of a few seconds: 8 hands in parallel, small net without the card options."""
    base = DMCConfig(
        run_dir=str(tmp_path),
        run_name="t",
        seed=3,
        total_minutes=0,
        total_updates=4,
        num_envs=8,
        num_steps=40,
        hidden=32,
        layers=1,
        card_features=False,
        card_head=False,
        checkpoint_every=2,
        milestone_minutes=(),
        log_every=0,
    )
    return replace(base, **kw)


# ----------------------------------------------------------------------------- the targets
class RecordingEnv:
    """The engine, noting at every step each slot's mover and observation before it, and
    the rewards and ends after it."""

    def __init__(self, n: int, seed: int) -> None:
        self.env = BatchedEnv(n, seed=seed)
        self.steps: list[tuple[np.ndarray, ...]] = []

    def reset(self, seed: int) -> tuple[np.ndarray, ...]:
        obs, mask, seat = self.env.reset(seed=seed)
        self.obs, self.seat = obs.copy(), seat.copy()
        return obs, mask, seat

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, ...]:
        obs, mask, seat, rewards, done = self.env.step(actions)
        self.steps.append((self.obs, self.seat, rewards.copy(), done.copy()))
        self.obs, self.seat = obs.copy(), seat.copy()
        return obs, mask, seat, rewards, done


def hands_played(steps: list[tuple[np.ndarray, ...]], slot: int) -> list[tuple[list, np.ndarray]]:
    """The hands that ended at ``slot``, in order: ([(observation, seat) of each move],
    the four seats' rewards at its end)."""
    hands, moves = [], []
    for obs, seat, rewards, done in steps:
        moves.append((obs[slot], int(seat[slot])))
        if done[slot]:
            hands.append((moves, rewards[slot]))
            moves = []
    return hands


def rollout(cfg: DMCConfig, ask_teacher: bool = False) -> tuple[Decisions, RecordingEnv]:
    """One rollout from a fresh deal with a fresh model, on a recording engine."""
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    envs: list[RecordingEnv] = []

    def factory(n: int, seed: int) -> RecordingEnv:
        envs.append(RecordingEnv(n, seed))
        return envs[-1]

    st = start_rollouts(cfg, 0, rng, factory)
    st.ask_teacher = ask_teacher
    batch, _ = collect_rollout(st, model_for(cfg), make_agent("rule"), cfg, rng)
    assert batch is not None
    return batch, envs[0]


def test_every_learner_decision_of_a_hand_gets_its_final_score_difference(tmp_path: Path) -> None:
    """Each finished hand of a rollout holds exactly the learner team's decisions, in play
    order, and each of them has the engine's final reward of that team (x reward_scale):
    the same for every decision of the hand, opposite to the other team's."""
    cfg = tiny_config(tmp_path, num_steps=200, epsilon=0.3)
    batch, env = rollout(cfg)
    assert len(batch.hand_slot) >= 16 and set(batch.hand_team) == {0, 1}
    checked = 0
    for slot in range(cfg.num_envs):
        mine = np.flatnonzero(batch.hand_slot == slot)
        played = hands_played(env.steps, slot)
        assert len(mine) == len(played)
        for h, (moves, rewards) in zip(mine, played, strict=True):
            team = batch.hand_team[h]
            rows = np.flatnonzero(batch.hand == h)
            expected = np.stack([o for o, seat in moves if seat % 2 == team])
            np.testing.assert_array_equal(batch.obs[rows], expected)
            assert rewards[team] == -rewards[1 - team] == rewards[team + 2]
            np.testing.assert_array_equal(
                batch.ret[rows], np.float32(rewards[team] * cfg.reward_scale)
            )
            checked += int(rewards[team] != 0)
    assert checked > 0
    assert ((batch.mask[np.arange(len(batch.act)), batch.act]) == 1).all()  # legal actions
    assert (batch.teach == -1).all()  # the teacher was not asked


def test_the_teacher_labels_are_the_rule_agents_choices(tmp_path: Path) -> None:
    batch, _ = rollout(tiny_config(tmp_path, num_steps=80), ask_teacher=True)
    np.testing.assert_array_equal(batch.teach, make_agent("rule").act_batch(batch.obs, batch.mask))


# ----------------------------------------------------------------------------- the losses
def test_large_margin_loss_by_hand() -> None:
    """max over legal a of Q(a) + margin (a != expert) minus Q(expert); illegal ignored."""
    q = torch.tensor([[1.0, 0.5, 9.0, 0.0], [1.0, 0.5, 9.0, 0.0], [1.0, 0.95, 9.0, 0.0]])
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0]])
    expert = torch.tensor([0, 1, 0])
    per_row = [0.0, 1.0 + 0.1 - 0.5, 0.95 + 0.1 - 1.0]
    for i in range(3):
        got = large_margin_loss(q[i : i + 1], mask[i : i + 1], expert[i : i + 1], 0.1)
        assert float(got) == pytest.approx(per_row[i])
    assert float(large_margin_loss(q, mask, expert, 0.1)) == pytest.approx(np.mean(per_row))


def test_q_of_the_taken_action_regresses_towards_the_returns(tmp_path: Path) -> None:
    """Updates on one rollout's decisions bring Q(s, a taken) to their Monte Carlo returns:
    the squared error falls far below its start and the mean of Q meets the mean return."""
    cfg = tiny_config(tmp_path, num_steps=160, teacher_coef=0.0, update_epochs=60)
    batch, _ = rollout(cfg)
    model = model_for(cfg)
    act, ret = torch.from_numpy(batch.act), torch.from_numpy(batch.ret)

    def q_taken() -> Any:
        with torch.no_grad():
            q = q_values(model, torch.from_numpy(batch.obs), torch.from_numpy(batch.mask))
        return q.gather(1, act[:, None]).squeeze(-1)

    before = float(((q_taken() - ret) ** 2).mean())
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    row = dmc_update(model, optimizer, batch, replace(cfg, anneal_lr=False), 0.0)
    after = float(((q_taken() - ret) ** 2).mean())
    assert after < 0.5 * before, (before, after)
    assert float(q_taken().mean()) == pytest.approx(float(ret.mean()), abs=0.25 * float(ret.std()))
    assert np.isnan(row["loss_teacher"]) and row["batch_decisions"] == len(act)


def agreement_with_rule(model: ActorCritic, n: int = 300) -> float:
    """Share of positions (from random play, with a choice) where the greedy action is the
    rule-based agent's."""
    env, rng = BatchedEnv(n, seed=11), np.random.default_rng(11)
    obs, mask, _ = env.reset(seed=11)
    rows_o, rows_m = [], []
    for _ in range(30):
        rows_o.append(obs)
        rows_m.append(mask)
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        obs, mask, _, _, _ = env.step(actions)
    o, m = np.concatenate(rows_o), np.concatenate(rows_m)
    choice = m.sum(1) > 1
    o, m = o[choice], m[choice]
    return float((greedy(model, o, m) == make_agent("rule").act_batch(o, m)).mean())


def test_teacher_makes_the_greedy_policy_play_like_the_rule_agent(tmp_path: Path) -> None:
    """With the large-margin loss the argmax of Q comes to pick the rule-based agent's
    action far more often than an untrained net or the same run without it; the loss is
    logged while it is weighted and blank afterwards."""
    base = tiny_config(tmp_path, total_updates=6, num_steps=100, learning_rate=3e-3)
    rows: list[dict[str, float]] = []
    train(replace(base, teacher_coef=10.0, teacher_until=0.7), on_update=rows.append)
    train(replace(base, run_name="alone", teacher_coef=0.0))
    taught, alone = (
        agreement_with_rule(model_from_checkpoint(load_checkpoint(p), p))
        for p in (tmp_path / "t" / "export.pt", tmp_path / "alone" / "export.pt")
    )
    torch.manual_seed(0)
    untrained = agreement_with_rule(model_for(base))
    assert taught > max(alone, untrained) + 0.15, (taught, alone, untrained)
    teacher = [r.get("loss_teacher", np.nan) for r in rows]
    assert not np.isnan(teacher[1]) and all(np.isnan(v) for v in teacher[5:]), teacher


# ----------------------------------------------------------------------------- the export
def test_the_export_plays_whole_duplicate_deals_as_a_ppo_agent(tmp_path: Path) -> None:
    """export.pt is an agent checkpoint marked as DMC: ``make_agent("ppo:PATH")`` loads it,
    plays the argmax of Q, and plays whole duplicate deals against the rule-based agent."""
    cfg = tiny_config(tmp_path, total_updates=2)
    train(cfg)
    export = tmp_path / "t" / "export.pt"
    data = load_checkpoint(export)
    assert data["config"]["algorithm"] == "dmc" and data["update"] == 2
    assert "optimizer" not in data and not data["arch"]["central_value"]
    agent = make_agent(f"ppo:{export}")
    batch, _ = rollout(replace(cfg, num_steps=80))
    model = model_from_checkpoint(data, export)
    np.testing.assert_array_equal(
        agent.act_batch(batch.obs, batch.mask), greedy(model, batch.obs, batch.mask)
    )
    result = duel(agent, make_agent("rule"), n_deals=6, seed=5)
    assert len(result.pair_means) == 6 and len(result.hands["diff_a"]) == 12
    assert np.isfinite(result.mean)


def test_metrics_report_the_gradient_norm_and_how_often_the_clip_binds(tmp_path: Path) -> None:
    """As in train.ppo: ``grad_norm`` is the norm before the clip, ``grad_clipped`` the share
    of an update's minibatches on which ``max_grad_norm`` bound; both are metrics.csv's last
    columns."""
    rows: dict[str, list[dict[str, float]]] = {"tight": [], "loose": []}
    for name, clip in (("tight", 1e-6), ("loose", 1e6)):
        cfg = tiny_config(
            tmp_path, run_name=name, max_grad_norm=clip, total_updates=2, num_steps=80
        )  # every rollout of 80 steps finishes hands, so every update trains
        train(cfg, on_update=rows[name].append)
    assert [r["grad_clipped"] for r in rows["tight"]] == [1.0, 1.0]
    assert [r["grad_clipped"] for r in rows["loose"]] == [0.0, 0.0]
    assert all(1e-3 < r["grad_norm"] < 1e6 for r in rows["tight"] + rows["loose"])
    header, *lines = (tmp_path / "tight" / "metrics.csv").read_text().splitlines()
    assert header.split(",")[-2:] == ["grad_norm", "grad_clipped"] and len(lines) == 2
    assert lines[-1].split(",")[-1] == "1.0"


# ----------------------------------------------------------------------------- the run folder
def weights(run: Path) -> dict[str, Any]:
    return dict(load_checkpoint(run / "checkpoint.pt")["model"])


def same_weights(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def csv_updates(run: Path) -> list[int]:
    lines = (run / "metrics.csv").read_text().splitlines()[1:]
    return [int(line.split(",")[0]) for line in lines]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_same_seed_same_weights_and_a_rerun_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tiny_config(tmp_path)
    train(cfg)
    train(replace(cfg, run_name="again"))
    train(replace(cfg, run_name="other", seed=4))
    first = weights(tmp_path / "t")
    assert same_weights(first, weights(tmp_path / "again"))
    assert not same_weights(first, weights(tmp_path / "other"))
    before = snapshot(tmp_path / "t")
    argv = ["--run-dir", str(tmp_path), "--run-name", "t", "--total-updates", "2"]
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    assert "already holds a run" in err[0] and "--resume" in err[0]
    assert snapshot(tmp_path / "t") == before
    with pytest.raises(RunRefused, match="spent its budget"):
        train(replace(cfg, resume=True))
    assert snapshot(tmp_path / "t") == before


def test_a_crash_then_resume_ends_like_an_uninterrupted_run(tmp_path: Path) -> None:
    """A run that dies after update 3 (checkpoint at 2) resumes from 2; its counters and
    metrics.csv carry on, and it ends with the uninterrupted run's weights."""
    cfg = tiny_config(tmp_path)
    train(cfg)

    def crash(row: dict[str, float]) -> None:
        if row["update"] == 3:
            raise RuntimeError("crash")

    crashed = replace(cfg, run_name="crashed")
    with pytest.raises(RuntimeError, match="crash"):
        train(crashed, on_update=crash)
    run = tmp_path / "crashed"
    assert load_checkpoint(run / "checkpoint.pt")["update"] == 2
    assert csv_updates(run) == [1, 2, 3]
    last = train(replace(crashed, resume=True))
    assert last["update"] == 4 and last["global_step"] == 4 * cfg.num_envs * cfg.num_steps
    assert csv_updates(run) == [1, 2, 3, 4]
    assert same_weights(weights(run), weights(tmp_path / "t"))
    assert (run / "checkpoint.prev.pt").exists()


def test_ctrl_c_saves_and_resume_continues(tmp_path: Path) -> None:
    """Ctrl-C finishes the update, saves checkpoint.pt and export.pt there and says how to
    resume; --resume continues from that update."""
    cfg = tiny_config(tmp_path, checkpoint_every=10, total_updates=3)

    def ctrl_c(row: dict[str, float]) -> None:
        if row["update"] == 1:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(TrainingInterrupted, match="--resume") as stop:
        train(cfg, on_update=ctrl_c)
    assert "update 1" in str(stop.value)
    run = tmp_path / "t"
    assert load_checkpoint(run / "checkpoint.pt")["update"] == 1
    assert load_checkpoint(run / "export.pt")["update"] == 1
    last = train(replace(cfg, resume=True))
    assert last["update"] == 3 and csv_updates(run) == [1, 2, 3]
    assert load_checkpoint(run / "export.pt")["hands"] == last["hands"] > 0


# ----------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    "flag,value,field",
    [
        ("--epsilon", "1.5", "epsilon"),
        ("--num-envs", "0", "num_envs"),
        ("--teacher-until", "2", "teacher_until"),
        ("--opp-rule", "-1", "opp_rule"),
        ("--learning-rate", "0", "learning_rate"),
        ("--update-epochs", "0", "update_epochs"),
        ("--teacher-margin", "-0.1", "teacher_margin"),
        ("--num-steps", "5", "num_steps"),
        ("--milestone-minutes", "0", "milestone_minutes"),
        ("--reward-scale", "nan", "reward_scale"),
        ("--run-name", "a/b", "run_name"),
    ],
)
def test_bad_values_are_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, field: str
) -> None:
    run_dir = tmp_path / "runs"
    with pytest.raises(SystemExit) as stop:
        main(["--run-dir", str(run_dir), "--total-updates", "1", flag, value])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    assert field in err[0], err
    assert not run_dir.exists()


def test_a_ppo_run_folder_is_not_resumed_as_dmc(tmp_path: Path) -> None:
    from agents.ppo_net import model_payload
    from train.run_folder import save_torch

    run = tmp_path / "t"
    run.mkdir()
    save_torch(model_payload(ActorCritic(hidden=32, layers=1), {}), run / "checkpoint.pt")
    with pytest.raises(RunRefused, match="no readable checkpoint"):
        train(tiny_config(tmp_path, resume=True))
