"""Ray RLlib: the adapters (observation keys and dtypes RLlib's action-masking modules read,
hands namespaced per slot), the trainer's sampler (bulk episodes equal to RLlib's own) and
the training command (train/ppo.py's vocabulary, a couple of PPO iterations on a local Ray,
export played by the arena, resume after a crash and over a torn CSV log, one-line errors,
runs never overwritten)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray.rllib")

import torch  # noqa: E402
from ray.rllib.algorithms.ppo import PPOConfig  # noqa: E402
from ray.rllib.core.columns import Columns  # noqa: E402
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec  # noqa: E402
from ray.rllib.core.rl_module.rl_module import RLModuleSpec  # noqa: E402
from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner  # noqa: E402
from ray.rllib.examples.rl_modules.classes.action_masking_rlm import (  # noqa: E402
    ActionMaskingTorchRLModule,
)

from agents.evaluation.arena import duel  # noqa: E402
from agents.ppo_net import HIDDEN_HANDS_SIZE, ActorCritic, hidden_hands  # noqa: E402
from agents.registry import make_agent  # noqa: E402
from butifarra_env.core.actions import random_legal_actions  # noqa: E402
from butifarra_env.envs.batched import BatchedEnv  # noqa: E402
from butifarra_env.integrations.rllib import (  # noqa: E402
    MASK_KEY,
    OBS_KEY,
    SHARED_POLICY,
    BatchedHandsEnv,
    PettingZooHandEnv,
    agent_id,
    parse_agent_id,
    shared_policy_mapping,
)
from train import rllib_ppo  # noqa: E402
from train.local_ray import local_cluster  # noqa: E402
from train.rllib_ppo import ActorCriticModule, LeagueMapping, Settings  # noqa: E402
from train.rllib_sampler import (  # noqa: E402
    HIDDEN_HANDS,
    TEACHER_ACTION,
    BatchedHandsEnvRunner,
    bidding_rows,
)

ROOT = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------------------- adapters
def test_pettingzoo_hand_env_gives_the_keys_and_dtypes_of_rllib_masking_modules() -> None:
    env = PettingZooHandEnv({"seed": 3, "reward_scale": 0.5})
    obs, _ = env.reset()
    rng = np.random.default_rng(0)
    total: dict[str, float] = {}
    for _ in range(200):
        (aid, o), *rest = obs.items()
        assert not rest and set(o) == {OBS_KEY, MASK_KEY}
        assert o[OBS_KEY].dtype == np.float32 and o[OBS_KEY].shape == (491,)
        assert o[MASK_KEY].dtype == np.float32 and o[MASK_KEY].shape == (56,)
        assert env.observation_space[aid].contains(o)
        action = int(random_legal_actions(o[MASK_KEY][None].astype(np.int8), rng)[0])
        obs, rewards, terminateds, _, _ = env.step({aid: action})
        for a, r in rewards.items():
            total[a] = total.get(a, 0.0) + r
        if terminateds["__all__"]:
            break
    assert terminateds["__all__"] and set(obs) == {f"player_{s}" for s in range(4)}
    assert sum(total.values()) == 0.0 and any(total.values())  # zero-sum, scored
    assert total["player_0"] == total["player_2"] == -total["player_1"]


def test_batched_hands_env_plays_each_slot_as_butifarra_v0_does() -> None:
    """Namespaced agents, one mover per hand, each hand's four agents ended once with the
    engine's rewards (the same seed and actions on a bare BatchedEnv give the same)."""
    n, seed = 3, 11
    env = BatchedHandsEnv({"num_hands": n, "seed": seed, "obs_dtype": "uint8"})
    engine = BatchedEnv(n, seed=seed)
    obs, _ = env.reset(seed=seed)
    e_obs, e_mask, e_seat = engine.reset(seed=seed)
    rng = np.random.default_rng(1)
    ended: dict[str, float] = {}
    live = np.ones(n, bool)
    while True:
        expected = {agent_id(h, int(e_seat[h])) for h in np.flatnonzero(live)}
        assert set(obs) - set(ended) == expected
        for h in np.flatnonzero(live):
            o = obs[agent_id(h, int(e_seat[h]))]
            assert o[OBS_KEY].dtype == np.uint8 and (o[OBS_KEY] == e_obs[h]).all()
            assert (o[MASK_KEY] == e_mask[h]).all()
        actions = random_legal_actions(e_mask, rng)
        obs, rewards, terminateds, _, _ = env.step(
            {agent_id(h, int(e_seat[h])): int(actions[h]) for h in np.flatnonzero(live)}
        )
        e_obs, e_mask, e_seat, e_rew, done = engine.step(actions)
        for h in np.flatnonzero(done & live):
            for s in range(4):
                aid = agent_id(h, s)
                assert aid not in ended and terminateds[aid]
                assert rewards[aid] == e_rew[h, s] and not obs[aid][OBS_KEY].any()
                ended[aid] = rewards[aid]
        live &= ~done
        if terminateds["__all__"]:
            break
    assert not live.any() and len(ended) == 4 * n
    assert parse_agent_id("h12_player_3") == (12, 3) and parse_agent_id("player_1") == (0, 1)
    for bad in ("h_player_1", "player_4", "hx_player_0", "seat_0"):
        with pytest.raises(ValueError, match="not a Butifarra agent id"):
            parse_agent_id(bad)
    with pytest.raises(ValueError, match="num_hands"):
        BatchedHandsEnv({"num_hands": 0})
    with pytest.raises(ValueError, match="obs_dtype"):
        BatchedHandsEnv({"obs_dtype": "int64"})


def _runner_config(runner_cls: type, seed: int = 5) -> Any:
    spec = RLModuleSpec(module_class=ActorCriticModule, model_config={"hidden": 32, "layers": 1})
    return (
        PPOConfig()
        .environment(
            BatchedHandsEnv,
            env_config={"num_hands": 1, "reward_scale": 0.1},
            disable_env_checking=True,  # RLlib's checker steps random (illegal) actions
        )
        .env_runners(num_env_runners=0, env_runner_cls=runner_cls)
        .multi_agent(policies={SHARED_POLICY}, policy_mapping_fn=shared_policy_mapping)
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={SHARED_POLICY: spec}))
        .debugging(seed=seed)
    )


def _episode_data(episode: Any) -> dict[str, Any]:
    """What the learner reads from an episode, agent by agent."""
    out: dict[str, Any] = {"env_t": episode.env_t, "done": episode.is_terminated}
    for aid, sa in episode.agent_episodes.items():
        out[aid] = {
            "obs": np.asarray(sa.get_observations()[OBS_KEY]),
            "mask": np.asarray(sa.get_observations()[MASK_KEY]),
            "actions": np.asarray(sa.get_actions()),
            "rewards": np.asarray(sa.get_rewards(), np.float32),
            "logp": np.asarray(sa.get_extra_model_outputs("action_logp")),
            "terminated": sa.is_terminated,
            "module": sa.module_id,
            "env_t_to_agent_t": list(episode.env_t_to_agent_t[aid].data),
        }
    return out


def test_bulk_episodes_equal_rllib_runner_episodes() -> None:
    """The same deal and greedy play through RLlib's MultiAgentEnvRunner (step by step) and
    BatchedHandsEnvRunner (bulk) give the same episode, field by field."""
    ref_runner = MultiAgentEnvRunner(config=_runner_config(MultiAgentEnvRunner))
    fast_runner = BatchedHandsEnvRunner(config=_runner_config(BatchedHandsEnvRunner))
    fast_runner.module.set_state(ref_runner.module.get_state())
    (ref,) = ref_runner.sample(num_episodes=1, explore=False)
    fast = fast_runner.sample(num_episodes=1, explore=False)
    a, b = _episode_data(ref), _episode_data(fast[0])
    assert set(a) == set(b) and a["done"] and a["env_t"] == b["env_t"] > 48
    for aid in (agent_id(0, s) for s in range(4)):
        for key, value in a[aid].items():
            if isinstance(value, np.ndarray):
                np.testing.assert_allclose(b[aid][key], value, rtol=1e-6, err_msg=f"{aid} {key}")
            else:
                assert b[aid][key] == value, (aid, key)
        assert a[aid]["rewards"][-1] != 0 and not a[aid]["rewards"][:-1].any()
    ref_runner.stop()
    fast_runner.stop()


def test_league_mapping_keeps_a_hand_together() -> None:
    class Episode:
        def __init__(self, i: int) -> None:
            self.id_ = f"ep{i}"

    for fixed, probs in ((rllib_ppo.RULE_POLICY, (0, 0, 1, 0)), ("random", (0, 0, 0, 1))):
        only = LeagueMapping(probs, snapshots=2, seed=0)
        teams = []
        for i in range(40):
            ep = Episode(i)
            mods = [only(agent_id(7, s), ep) for s in range(4)]
            assert mods[0] == mods[2] != mods[1] == mods[3]
            assert sorted({mods[0], mods[1]}) == sorted([fixed, SHARED_POLICY])
            teams.append(mods[0] == SHARED_POLICY)
        assert 0 < sum(teams) < 40  # the learner sits on both teams
    self_only = LeagueMapping((1.0, 0.0, 0.0, 0.0), snapshots=2, seed=0)
    assert {self_only(agent_id(0, s), Episode(0)) for s in range(4)} == {SHARED_POLICY}
    mixed = LeagueMapping((0.0, 0.5, 0.25, 0.25), snapshots=2, seed=3)
    seen = {mixed(agent_id(0, 1), Episode(i)) for i in range(200)} - {SHARED_POLICY}
    assert seen == {"snapshot_0", "snapshot_1", "rule", "random"}


# ----------------------------------------------------------------------------- the recipe
RECIPE_NET = {
    "hidden": 32, "layers": 1, "central_value": True, "canonical_suits": True,
    "mask_input": True, "belief": True, "card_features": True, "card_head": True,
}  # fmt: skip


def _recipe_module(**over: Any) -> ActorCriticModule:
    env = BatchedHandsEnv({"num_hands": 1, "obs_dtype": "uint8"})
    spec = RLModuleSpec(
        module_class=ActorCriticModule,
        observation_space=env.agent_observation_space,
        action_space=env.agent_action_space,
        model_config=RECIPE_NET | {"teacher": "rule"} | over,
    )
    module = spec.build()
    assert isinstance(module, ActorCriticModule)
    return module


def _decisions(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` real decisions of random play (observations, masks, seats, hidden hands)."""
    env = BatchedEnv(n, seed=seed)
    obs, mask, seat = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(int(rng.integers(0, 20))):  # some into the hand: bids and cards
        obs, mask, seat, _, _ = env.step(random_legal_actions(np.asarray(mask), rng))
    obs, mask, seat = np.asarray(obs), np.asarray(mask), np.asarray(seat)
    return {"obs": obs, "mask": mask, "seat": seat, "hid": hidden_hands(env.state(), seat)}


def _train_batch(d: dict[str, np.ndarray], loss_mask: np.ndarray) -> dict[str, Any]:
    return {
        Columns.OBS: {OBS_KEY: torch.from_numpy(d["obs"]), MASK_KEY: torch.from_numpy(d["mask"])},
        HIDDEN_HANDS: torch.from_numpy(d["hid"]),
        Columns.LOSS_MASK: torch.from_numpy(loss_mask),
    }


def test_module_builds_with_every_option_and_trains_on_the_valid_rows_only() -> None:
    """Every network option is on (the export's arch says so); the train pass reads the
    hidden-hands column, returns the belief loss, and its outputs on the valid rows do not
    depend on the extra rows RLlib adds (loss_mask False)."""
    module = _recipe_module()
    arch = module.net.arch
    assert all(arch[k] for k in ("central_value", "belief", "card_features", "card_head"))
    assert module.needs_hidden and module.teacher == "rule"
    d = _decisions(6)
    valid = np.array([True, True, False, True, True, False])
    out = module.forward_train(_train_batch(d, valid))
    assert out[Columns.ACTION_DIST_INPUTS].shape == (6, 56) and out["belief_loss"].ndim == 0
    ref_logits, ref_values, ref_belief = module.net.forward_all(
        *(torch.from_numpy(d[k][valid]) for k in ("obs", "mask", "hid"))
    )
    legal = torch.from_numpy(d["mask"][valid]).bool()
    torch.testing.assert_close(out[Columns.ACTION_DIST_INPUTS][valid][legal], ref_logits[legal])
    torch.testing.assert_close(out[Columns.EMBEDDINGS][valid], ref_values)
    torch.testing.assert_close(out["belief_loss"], ref_belief)
    # the value of the central critic changes with the hidden hands, the policy does not
    other = dict(d, hid=np.roll(d["hid"], 1, axis=0))
    again = module.forward_train(_train_batch(other, valid))
    assert not torch.allclose(again[Columns.EMBEDDINGS][valid], ref_values)
    torch.testing.assert_close(again[Columns.ACTION_DIST_INPUTS], out[Columns.ACTION_DIST_INPUTS])
    with pytest.raises(ValueError, match="hidden_hands"):
        module.forward_train({Columns.OBS: _train_batch(d, valid)[Columns.OBS]})
    for options in ({"central_value": False}, {"belief": False}):  # GAE's value pass
        one = _recipe_module(**options)
        values = one.compute_values(_train_batch(d, valid))
        assert values.shape == (6,) and bool(torch.isfinite(values).all())
    plain = _recipe_module(central_value=False, belief=False, teacher=None)
    assert not plain.needs_hidden and "belief_loss" not in plain.forward_train(
        {Columns.OBS: _train_batch(d, valid)[Columns.OBS]}
    )


def test_a_narrower_critic_is_train_ppo_s_network_and_reaches_the_export() -> None:
    """``critic_hidden`` sizes the centralised critic's layers as ``train.ppo``'s does (the
    same ``ActorCritic``, parameter for parameter), the trunk and the policy keep ``hidden``,
    and the module's arch (what the export saves) records the width."""
    module = _recipe_module(critic_hidden=16)
    assert module.net.arch["critic_hidden"] == 16
    twin = ActorCritic(**(RECIPE_NET | {"critic_hidden": 16}))
    shapes = {k: v.shape for k, v in module.net.state_dict().items()}
    assert shapes == {k: v.shape for k, v in twin.state_dict().items()}
    wide = {k: v.shape for k, v in _recipe_module().net.state_dict().items()}
    narrower = {k for k in shapes if shapes[k] != wide[k]}
    assert narrower and all(k.startswith(("critic", "value")) for k in narrower), narrower
    d = _decisions(4)
    out = module.forward_train(_train_batch(d, np.ones(4, bool)))
    assert out[Columns.EMBEDDINGS].shape == (4,)


def test_belief_loss_is_zero_for_a_perfect_prediction_and_log2_for_none() -> None:
    module = _recipe_module()
    d = _decisions(4)
    batch = _train_batch(dict(d, hid=np.ones_like(d["hid"])), np.ones(4, bool))
    with torch.no_grad():
        module.net.belief.weight.zero_()
        module.net.belief.bias.fill_(40.0)  # "every other seat holds every card": all ones
        assert float(module.forward_train(batch)["belief_loss"]) < 1e-12
        module.net.belief.bias.zero_()  # 50/50 everywhere
        assert float(module.forward_train(batch)["belief_loss"]) == pytest.approx(np.log(2))


def _loss_inputs(n: int = 4) -> dict[str, Any]:
    """A hand-built batch: rows 0-1 a bid (actions 48-55 legal), rows 2-3 a card play."""
    mask = torch.zeros(n, 56)
    mask[:2, 48:52] = 1  # 4 legal bids
    mask[2:, :2] = 1  # 2 legal cards
    return {
        "logits": torch.zeros(n, 56),  # uniform over the legal actions
        "values": torch.zeros(n),
        "mask": mask,
        "actions": torch.tensor([48, 49, 0, 1]),
        "old_logp": torch.log(torch.tensor([0.25, 0.25, 0.5, 0.5])),
        "advantages": torch.zeros(n),
        "value_targets": torch.zeros(n),
        "teacher_actions": torch.tensor([50, -1, 1, -1]),
        "belief_loss": None,
    }


def test_recipe_loss_teacher_and_belief_terms_have_their_known_values() -> None:
    """Uniform policy, zero advantages and values: the loss is the entropy bonus plus the
    teacher's cross-entropy (log 4 on the asked bid, log 2 on the asked card, weighted by the
    schedule with the bid floor) plus belief_coef x the belief loss; a policy that puts all
    its mass on the teacher's actions has zero imitation loss (its KL to the teacher's)."""
    coefs = rllib_ppo.LossCoefs(ent_coef=0.0, belief_coef=0.5, teacher_bid_floor=0.3)
    b = _loss_inputs()
    loss, parts = rllib_ppo.recipe_loss(**b, coefs=coefs, teacher_w=0.0)
    # teacher weight 0: only the bid floor weighs, on the bid row (mean over the asked rows)
    assert float(parts["loss_teacher"]) == pytest.approx((np.log(4) + np.log(2)) / 2)
    assert float(loss) == pytest.approx(0.3 * np.log(4) / 2, rel=1e-6)
    assert np.isnan(float(parts["loss_belief"])) and float(parts["approx_kl"]) == 0
    loss, parts = rllib_ppo.recipe_loss(
        **(b | {"belief_loss": torch.tensor(0.2)}), coefs=coefs, teacher_w=1.0
    )
    assert float(loss) == pytest.approx((np.log(4) + np.log(2)) / 2 + 0.5 * 0.2, rel=1e-6)
    assert float(parts["loss_belief"]) == pytest.approx(0.2)
    peaked = torch.full((4, 56), -30.0)
    peaked[torch.arange(4), torch.tensor([50, 48, 1, 0])] = 30.0  # the teacher's where asked
    _, parts = rllib_ppo.recipe_loss(**(b | {"logits": peaked}), coefs=coefs, teacher_w=1.0)
    assert float(parts["loss_teacher"]) == pytest.approx(0.0, abs=1e-12)
    no_teacher = b | {"teacher_actions": torch.full((4,), -1)}
    loss, parts = rllib_ppo.recipe_loss(**no_teacher, coefs=coefs, teacher_w=1.0)
    assert float(loss) == 0.0 and np.isnan(float(parts["loss_teacher"]))
    # uint8 masks (what the sampler records) find the same bidding rows
    assert bidding_rows(b["mask"].to(torch.uint8).bool()).tolist() == [True, True, False, False]
    # the PPO terms: a positive advantage on a clipped-up ratio, and the value error
    up = b | {"advantages": torch.tensor([1.0, -1.0, 1.0, -1.0]), "values": torch.ones(4)}
    up["teacher_actions"] = torch.full((4,), -1)
    loss, parts = rllib_ppo.recipe_loss(**up, coefs=coefs, teacher_w=0.0)
    assert float(parts["loss_value"]) == pytest.approx(0.5) and float(parts["entropy"]) > 0
    assert float(loss) == pytest.approx(float(parts["loss_policy"]) + 0.5 * 0.5)


def test_schedules_are_train_ppo_s() -> None:
    """Step size and imitation weight over the budget equal train/ppo.py's (its Config's
    teacher_weight, its ppo_update's anneal), and the defaults are its recipe."""
    from train.ppo import Config

    cfg, s = Config(), Settings()
    for progress in np.linspace(0, 1.2, 13):
        assert rllib_ppo.teacher_weight(
            s.teacher, s.teacher_coef, s.teacher_until, progress
        ) == pytest.approx(cfg.teacher_weight(progress))
        frac = 1.0 - (1.0 - cfg.lr_final) * min(1.0, progress)
        assert rllib_ppo.annealed_lr(
            s.learning_rate, s.lr_final, s.anneal_lr, progress
        ) == pytest.approx(frac * cfg.learning_rate)
    shared = (
        "central_value", "canonical_suits", "mask_input", "belief", "belief_coef",
        "card_features", "card_head", "critic_hidden", "learning_rate", "anneal_lr",
        "lr_final", "gamma",
        "gae_lambda", "reward_scale", "update_epochs", "clip_coef", "ent_coef", "vf_coef",
        "max_grad_norm", "norm_adv", "teacher", "teacher_coef", "teacher_until",
        "teacher_bid_floor", "opp_self", "opp_snapshot", "opp_rule", "opp_random",
    )  # fmt: skip
    assert {k: getattr(s, k) for k in shared} == {k: getattr(cfg, k) for k in shared}
    assert rllib_ppo.teacher_weight(None, 1.0, 0.25, 0.0) == 0.0
    assert rllib_ppo.annealed_lr(1e-3, 0.0, False, 0.9) == 1e-3


def test_fast_sampler_records_the_hidden_hands_and_the_teachers_actions() -> None:
    """The columns the recipe trains on come with each learner decision: the other three
    hands (disjoint from the mover's, 3 x its hand size give or take the trick), and the
    rule-based agent's action on the same observation (-1 off the bids once the scope is
    bids only; hands dealt afresh, as hands in progress keep what they recorded)."""
    spec = RLModuleSpec(
        module_class=ActorCriticModule, model_config=RECIPE_NET | {"teacher": "rule"}
    )
    config = (
        _runner_config(BatchedHandsEnvRunner)
        .environment(
            BatchedHandsEnv,
            env_config={"num_hands": 4, "reward_scale": 0.1, "obs_dtype": "uint8"},
            disable_env_checking=True,
        )
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={SHARED_POLICY: spec}))
    )
    runner = BatchedHandsEnvRunner(config=config)
    rule = make_agent("rule", seed=0)
    try:
        for bids_only in (False, True):
            runner.set_teacher_scope(bids_only)
            episodes = runner.sample(num_episodes=3, explore=True, force_reset=True)
            assert len(episodes) >= 3
            for sa in (sa for e in episodes for sa in e.agent_episodes.values()):
                n = len(sa)
                obs = np.asarray(sa.get_observations()[OBS_KEY])[:n].astype(np.uint8)
                mask = np.asarray(sa.get_observations()[MASK_KEY])[:n].astype(np.int8)
                hid = np.asarray(sa.get_extra_model_outputs(HIDDEN_HANDS))[:n]
                teach = np.asarray(sa.get_extra_model_outputs(TEACHER_ACTION))[:n]
                assert hid.shape == (n, HIDDEN_HANDS_SIZE) and hid.dtype == np.uint8
                own = obs[:, :48].astype(bool)  # the mover's hand comes first
                held = hid.reshape(n, 3, 48).astype(bool)
                assert not (held & own[:, None, :]).any()
                k = own.sum(1)
                assert (held.sum((1, 2)) >= 3 * (k - 1)).all() and (held.sum((1, 2)) <= 3 * k).all()
                bids = bidding_rows(mask)
                asked = bids if bids_only else np.ones(n, bool)
                assert (teach[~asked] == -1).all()
                np.testing.assert_array_equal(teach[asked], rule.act_batch(obs[asked], mask[asked]))
    finally:
        runner.stop()


# ----------------------------------------------------------------------------- CLI checks
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--update-epochs", "0"], "update_epochs must be an int >= 1"),
        (["--learning-rate", "-1"], "learning_rate must be a finite number > 0"),
        (["--clip-coef", "0"], "clip_coef must be a finite number > 0"),
        (["--ent-coef", "-0.1"], "ent_coef must be a finite number >= 0"),
        (["--max-grad-norm", "nan"], "max_grad_norm must be a finite number >= 0"),
        (["--gamma", "1.5"], "gamma must be in [0, 1]"),
        (["--total-updates", "0", "--total-minutes", "0"], "the run never ends"),
        (
            ["--opp-self", "0", "--opp-snapshot", "0", "--opp-rule", "0", "--opp-random", "0"],
            "opp_self, opp_snapshot, opp_rule, opp_random must not all be 0",
        ),
        (["--opp-random", "-1"], "opp_random must be a finite number >= 0"),
        (["--minibatch", "9000", "--train-batch", "8192"], "must not exceed train_batch"),
        (["--run-name", "a/b"], "run_name must be a plain folder name"),
        (["--env-path", "slow"], "invalid choice 'slow' for argument '--env-path'"),
        (["--num-hands", "many"], "--num-hands"),
        (["--frobnicate"], "Unrecognized options: --frobnicate"),
        (["--lr", "1e-3"], "Unrecognized options: --lr"),  # the old name: now --learning-rate
        (["--teacher-until", "2"], "teacher_until must be in [0, 1]"),
        (["--belief-coef", "-1"], "belief_coef must be a finite number >= 0"),
        (["--teacher", "nosuchagent"], "teacher: "),
        (
            ["--env-path", "batched"],
            "--central-value, --teacher need the hidden hands or the teacher's actions, which"
            " only --env-path fast records; with --env-path batched pass --no-central-value"
            " --teacher None",
        ),
        (
            ["--env-path", "pettingzoo", "--belief", "--teacher", "None"],
            "--central-value, --belief need the hidden hands or the teacher's actions, which"
            " only --env-path fast records; with --env-path pettingzoo pass --no-central-value"
            " --no-belief",
        ),
        (["--critic-hidden", "-1"], "critic_hidden must be an int 0-"),
        (["--critic-hidden", "64", "--no-central-value"], "critic_hidden=64 needs central_value"),
    ],
)
def test_bad_flags_are_one_line_errors(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        rllib_ppo.main(["--run-dir", str(tmp_path), *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert not any(tmp_path.iterdir())  # nothing written


def test_existing_run_is_refused_without_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "mine"
    run.mkdir()
    (run / "settings.json").write_text("{}")
    with pytest.raises(SystemExit) as exc:
        rllib_ppo.main(["--run-dir", str(tmp_path), "--run-name", "mine"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--resume" in err and err.count("\n") == 1
    assert [p.name for p in run.iterdir()] == ["settings.json"]
    assert (run / "settings.json").read_text() == "{}"


def test_resume_without_checkpoints_names_the_real_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose checkpoint folders are gone but whose export is there: the refusal says
    that the folder has no checkpoint (and what it holds), not that the export is another
    run's; nothing is changed."""
    run = tmp_path / "gone"
    run.mkdir()
    s = Settings(run_dir=str(tmp_path), run_name="gone")
    (run / "settings.json").write_text(json.dumps(dataclasses.asdict(s)))
    (run / "export.pt").write_bytes(b"an agent")
    (run / "metrics.csv").write_text("iteration\n1\n")
    before = sorted(p.name for p in run.iterdir())
    with pytest.raises(SystemExit) as exc:
        rllib_ppo.main(["--run-dir", str(tmp_path), "--run-name", "gone", "--resume"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "has no checkpoint to resume from" in err and "another run" not in err
    assert "export.pt, metrics.csv, settings.json" in err and "--run-name" in err
    assert sorted(p.name for p in run.iterdir()) == before


def test_resume_of_a_run_with_old_setting_names_is_refused_naming_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """settings.json of an older version (its own names: lr, clip...) is not silently
    half-read: the resume is refused, naming the unknown keys and their names now."""
    run = tmp_path / "old"
    run.mkdir()
    old = {"run_name": "old", "seed": 1, "lr": 5e-4, "clip": 0.2, "frobnicate": 1}
    (run / "settings.json").write_text(json.dumps(old))
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    with pytest.raises(SystemExit) as exc:
        rllib_ppo.main(["--run-dir", str(tmp_path), "--run-name", "old", "--resume"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith("error: cannot resume") and err.count("\n") == 1
    assert "'lr' (now 'learning_rate')" in err and "'clip' (now 'clip_coef')" in err
    assert "'frobnicate'" in err and "'seed'" not in err
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before


def test_a_run_from_before_the_recipe_resumes_with_its_own_network(tmp_path: Path) -> None:
    """A settings.json without the recipe's settings (written by an older version) means the
    plain network, no teacher and a constant step size, not today's defaults."""
    run = tmp_path / "old"
    run.mkdir()
    saved = dataclasses.asdict(Settings())
    for key in rllib_ppo.BEFORE_RECIPE:
        del saved[key]
    (run / "settings.json").write_text(json.dumps(saved | {"update_epochs": 2}))
    s = rllib_ppo.Run(Settings(run_dir=str(tmp_path), run_name="old", resume=True)).s
    assert not (s.central_value or s.belief or s.card_features or s.card_head or s.anneal_lr)
    assert s.teacher is None and s.update_epochs == 2
    assert rllib_ppo.arch_of(s)["central_value"] is False


def test_settings_share_train_ppo_vocabulary_and_help_lists_every_field() -> None:
    """The knobs both trainers have carry train/ppo.py's names (its Config fields), and
    ``python -m train.rllib_ppo --help`` (tyro, from the field docstrings) documents them all."""
    from train.ppo import Config

    ours = {f.name for f in fields(Settings)}
    shared = {
        "run_name", "run_dir", "seed", "torch_threads", "total_minutes", "total_updates",
        "hidden", "layers", "learning_rate", "gamma", "gae_lambda", "reward_scale",
        "update_epochs", "clip_coef", "ent_coef", "vf_coef", "max_grad_norm", "opp_self",
        "opp_snapshot", "opp_rule", "opp_random", "snapshot_every", "snapshot_pool",
        "eval_every", "eval_deals", "eval_seed", "checkpoint_every", "export_path", "resume",
        "tensorboard",
    }  # fmt: skip
    assert shared <= ours and shared <= {f.name for f in fields(Config)}
    assert not ours & set(rllib_ppo.RENAMED)  # the old names are gone
    out = subprocess.run(
        [sys.executable, "-m", "train.rllib_ppo", "--help"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    for name in ours:
        assert f"--{name.replace('_', '-')} " in out.stdout or (
            f"--{name.replace('_', '-')}," in out.stdout  # boolean flags: --resume, --no-resume
        ), name
    assert "Adam step size" in out.stdout and "PPO ratio clipping" in out.stdout


class _FolderAlgo:
    """What save_checkpoint asks of an RLlib Algorithm: save_to_path (a folder of state)."""

    def __init__(self) -> None:
        self.state = 0

    def save_to_path(self, path: str) -> None:
        Path(path).mkdir(parents=True)
        (Path(path) / "state.txt").write_text(str(self.state))


def test_checkpoint_folders_rotate_and_an_unreadable_newest_is_set_aside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The newest checkpoint folder becomes checkpoint.prev/; a resume passes over an
    unreadable newest (naming it), whose folder the next save keeps aside instead of
    rotating it over the good previous one; hidden leftovers of a killed save go at start."""
    run, algo = tmp_path / "r", _FolderAlgo()
    save: Any = rllib_ppo.save_checkpoint  # takes an Algorithm; the fake does what it uses
    run.mkdir()
    for i in (1, 2, 3):
        algo.state = i
        save(algo, run, rllib_ppo.Progress("id", iteration=i))
    assert rllib_ppo.read_progress(run / "checkpoint").iteration == 3
    assert rllib_ppo.read_progress(run / "checkpoint.prev").iteration == 2
    assert (run / "checkpoint.prev" / "state.txt").read_text() == "2"
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint", "checkpoint.prev"]

    (run / "checkpoint" / "butifarra_progress.json").write_text("{")  # torn
    s = Settings(run_dir=str(tmp_path), run_name="r", resume=True)
    (run / "settings.json").write_text(json.dumps(dataclasses.asdict(s)))
    resumed = rllib_ppo.Run(s)
    assert resumed.resume_from == run / "checkpoint.prev" and resumed.progress.iteration == 2
    assert resumed.newest_unreadable and "is incomplete" in resumed.problems[0]
    algo.state = 30
    save(algo, run, resumed.progress, newest_unreadable=True)
    assert (run / "checkpoint" / "state.txt").read_text() == "30"
    assert (run / "checkpoint.prev" / "state.txt").read_text() == "2"  # the good one stays
    assert (run / "checkpoint.unreadable" / "state.txt").read_text() == "3"  # kept, not lost
    assert "checkpoint.unreadable" in capsys.readouterr().err

    (run / ".checkpoint.new.99999").mkdir()  # a save killed mid-way
    assert rllib_ppo.clean_stale_folders(run / "checkpoint") == [run / ".checkpoint.new.99999"]
    for name in ("checkpoint", "checkpoint.prev"):
        (run / name / "butifarra_progress.json").write_text("not json")
    with pytest.raises(rllib_ppo.RunRefused, match="no readable checkpoint"):
        rllib_ppo.Run(s)


# ----------------------------------------------------------------------------- training
@pytest.fixture(scope="module")
def local_ray() -> Any:
    """One small local Ray for the training tests, the trainer's own (loopback only, token
    auth, stopped with this process); stopped afterwards."""
    with local_cluster(2, 128 * 2**20) as cluster:
        yield cluster


TINY = [
    "--num-env-runners", "1", "--num-hands", "8", "--train-batch", "512", "--minibatch", "256",
    "--update-epochs", "1", "--hidden", "32", "--layers", "1", "--snapshot-pool", "1",
    "--snapshot-every", "2", "--checkpoint-every", "1", "--eval-every", "2", "--eval-deals", "4",
    "--total-minutes", "0", "--opp-self", "0.4", "--opp-snapshot", "0.2", "--opp-rule", "0.2",
    "--opp-random", "0.2",
]  # fmt: skip


def _rows(run: Path) -> list[dict[str, str]]:
    import csv

    with open(run / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_training_exports_an_agent_and_resumes_after_a_crash_and_a_torn_log(
    local_ray: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ["--run-dir", str(tmp_path), "--run-name", "r", *TINY]
    run = tmp_path / "r"
    rllib_ppo.main([*base, "--total-updates", "2"])
    rows = _rows(run)
    assert [r["iteration"] for r in rows] == ["1", "2"]
    assert all(float(r["decisions"]) > 0 and float(r["decisions_per_s"]) > 0 for r in rows)
    assert rows[0]["eval_rule_mean"] == "" and rows[1]["eval_rule_mean"] != ""
    assert all(r["train_vs_rule"] != "" and r["train_vs_random"] != "" for r in rows)
    progress = json.loads((run / "checkpoint" / "butifarra_progress.json").read_text())
    previous = json.loads((run / "checkpoint.prev" / "butifarra_progress.json").read_text())
    assert (progress["iteration"], previous["iteration"]) == (2, 1)
    assert list(run.glob("events.out.tfevents.*"))
    agent = make_agent(f"ppo:{run / 'export.pt'}")  # the arena's own loader
    assert agent.info["update"] == 2 and agent.model.arch["hidden"] == 32
    arch = agent.model.arch  # the recipe's network: every option on but the belief head
    assert all(arch[k] for k in ("central_value", "card_features", "card_head"))
    assert arch["belief"] is False  # off since release 12, as in train/ppo.py
    assert all(np.isfinite(float(r["loss_teacher"])) for r in rows)
    assert all(np.isnan(float(r["loss_belief"])) for r in rows)  # logged as nan: no head
    lrs = [float(r["learning_rate"]) for r in rows]  # annealed over the 2 updates
    assert lrs == pytest.approx([8e-4, 4e-4])
    assert [float(r["teacher_weight"]) for r in rows] == [1.0, 0.0]  # until 0.25 of the budget
    weights_2 = {k: v.clone() for k, v in agent.model.state_dict().items()}
    assert duel(agent, "rule", n_deals=3, seed=0).pair_means.shape == (3,)

    # A crash in iteration 4 (after iteration 3 was checkpointed) ...
    real_train = rllib_ppo.Algorithm.train
    calls = {"n": 0}

    def crash_on_second(self: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("simulated crash")
        return real_train(self)

    monkeypatch.setattr(rllib_ppo.Algorithm, "train", crash_on_second)
    with pytest.raises(RuntimeError, match="simulated crash"):
        rllib_ppo.main([*base, "--total-updates", "5", "--resume"])
    monkeypatch.setattr(rllib_ppo.Algorithm, "train", real_train)
    assert (
        json.loads((run / "checkpoint" / "butifarra_progress.json").read_text())["iteration"] == 3
    )
    # ... the log then torn as a kill mid-append leaves it: a row with missing fields and a
    # last row cut mid-line (no line end) ...
    assert [r["iteration"] for r in _rows(run)] == ["1", "2", "3"]
    with open(run / "metrics.csv", "a", newline="") as f:
        f.write("3,77\n4,999999,12,0.5,10")
    # ... and the resumed run continues from its checkpoint, with its own settings, over a
    # repaired log; Ctrl-C after its first iteration saves that iteration and says how to
    # resume.
    real_iteration = rllib_ppo.Run._one_iteration

    def then_ctrl_c(self: Any, *args: Any) -> Any:
        metrics = real_iteration(self, *args)
        os.kill(os.getpid(), signal.SIGINT)
        return metrics

    monkeypatch.setattr(rllib_ppo.Run, "_one_iteration", then_ctrl_c)
    with pytest.raises(SystemExit) as exc:
        rllib_ppo.main([*base, "--total-updates", "9", "--resume", "--update-epochs", "3"])
    assert exc.value.code == 130
    err = capsys.readouterr().err
    assert "saved iteration 4" in err and "--resume" in err
    rows = _rows(run)
    assert [r["iteration"] for r in rows] == ["1", "2", "3", "4"]
    assert all(None not in r and None not in r.values() for r in rows)  # no torn row left
    assert rows[3]["decisions"] != "999999" and float(rows[3]["decisions_per_s"]) > 0
    assert (run / "metrics.csv").read_text().endswith("\n")
    assert json.loads((run / "settings.json").read_text())["update_epochs"] == 1
    resumed = make_agent(f"ppo:{run / 'export.pt'}")
    assert resumed.info["update"] == 4
    assert any(  # trained further: the export is not the iteration-2 one
        not torch.equal(a, b)
        for a, b in zip(resumed.model.state_dict().values(), weights_2.values(), strict=True)
    )


def test_snapshots_and_export_follow_the_learner(local_ray: Any) -> None:
    """Snapshot modules get the learner's shared weights on the runners too, and the exported
    model is the learner's (not a stale env-runner copy)."""
    s = Settings(
        num_env_runners=1, num_hands=8, train_batch=256, minibatch=128, update_epochs=1,
        hidden=16, layers=1, snapshot_pool=1, eval_every=0,
    )  # fmt: skip
    algo = rllib_ppo.build_config(s).build_algo()
    try:
        algo.train()
        shared = rllib_ppo.learner_weights(algo, SHARED_POLICY)
        before = rllib_ppo.learner_weights(algo, "snapshot_0")
        assert any(not np.array_equal(shared[k], before[k]) for k in shared)
        rllib_ppo.copy_module(algo, SHARED_POLICY, ["snapshot_0"])
        on_runner = algo.env_runner_group.foreach_env_runner(
            lambda r: r.module["snapshot_0"].get_state(), local_env_runner=False
        )[0]
        for k, v in shared.items():
            np.testing.assert_array_equal(rllib_ppo.learner_weights(algo, "snapshot_0")[k], v)
            np.testing.assert_array_equal(on_runner[k], v)
        net = rllib_ppo.shared_model(algo, s)
        for k, v in net.state_dict().items():
            np.testing.assert_array_equal(v.numpy(), shared["net." + k])
    finally:
        algo.stop()


def test_rllib_masking_module_trains_on_the_pettingzoo_adapter(local_ray: Any) -> None:
    """The setup of the issue (PettingZooEnv + RLlib's action-masking module), which failed
    with KeyError 'observations' and then a Byte/Float matmul, trains through the adapter."""
    config = (
        PPOConfig()
        .environment(PettingZooHandEnv, env_config={"reward_scale": 1 / 36, "seed": 0})
        .env_runners(num_env_runners=0)
        .multi_agent(policies={"p"}, policy_mapping_fn=lambda aid, *a, **k: "p")
        .rl_module(
            rl_module_spec=MultiRLModuleSpec(
                rl_module_specs={"p": RLModuleSpec(module_class=ActionMaskingTorchRLModule)}
            )
        )
        .training(train_batch_size_per_learner=256, minibatch_size=128, num_epochs=1)
    )
    algo = config.build_algo()
    try:
        result = algo.train()
    finally:
        algo.stop()
    assert result["env_runners"]["num_env_steps_sampled"] >= 256
    assert np.isfinite(result["learners"]["p"]["policy_loss"])
