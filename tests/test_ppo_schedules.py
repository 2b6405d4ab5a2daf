"""What issue 14 added to PPO training: the step-size schedule over a wall-clock budget,
the opponent curriculum (``opp_schedule``), the belief head and the milestone exports."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.extras import need

torch = need("torch")

from agents.ppo_net import (  # noqa: E402
    HIDDEN_HANDS_SIZE,
    ActorCritic,
    check_arch,
    hidden_hands,
    load_checkpoint,
    model_from_checkpoint,
    state_shapes,
)
from agents.registry import R1_PPO_CHECKPOINT, R11_PPO_CHECKPOINT  # noqa: E402
from tests.test_ppo import SHIPPED, tiny_config  # noqa: E402
from train.ppo import OPPONENTS, Config, train  # noqa: E402
from train.ppo_settings import budget_progress, parse_opp_schedule  # noqa: E402


class Clock:
    """An injected clock: each reading is ``step`` seconds after the one before."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


# ----------------------------------------------------------------------------- budget share
def test_budget_progress_follows_the_larger_share() -> None:
    assert budget_progress(100, 0, 25, 1e6) == 0.25  # updates only
    assert budget_progress(0, 10, 10_000, 150.0) == 0.25  # minutes only
    assert budget_progress(100, 10, 10, 300.0) == 0.5  # time is further along
    assert budget_progress(100, 10, 80, 300.0) == 0.8  # updates are
    assert budget_progress(100, 10, 500, 9000.0) == 1.0  # never past the end


def test_step_size_anneals_over_a_time_budget(tmp_path: Path) -> None:
    """A time-limited run anneals with the clock, down to lr_final x learning_rate: with an
    injected clock 30 s per update of a 2-minute budget, updates start at 0, 1/4, 1/2, 3/4
    of it (step sizes 1e-3 x (1 - 0.8 p)) and the run stops after exactly 4. An update budget
    anneals the same way."""
    cfg = tiny_config(tmp_path, lr_final=0.2, learning_rate=1e-3, num_steps=120, eval_every=0)
    timed = replace(cfg, total_updates=0, total_minutes=2.0)
    seen: list[dict[str, float]] = []
    train(timed, on_update=seen.append, clock=Clock(30.0))
    assert [m["minutes"] for m in seen] == [0.5, 1.0, 1.5, 2.0]
    assert [m["learning_rate"] for m in seen] == pytest.approx([1e-3, 8e-4, 6e-4, 4e-4])
    by_updates: list[dict[str, float]] = []
    train(replace(cfg, run_name="u", total_updates=4), on_update=by_updates.append)
    assert [m["learning_rate"] for m in by_updates] == pytest.approx([1e-3, 8e-4, 6e-4, 4e-4])


# ----------------------------------------------------------------------------- curriculum
def test_opp_schedule_parses_stages_and_picks_by_progress() -> None:
    cfg = Config(opp_schedule="0:self=3,rule=1;0.25:rule=.9,random=.1")
    cfg.validate()
    np.testing.assert_allclose(cfg.opponent_probs(0.0), [0.75, 0, 0.25, 0])  # self, ..., random
    np.testing.assert_allclose(cfg.opponent_probs(0.2499), [0.75, 0, 0.25, 0])
    np.testing.assert_allclose(cfg.opponent_probs(0.25), [0, 0, 0.9, 0.1])
    np.testing.assert_allclose(cfg.opponent_probs(1.0), [0, 0, 0.9, 0.1])
    assert cfg.uses_fixed_agent()
    stages = parse_opp_schedule(" 0 : self = 1 ; 0.5:random=2,rule=2", OPPONENTS)  # spaces are fine
    assert [start for start, _ in stages] == [0.0, 0.5]
    np.testing.assert_allclose(stages[1][1], [0, 0, 0.5, 0.5])
    assert not Config(opp_schedule="0:self=1;0.5:random=1", opp_rule=0.7).uses_fixed_agent()


@pytest.mark.parametrize(
    "text,says",
    [
        ("", "stages"),
        ("0.1:self=1", "first stage must start at 0"),
        ("0:self=1;0:rule=1", "increasing order"),
        ("0:self=1;0.6:rule=1;0.3:random=1", "increasing order"),
        ("0:selfie=1", "self, snapshot, rule, random"),
        ("0:self=-1", "share >= 0"),
        ("0:self=nan", "share >= 0"),
        ("0:self", "name=share"),
        ("0:self=0,rule=0", "must not all be 0"),
        ("1:self=1", r"\[0, 1\)"),
        ("x:self=1", r"\[0, 1\)"),
        ("self=1", r"\[0, 1\)"),
    ],
)
def test_bad_opp_schedule_is_refused_naming_the_stage(text: str, says: str) -> None:
    with pytest.raises(ValueError, match="opp_schedule") as err:
        Config(opp_schedule=text).validate()
    assert err.match(says)


def test_opp_schedule_switches_opponents_mid_run(tmp_path: Path) -> None:
    """Self-play for the first half of the updates, then only random: no hand against
    random ends before the switch, and hands against random do after it."""
    cfg = tiny_config(tmp_path, opp_schedule="0:self=1;0.5:random=1", total_updates=6, teacher=None)
    seen: list[float | None] = []
    train(cfg, on_update=lambda m: seen.append(m.get("train_vs_random")))
    assert all(v is None for v in seen[:3]), seen
    assert any(v is not None for v in seen[3:]), seen


# ----------------------------------------------------------------------------- belief head
def test_belief_head_arch_round_trips_and_old_files_mean_no_head(tmp_path: Path) -> None:
    model = ActorCritic(hidden=16, layers=1, central_value=False, belief=True)
    assert state_shapes(model.arch) == {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert model.state_dict()["belief.weight"].shape == (HIDDEN_HANDS_SIZE, 16)
    r1 = load_checkpoint(R1_PPO_CHECKPOINT)  # release 1, written before the head existed:
    assert "belief" not in r1["arch"]  # no key...
    assert check_arch(r1["arch"])["belief"] is False  # ...read as "no head"
    assert load_checkpoint(R11_PPO_CHECKPOINT)["arch"]["belief"] is True  # release 11 has one
    assert load_checkpoint(SHIPPED)["arch"]["belief"] is False  # release 12 has none
    with pytest.raises(ValueError, match="belief"):
        check_arch({**r1["arch"], "belief": "yes"})


def test_belief_logits_are_in_real_card_order() -> None:
    """The belief loss is computed in the model's suit-canonical order; belief_logits maps
    it back to real card ids: the loss of those logits against the real hidden hands is the
    same number, for every trump suit."""
    from butifarra_env.envs.batched import BatchedEnv

    torch.manual_seed(0)
    model = ActorCritic(hidden=32, layers=1, central_value=True, belief=True)
    with torch.no_grad():  # a non-trivial head: otherwise every output is ~0
        model.belief.weight.normal_()
    env = BatchedEnv(64, seed=5)
    obs, mask, seat = (np.asarray(x) for x in env.reset(seed=5))
    rng = np.random.default_rng(5)
    for _ in range(12):  # past the bidding: trump is set in most slots
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        obs, mask, seat, _, _ = (np.asarray(x) for x in env.step(actions))
    hid = hidden_hands(np.asarray(env.state()), seat)
    o, m, h = torch.from_numpy(obs), torch.from_numpy(mask), torch.from_numpy(hid)
    from butifarra_env.core.observation import field_slice

    trump = obs[:, field_slice("trump")].argmax(1)
    assert len(set(trump[trump < 4].tolist())) >= 3  # several real trump suits: relabelled
    with torch.no_grad():
        _, _, loss = model.forward_all(o, m, h)
        real = model.belief_logits(o, m)
        direct = torch.nn.functional.binary_cross_entropy_with_logits(
            real.reshape(len(o), -1), h.float()
        )
    assert loss is not None and float(loss) == pytest.approx(float(direct), rel=1e-6)
    plain = ActorCritic(hidden=8, layers=1)
    with pytest.raises(ValueError, match="no belief head"):
        plain.belief_logits(o, m)


def test_belief_training_learns_who_holds_what(tmp_path: Path) -> None:
    """A few updates with the belief loss lower it (the head learns, e.g., that the cards
    the mover holds are nobody else's); the loss is logged, and nan without the head."""
    cfg = tiny_config(
        tmp_path, belief=True, belief_coef=1.0, total_updates=8, hidden=64, num_steps=120
    )
    losses: list[float] = []
    train(cfg, on_update=lambda m: losses.append(m["loss_belief"]))
    assert losses[-1] < losses[0] - 0.05, losses
    assert load_checkpoint(tmp_path / "t" / "checkpoint.pt")["arch"]["belief"] is True
    plain = train(tiny_config(tmp_path, run_name="p", total_updates=1, num_steps=120, belief=False))
    assert math.isnan(plain["loss_belief"])


# ----------------------------------------------------------------------------- milestones
def test_milestone_model_is_written_once_and_kept(tmp_path: Path) -> None:
    """With an injected clock of 30 s per update, the 1-minute milestone is passed at
    update 2 (the model as of then is kept); a resumed run does not rewrite it."""
    cfg = tiny_config(tmp_path, milestone_minutes=(1.0, 1e6), total_updates=3)
    train(cfg, clock=Clock(30.0))
    early, late = tmp_path / "t" / "model_at_1min.pt", tmp_path / "t" / "model_at_1e+06min.pt"
    assert not late.exists()
    data = load_checkpoint(early)
    assert (data["update"], data["elapsed_s"]) == (2, 60.0)
    before = early.read_bytes()
    train(replace(cfg, resume=True, total_updates=5), clock=Clock(30.0))
    assert early.read_bytes() == before
    with pytest.raises(ValueError, match="milestone_minutes"):
        Config(milestone_minutes=(0.0,)).validate()


# ----------------------------------------------------------------------------- kickstarting
def test_teacher_weight_falls_linearly_to_zero() -> None:
    cfg = Config(teacher="rule", teacher_coef=2.0, teacher_until=0.5)
    assert [cfg.teacher_weight(p) for p in (0.0, 0.25, 0.5, 0.9)] == [2.0, 1.0, 0.0, 0.0]
    assert Config(teacher=None).teacher_weight(0.0) == 0.0
    with pytest.raises(ValueError, match="teacher: unknown agent"):
        Config(teacher="rulez").validate()
    with pytest.raises(ValueError, match="teacher_until"):
        Config(teacher="rule", teacher_until=1.5).validate()


def agreement_with_rule(model: ActorCritic, n: int = 400) -> float:
    """Share of positions (from random play) where the model's greedy action is the
    rule-based agent's."""
    from agents import make_agent
    from butifarra_env.envs.batched import BatchedEnv

    env, rng = BatchedEnv(n, seed=11), np.random.default_rng(11)
    obs, mask, _ = (np.asarray(x) for x in env.reset(seed=11))
    rows_o, rows_m = [], []
    for _ in range(30):
        rows_o.append(obs)
        rows_m.append(mask)
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        obs, mask, _, _, _ = (np.asarray(x) for x in env.step(actions))
    o, m = np.concatenate(rows_o), np.concatenate(rows_m)
    choice = m.sum(1) > 1  # only positions with a choice
    o, m = o[choice], m[choice]
    from agents.ppo_net import masked_logits

    tm = torch.from_numpy(m)
    with torch.no_grad():
        greedy = masked_logits(model.logits(torch.from_numpy(o), tm), tm).argmax(-1).numpy()
    return float((greedy == make_agent("rule").act_batch(o, m)).mean())


def test_teacher_makes_the_learner_play_like_it(tmp_path: Path) -> None:
    """With a rule-based teacher the policy comes to choose the rule-based agent's action
    far more often than the same run without one; the imitation loss is logged while the
    teacher is weighted, and nan afterwards."""
    base = tiny_config(tmp_path, total_updates=8, hidden=64, num_steps=120, learning_rate=3e-3)
    losses: list[float] = []
    taught = replace(base, teacher="rule", teacher_coef=5.0, teacher_until=0.75)
    train(taught, on_update=lambda m: losses.append(m.get("loss_teacher", math.nan)))
    train(replace(base, run_name="alone", teacher=None))
    with_teacher, without = (
        agreement_with_rule(model_from_checkpoint(load_checkpoint(p), p))
        for p in (tmp_path / "t" / "checkpoint.pt", tmp_path / "alone" / "checkpoint.pt")
    )
    assert with_teacher > without + 0.15, (with_teacher, without)
    assert not math.isnan(losses[0]) and losses[4] < losses[0], losses
    assert all(math.isnan(v) for v in losses[6:]), losses  # weight 0 from 6/8 = 0.75 on


class _SpyTeacher:
    """Wraps the teacher and records, per call, whether each asked position offered a card."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.card_rows: list[int] = []
        self.bid_rows: list[int] = []

    def act_batch(self, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        cards = mask[:, :48].any(axis=1)
        self.card_rows.append(int(cards.sum()))
        self.bid_rows.append(int((~cards).sum()))
        return self.inner.act_batch(obs, mask)  # type: ignore[attr-defined, no-any-return]


def test_teacher_bid_floor_keeps_teaching_the_bids_only(tmp_path: Path) -> None:
    """After the imitation schedule ends, ``teacher_bid_floor`` keeps the teacher on the
    bidding and doubling decisions (its loss stays logged) and stops asking it about cards."""
    cfg = tiny_config(
        tmp_path,
        total_updates=6,
        num_steps=60,
        teacher="rule",
        teacher_until=0.3,
        teacher_bid_floor=1.0,
    )
    assert cfg.asks_teacher(0.9) and not replace(cfg, teacher_bid_floor=0.0).asks_teacher(0.9)
    assert not replace(cfg, teacher=None).asks_teacher(0.0)
    with pytest.raises(ValueError, match="teacher_bid_floor"):
        replace(cfg, teacher_bid_floor=-0.1).validate()
    from agents import make_agent

    spy = _SpyTeacher(make_agent("rule", seed=cfg.seed))
    calls_before: list[int] = []
    losses: list[float] = []

    def after(metrics: dict[str, float]) -> None:
        calls_before.append(len(spy.card_rows))
        losses.append(metrics.get("loss_teacher", math.nan))

    train(cfg, on_update=after, teacher=spy)  # type: ignore[arg-type]
    late = slice(calls_before[1], None)  # updates 3..6: progress >= 2/6 > teacher_until
    assert sum(spy.card_rows[: calls_before[0]]) > 0  # taught on cards while scheduled
    assert sum(spy.card_rows[late]) == 0 and sum(spy.bid_rows[late]) > 0
    assert all(not math.isnan(v) for v in losses), losses
