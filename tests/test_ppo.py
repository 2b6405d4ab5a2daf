"""PPO: masked policy, per-seat GAE, checkpoints, resume, config validation, smoke run,
and the strength of the shipped checkpoint."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest

from tests.extras import need

torch = need("torch")

from agents import Agent, make_agent  # noqa: E402
from agents.ppo_net import (  # noqa: E402
    MASK_VALUE,
    ActorCritic,
    Checkpoint,
    build_model,
    hidden_hands,
    load_checkpoint,
    masked_entropy,
    masked_log_probs,
    masked_logits,
    model_payload,
    sample_masked,
)
from train.ppo import OPPONENTS, Config, Opponent, per_seat_gae, train  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "agents" / "checkpoints" / "ppo_butifarra.pt"


def tiny_config(tmp_path: Path, **kw: object) -> Config:
    """A run of a few seconds: 8 hands in parallel, small net (without the recipe's card
    options), frequent checkpoints, no imitation floor on bids."""
    base = Config(
        card_features=False,
        card_head=False,
        teacher_bid_floor=0.0,
        run_dir=str(tmp_path),
        run_name="t",
        seed=3,
        total_minutes=0,
        total_updates=4,
        num_envs=8,
        num_steps=40,
        hidden=32,
        layers=1,
        update_epochs=2,
        num_minibatches=2,
        snapshot_every=1,
        checkpoint_every=2,
        eval_every=0,
        tensorboard=False,
        progress=False,
        torch_threads=1,
    )
    return replace(base, **kw)


# ----------------------------------------------------------------------------- masking
def random_masks(rng: np.random.Generator, n: int) -> np.ndarray:
    masks = rng.random((n, 56)) < rng.random((n, 1))
    masks[np.arange(n), rng.integers(0, 56, n)] = True  # at least one legal
    masks[: n // 4] = False  # a quarter of the rows: exactly one legal action
    masks[np.arange(n // 4), rng.integers(0, 56, n // 4)] = True
    return masks


def test_masked_sampling_never_illegal_and_no_nan() -> None:
    rng = np.random.default_rng(0)
    masks = torch.from_numpy(random_masks(rng, 512))
    # extreme logits, including huge values on illegal actions
    logits = torch.from_numpy(rng.normal(0, 50, (512, 56)).astype(np.float32))
    logits[~masks] += 1e6
    logits.requires_grad_(True)
    for _ in range(20):
        actions, logp = sample_masked(logits, masks)
        assert masks[torch.arange(512), actions].all()
        assert torch.isfinite(logp).all()
    logp_all = masked_log_probs(logits, masks)
    ent = masked_entropy(logits, masks)
    assert torch.isfinite(logp_all).all() and torch.isfinite(ent).all()
    single = masks.sum(1) == 1
    assert single.any()
    assert torch.allclose(ent[single], torch.zeros(int(single.sum())), atol=1e-6)
    chosen = logp_all.gather(1, actions[:, None]).squeeze(1)
    assert torch.allclose(chosen[single], torch.zeros(int(single.sum())), atol=1e-6)
    (chosen.sum() - ent.sum()).backward()
    assert torch.isfinite(logits.grad).all()


def test_masked_softmax_gives_illegal_actions_exactly_zero() -> None:
    """Whatever the network outputs (huge logits on illegal actions, very negative ones on
    legal actions), the masked distribution puts exactly 0 on illegal actions, sums to 1,
    and its log-probabilities, entropy and gradients stay finite."""
    rng = np.random.default_rng(5)
    masks = torch.from_numpy(random_masks(rng, 512))
    logits = torch.from_numpy(rng.normal(0, 1e4, (512, 56)).astype(np.float32))
    logits[~masks] = 1e7  # the network "prefers" every illegal action
    logits[:8][masks[:8]] = -1e6  # and strongly dislikes every legal one in some rows
    logits.requires_grad_(True)
    probs = torch.softmax(masked_logits(logits, masks), dim=-1)
    assert not torch.isnan(probs).any()
    assert (probs[~masks] == 0).all()
    torch.testing.assert_close(probs.sum(-1), torch.ones(512))
    ent = masked_entropy(logits, masks)
    n_legal = masks.sum(-1).double()
    assert torch.isfinite(ent).all() and (ent >= 0).all()
    assert (ent.double() <= torch.log(n_legal) + 1e-5).all()
    rows = torch.arange(8)
    assert (masks[rows, probs[:8].argmax(-1)]).all()
    logp = masked_log_probs(logits, masks)
    assert (logp[~masks] <= MASK_VALUE / 2).all() and torch.isfinite(logp).all()
    (logp[masks].sum() + ent.sum()).backward()
    assert torch.isfinite(logits.grad).all()


def test_entropy_is_over_legal_actions_only() -> None:
    logits = torch.zeros(1, 56)
    mask = torch.zeros(1, 56, dtype=torch.bool)
    mask[0, [3, 9, 50]] = True
    assert masked_entropy(logits, mask).item() == pytest.approx(np.log(3), abs=1e-6)


def test_model_never_picks_illegal_from_observations() -> None:
    model = ActorCritic(hidden=16, layers=1)
    rng = np.random.default_rng(1)
    obs = torch.from_numpy(rng.integers(0, 2, (256, 491)).astype(np.uint8))
    masks = torch.from_numpy(random_masks(rng, 256))
    logits, values = model(obs, masks)
    actions, _ = sample_masked(logits, masks)
    assert masks[torch.arange(256), actions].all() and torch.isfinite(values).all()


# ----------------------------------------------------------------------------- per-seat GAE
def test_per_seat_gae_hand_computed() -> None:
    # Hand 0: seats act 0,1,2,3,0,1 (6 learner decisions); hand 1: only seats 1 and 3 learn.
    values = np.array([[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.0], [0.5, -0.5, 0.25, 0.0, 0.0, 0.0, 0.0]])
    seats = np.array([[0, 1, 2, 3, 0, 1, 0], [1, 3, 1, 0, 0, 0, 0]])
    lengths = np.array([6, 3])
    rewards = np.array([[1.0, -1.0, 1.0, -1.0], [-2.0, 2.0, -2.0, 2.0]])
    adv, ret = per_seat_gae(values, seats, lengths, rewards, gamma=1.0, gae_lambda=0.5)
    # seat 0: t=4 last: 1 - 0.5 = 0.5; t=0: (0.5 - 0.1) + 0.5 * 0.5 = 0.65
    # seat 1: t=5 last: -1 - 0.6 = -1.6; t=1: (0.6 - 0.2) + 0.5 * -1.6 = -0.4
    # seat 2: t=2 last: 1 - 0.3 = 0.7;   seat 3: t=3 last: -1 - 0.4 = -1.4
    expected0 = [0.65, -0.4, 0.7, -1.4, 0.5, -1.6, 0.0]
    # hand 1, seat 1: t=2 last: 2 - 0.25 = 1.75; t=0: (0.25 - 0.5) + 0.5 * 1.75 = 0.625
    # seat 3: t=1 last: 2 - (-0.5) = 2.5; padding 0
    expected1 = [0.625, 2.5, 1.75, 0, 0, 0, 0]
    np.testing.assert_allclose(adv, [expected0, expected1], atol=1e-6)
    np.testing.assert_allclose(ret[0, :6], np.array(expected0[:6]) + values[0, :6], atol=1e-6)
    np.testing.assert_allclose(ret[1, 3:], 0.0)
    # lambda = 1: returns are the seat's final reward (Monte Carlo, gamma 1)
    _, ret1 = per_seat_gae(values, seats, lengths, rewards, gamma=1.0, gae_lambda=1.0)
    np.testing.assert_allclose(ret1[0, :6], [1, -1, 1, -1, 1, -1], atol=1e-6)
    # gamma discounts per own decision: seat 0 at t=0 is one own step before its last
    adv_g, _ = per_seat_gae(values, seats, lengths, rewards, gamma=0.9, gae_lambda=1.0)
    assert adv_g[0, 0] == pytest.approx(0.9 * 1.0 - 0.1)


# ----------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    "field,value",
    [
        ("num_envs", 0),
        ("num_steps", -1),
        ("learning_rate", 0.0),
        ("gamma", 1.5),
        ("gae_lambda", -0.1),
        ("clip_coef", float("nan")),
        ("ent_coef", -1.0),
        ("opp_rule", -0.5),
        ("device", "tpu"),
        ("total_updates", -3),
        ("hidden", 2.5),
        ("hidden", 5000),
        ("layers", 17),
        ("seed", -1),
        ("eval_seed", -1),
        ("total_minutes", float("inf")),
        ("opp_random", float("inf")),
        ("run_name", "a/b"),
        ("run_name", ".."),
        ("exp_name", ""),
        ("device", "cuda:x"),
    ],
)
def test_config_validation(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field if field != "opp_rule" else "opp_"):
        replace(Config(), **{field: value}).validate()


def test_config_needs_a_budget_and_opponents() -> None:
    with pytest.raises(ValueError, match="never ends"):
        Config(total_minutes=0, total_updates=0).validate()
    with pytest.raises(ValueError, match="opp_"):
        Config(opp_self=0, opp_snapshot=0, opp_rule=0, opp_random=0).validate()
    Config().validate()


def test_cli_help_lists_flags() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "train.ppo", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    for flag in ("--num-envs", "--learning-rate", "--resume", "--opp-rule", "--total-minutes"):
        assert flag in out.stdout


# ----------------------------------------------------------------------------- checkpoints
def test_checkpoint_errors_name_the_file(tmp_path: Path) -> None:
    from agents.ppo_agent import PPOAgent

    missing = tmp_path / "nope.pt"
    with pytest.raises(ValueError, match="nope.pt"):
        PPOAgent(missing)
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"definitely not a torch file")
    with pytest.raises(ValueError, match="corrupt.pt"):
        PPOAgent(corrupt)
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(3)}, other)
    with pytest.raises(ValueError, match="other.pt"):
        PPOAgent(other)
    wrong = tmp_path / "wrong_arch.pt"
    payload = model_payload(ActorCritic(hidden=16, layers=1), asdict(Config()), {})
    payload["arch"]["hidden"] = 32  # state_dict no longer fits
    torch.save(payload, wrong)
    with pytest.raises(ValueError, match="wrong_arch.pt"):
        PPOAgent(wrong)
    payload["arch"]["obs_size"] = 400
    torch.save(payload, wrong)
    with pytest.raises(ValueError, match="obs_size"):
        PPOAgent(wrong)


def test_agent_round_trip_and_registry(tmp_path: Path) -> None:
    from agents.ppo_agent import PPOAgent

    model = ActorCritic(hidden=16, layers=1)
    path = tmp_path / "agent.pt"
    torch.save(model_payload(model, asdict(Config()), {"update": 7}), path)
    torch.load(path, weights_only=True)  # plain tensors and containers only
    agent = PPOAgent(path)
    rng = np.random.default_rng(2)
    obs = rng.integers(0, 2, (64, 491)).astype(np.uint8)
    masks = random_masks(rng, 64).astype(np.int8)
    with torch.no_grad():
        logits = model.logits(torch.from_numpy(obs), torch.from_numpy(masks))
    expected = logits.masked_fill(~torch.from_numpy(masks).bool(), -1e9).argmax(1).numpy()
    np.testing.assert_array_equal(agent.act_batch(obs, masks), expected)
    assert agent.act(obs[0], masks[0]) == expected[0]
    sampler = PPOAgent(path, deterministic=False, seed=5)
    picks = sampler.act_batch(obs, masks)
    assert masks[np.arange(64), picks].all()
    reg = make_agent(f"ppo:{path}", seed=1)
    np.testing.assert_array_equal(reg.act_batch(obs, masks), expected)


# ----------------------------------------------------------------------------- shipped policy
STRENGTH_DEALS = 200
"""Duplicate deals (400 hands) per strength check: well under a second in the arena."""
STRENGTH_BAR = 20.0
"""Points/hand the lower end of the 95% CI against random must clear. The shipped policy's
mean is about +74 (+64 on these deals, CI [+53, +74]); an untrained network's is about 0."""


def strength_vs_random(agent: Agent) -> tuple[float, str]:
    """Lower 95% CI bound of ``agent`` against random on a fixed set of duplicate deals."""
    from agents.evaluation.arena import duel

    result = duel(agent, "random", n_deals=STRENGTH_DEALS, seed=0)
    return result.ci_low, result.summary()


def test_shipped_checkpoint_loads_as_plain_tensors() -> None:
    assert SHIPPED.is_file(), f"the shipped checkpoint {SHIPPED} is missing"
    assert SHIPPED.stat().st_size <= 10 * 2**20
    data = torch.load(SHIPPED, map_location="cpu", weights_only=True)
    # the input scaling the policy was trained with is what the observation module gives now
    assert torch.equal(data["model"]["obs_scale"], ActorCritic().obs_scale)


def test_shipped_checkpoint_is_fingerprinted_and_version_1_still_loads(tmp_path: Path) -> None:
    """The shipped file is the current version and verifies without a warning; the same
    weights in a version-1 file (no fingerprint) load, with a warning, and act the same."""
    import warnings

    from agents.ppo_agent import PPOAgent
    from agents.ppo_net import CHECKPOINT_VERSION, UnverifiedCheckpointWarning, fingerprint

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data = load_checkpoint(SHIPPED)
        shipped = PPOAgent(SHIPPED)
    assert data["version"] == CHECKPOINT_VERSION == 2
    assert data["fingerprint"] == fingerprint(data)
    old = {k: v for k, v in torch.load(SHIPPED, weights_only=True).items() if k != "fingerprint"}
    old["version"] = 1
    torch.save(old, tmp_path / "v1.pt")
    with pytest.warns(UnverifiedCheckpointWarning, match="v1.pt.*cannot be detected"):
        v1 = PPOAgent(tmp_path / "v1.pt")
    rng = np.random.default_rng(8)
    obs = rng.integers(0, 2, (512, 491)).astype(np.uint8)
    masks = random_masks(rng, 512).astype(np.int8)
    np.testing.assert_array_equal(v1.act_batch(obs, masks), shipped.act_batch(obs, masks))
    old["version"] = 3
    torch.save(old, tmp_path / "v3.pt")
    with pytest.raises(ValueError, match="v3.pt.*version 3"):
        load_checkpoint(tmp_path / "v3.pt")


@pytest.mark.parametrize(
    "hidden,layers,central,canonical,mask_input",
    [(16, 1, False, True, True), (8, 3, True, False, False), (256, 2, True, True, True)],
)
def test_state_shapes_are_the_model_state_dict(
    hidden: int, layers: int, central: bool, canonical: bool, mask_input: bool
) -> None:
    """What load_checkpoint checks a file against (computed without building a model) is
    exactly the state_dict of the model that would be built."""
    from agents.ppo_net import state_shapes

    model = ActorCritic(hidden, layers, central, canonical, mask_input)
    assert state_shapes(model.arch) == {k: tuple(v.shape) for k, v in model.state_dict().items()}


def test_shipped_checkpoint_clearly_beats_random() -> None:
    ci_low, summary = strength_vs_random(make_agent("ppo"))
    assert ci_low > STRENGTH_BAR, summary


def test_untrained_network_does_not_pass_the_strength_bar() -> None:
    """The bar above is one an untrained network of the same architecture fails."""
    from agents.ppo_agent import PPOAgent

    torch.manual_seed(0)
    fresh = build_model(load_checkpoint(SHIPPED)["arch"])
    ci_low, summary = strength_vs_random(PPOAgent.from_model(fresh, seed=0))
    assert ci_low <= STRENGTH_BAR, summary


# ----------------------------------------------------------------------------- training
class Crash(RuntimeError):
    """What :func:`train_crashing_at` raises from the update callback."""


def train_crashing_at(cfg: Config, update: int) -> None:
    """Train ``cfg`` and kill it mid-way: its callback raises :class:`Crash` at ``update``."""

    def crash(metrics: dict[str, float]) -> None:
        if metrics["update"] == update:
            raise Crash

    with pytest.raises(Crash):
        train(cfg, on_update=crash)


def assert_same_weights(a: Checkpoint, b: Checkpoint) -> None:
    """Two checkpoints hold bit-identical model weights."""
    assert a["model"].keys() == b["model"].keys()
    for k, w in a["model"].items():
        assert torch.equal(w, b["model"][k]), k


def test_resume_after_crash_is_bit_exact(tmp_path: Path) -> None:
    """A run killed mid-way (an exception from its callback) and resumed ends exactly where an
    uninterrupted run ends: only the interval since the last checkpoint is redone."""
    train(tiny_config(tmp_path / "a"))
    cfg = tiny_config(tmp_path / "b")
    train_crashing_at(cfg, 3)
    newest = tmp_path / "b" / "t" / "checkpoint.pt"
    assert load_checkpoint(newest)["update"] == 2
    # a resumed run keeps its own hyper-parameters (only the budget comes from the CLI)
    seen: list[dict[str, float]] = []
    train(replace(cfg, resume=True, learning_rate=0.5), on_update=seen.append)
    assert [m["update"] for m in seen] == [3, 4]
    full, resumed = load_checkpoint(tmp_path / "a" / "t" / "checkpoint.pt"), load_checkpoint(newest)
    assert resumed["update"] == 4 and resumed["config"]["learning_rate"] == cfg.learning_rate
    assert_same_weights(full, resumed)
    rows = (tmp_path / "b" / "t" / "metrics.csv").read_text().strip().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["1", "2", "3", "4"]


def test_the_interval_evaluation_leaves_the_weights_alone(tmp_path: Path) -> None:
    """Evaluating after every update (its own agent, deals and seed) trains the same weights
    as never evaluating: ``eval_every`` changes a run's log and the time it spends, not what
    an update does, so it is not part of the recipe."""
    seen: list[dict[str, float]] = []
    train(tiny_config(tmp_path, run_name="never"))
    train(tiny_config(tmp_path, run_name="each", eval_every=1, eval_deals=4), on_update=seen.append)
    assert all("eval_rule_mean" in m for m in seen) and len(seen) == 4
    never, each = (load_checkpoint(tmp_path / n / "checkpoint.pt") for n in ("never", "each"))
    assert never["update"] == each["update"] == 4
    assert_same_weights(never, each)


def test_smoke_training_subprocess(tmp_path: Path) -> None:
    export = tmp_path / "exported.pt"
    cmd = [
        sys.executable, "-m", "train.ppo", "--run-dir", str(tmp_path), "--run-name", "smoke",
        "--total-updates", "2", "--total-minutes", "0", "--num-envs", "8", "--num-steps", "64",
        "--hidden", "32", "--layers", "1", "--eval-every", "2", "--eval-deals", "8",
        "--checkpoint-every", "1", "--no-progress", "--export-path", str(export),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    run = tmp_path / "smoke"
    assert (run / "checkpoint.pt").exists() and (run / "metrics.csv").exists()
    header, *rows = (run / "metrics.csv").read_text().strip().splitlines()
    assert len(rows) == 2 and "eval_rule_mean" in header
    last = dict(zip(header.split(","), rows[-1].split(","), strict=True))
    assert last["eval_random_mean"] != "" and last["eval_rule_mean"] != ""
    assert list(run.glob("events.out.tfevents*"))
    from agents.ppo_agent import PPOAgent

    assert PPOAgent(export).info["update"] == 2


def test_opponents_are_named_and_drawn_as_configured(tmp_path: Path) -> None:
    assert OPPONENTS == ("self", "snapshot", "rule", "random")  # the train_vs_* column names
    probs = Config(opp_self=1, opp_snapshot=2, opp_rule=3, opp_random=4).opponent_probs()
    np.testing.assert_allclose(probs, [0.1, 0.2, 0.3, 0.4])
    assert (Opponent.RULE, Opponent.RANDOM) == (2, 3)  # the order of those probabilities
    only_random = tiny_config(tmp_path, opp_self=0, opp_snapshot=0, opp_rule=0, opp_random=1)
    metrics = train(replace(only_random, total_updates=1, num_steps=80))
    assert "train_vs_random" in metrics
    assert "train_vs_rule" not in metrics and "train_vs_snapshot" not in metrics


def test_metrics_report_the_gradient_norm_and_how_often_the_clip_binds(tmp_path: Path) -> None:
    """``grad_norm``: the gradient's norm before the clip (so above a clip that bound);
    ``grad_clipped``: the share of an update's minibatches on which ``max_grad_norm`` bound.
    ``max_grad_norm=0`` is no clip (not a clip to 0, which would freeze the weights)."""
    rows: dict[str, list[dict[str, float]]] = {"tight": [], "loose": [], "off": []}
    for name, clip in (("tight", 1e-6), ("loose", 1e6), ("off", 0.0)):
        cfg = tiny_config(
            tmp_path, run_name=name, max_grad_norm=clip, total_updates=2, num_steps=80
        )
        train(cfg, on_update=rows[name].append)
    assert [r["grad_clipped"] for r in rows["tight"]] == [1.0, 1.0]
    assert [r["grad_clipped"] for r in rows["loose"]] == [0.0, 0.0]
    assert [r["grad_clipped"] for r in rows["off"]] == [0.0, 0.0]
    off, loose = (load_checkpoint(tmp_path / n / "checkpoint.pt") for n in ("off", "loose"))
    assert_same_weights(off, loose)  # a clip that never binds: the same run
    assert all(1e-3 < r["grad_norm"] < 1e6 for r in rows["tight"] + rows["loose"])
    header, *lines = (tmp_path / "tight" / "metrics.csv").read_text().splitlines()
    assert header.split(",")[-2:] == ["grad_norm", "grad_clipped"] and len(lines) == 2
    assert lines[-1].split(",")[-1] == "1.0"


def test_the_defaults_are_the_shipped_recipe() -> None:
    """``python -m train.ppo --seed 13 --total-minutes 60`` is the run that made the shipped
    checkpoint: every setting in its file is today's default, except the few that name the
    run or its outputs rather than shape it (the seed among them: the recipe is the rest), and
    the engine, which a run records resolved ("auto" -> "numpy"). ``eval_every`` is among
    them: logging, which leaves the weights alone (the test above); release 12 evaluated
    every 60 updates, today's runs every 240."""
    saved = load_checkpoint(SHIPPED)["config"]
    own = {"run_dir", "run_name", "export_path", "progress", "tensorboard", "eval_backend",
           "seed", "milestone_minutes", "eval_every"}  # fmt: skip
    default = replace(Config(), engine=Config().resolved_engine)
    differ = {
        k: (v, getattr(default, k))
        for k, v in saved.items()
        if k not in own
        and k in Config.__dataclass_fields__
        and v != getattr(default, k)
        and not (isinstance(v, list) and tuple(v) == getattr(default, k))
    }
    assert differ == {}
    assert saved["seed"] == 13


def test_hidden_hands_for_central_critic() -> None:
    from butifarra_env.core.game import Game
    from butifarra_env.core.observation import encode_state
    from butifarra_env.core.options import Options
    from butifarra_env.core.rules import random_deal

    game = Game(Options(), 0, random_deal(np.random.default_rng(4), 0))
    state = np.stack([encode_state(game)] * 4)
    got = hidden_hands(state, np.arange(4))
    for seat in range(4):
        for k in range(3):
            hand = game.hands[(seat + 1 + k) % 4]
            bits = [(hand >> c) & 1 for c in range(48)]
            assert got[seat, 48 * k : 48 * (k + 1)].tolist() == bits
    model = ActorCritic(hidden=16, layers=1, central_value=True)
    obs = torch.zeros(4, 491, dtype=torch.uint8)
    mask = torch.ones(4, 56, dtype=torch.int8)
    _, values = model(obs, mask, torch.from_numpy(got))
    assert values.shape == (4,)
    with pytest.raises(ValueError, match="hidden hands"):
        model(obs, mask)


def test_canonical_suits_make_the_policy_suit_symmetric() -> None:
    """Moving trump to another suit (the other suits keeping their order) relabels the
    policy's logits the same way: with canonical suits the net cannot tell the difference."""
    from butifarra_env.core.observation import CARD_FIELDS, field_slice

    torch.manual_seed(0)
    model = ActorCritic(hidden=32, layers=1, central_value=True)
    rng = np.random.default_rng(3)
    n = 64
    obs = rng.integers(0, 2, (n, 491)).astype(np.uint8)
    trump = field_slice("trump")
    obs[:, trump] = 0
    obs[:, trump.start + 1] = 1  # trump copas
    masks = random_masks(rng, n).astype(np.int8)
    hid = rng.integers(0, 2, (n, 144)).astype(np.uint8)
    swap = [0, 1, 2, 3]
    swap[0], swap[1] = 1, 0  # relabel oros <-> copas (the other suits keep their order)
    card_perm = np.array([swap[c // 12] * 12 + c % 12 for c in range(48)])
    obs2 = obs.copy()
    for name in CARD_FIELDS:
        for base in range(field_slice(name).start, field_slice(name).stop, 48):
            obs2[:, base + card_perm] = obs[:, base : base + 48]
    for base in range(field_slice("voids").start, field_slice("voids").stop, 4):
        obs2[:, base + np.array(swap)] = obs[:, base : base + 4]
    obs2[:, trump.start + np.array(swap)] = obs[:, trump.start : trump.start + 4]
    masks2 = masks.copy()
    masks2[:, card_perm] = masks[:, :48]
    hid2 = hid.copy()
    for b in range(3):
        hid2[:, 48 * b + card_perm] = hid[:, 48 * b : 48 * b + 48]
    with torch.no_grad():
        l1, v1 = model(torch.from_numpy(obs), torch.from_numpy(masks), torch.from_numpy(hid))
        l2, v2 = model(torch.from_numpy(obs2), torch.from_numpy(masks2), torch.from_numpy(hid2))
    torch.testing.assert_close(l2[:, torch.from_numpy(card_perm)], l1[:, :48])
    torch.testing.assert_close(v1, v2)
