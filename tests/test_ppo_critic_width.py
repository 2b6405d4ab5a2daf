"""``critic_hidden``: a centralised critic narrower (or wider) than the policy trunk goes
through the architecture dict, the checkpoint checks, training, resuming and playing, and a
checkpoint written before the option (no ``critic_hidden`` key) still means "the trunk's
width"."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.extras import need

torch = need("torch")

from agents.ppo_net import (  # noqa: E402
    MAX_HIDDEN,
    ActorCritic,
    build_model,
    check_arch,
    check_weights,
    load_checkpoint,
    state_shapes,
)
from train.ppo import Config  # noqa: E402


def test_the_critic_takes_its_own_width_and_the_policy_keeps_the_trunks() -> None:
    model = ActorCritic(32, 2, central_value=True, belief=True, critic_hidden=8)
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert shapes["critic.0.weight"][0] == 8 and shapes["critic.2.weight"] == (8, 8)
    assert shapes["value.weight"] == (1, 8)
    assert shapes["trunk.2.weight"] == (32, 32) and shapes["policy.weight"] == (56, 32)
    assert model.arch["critic_hidden"] == 8
    assert state_shapes(model.arch) == shapes  # what load_checkpoint checks files against
    rebuilt = build_model(model.arch)
    rebuilt.load_state_dict(check_weights(model.state_dict(), model.arch))
    obs = torch.randint(0, 2, (5, 491), dtype=torch.uint8)
    mask = torch.ones(5, 56)
    hidden = torch.randint(0, 2, (5, 144)).float()
    with torch.no_grad():
        assert torch.equal(model(obs, mask, hidden)[1], rebuilt(obs, mask, hidden)[1])


def test_an_arch_without_the_key_means_the_trunks_width() -> None:
    plain = ActorCritic(32, 1, central_value=True)
    assert "critic_hidden" not in plain.arch  # checkpoints of such models are unchanged
    assert state_shapes(plain.arch)["critic.0.weight"][0] == 32
    assert tuple(plain.value.weight.shape) == (1, 32)
    wide = ActorCritic(32, 1, central_value=True, critic_hidden=48)
    with pytest.raises(
        ValueError, match=r"'critic.0.weight' .* critic width 32\) needs \(32,"
    ):  # another width is another file
        check_weights(wide.state_dict(), plain.arch)


@pytest.mark.parametrize("bad", [-1, MAX_HIDDEN + 1, 8.0, "64", True])
def test_a_bad_critic_width_in_an_arch_is_refused(bad: object) -> None:
    arch = dict(ActorCritic(16, 1, central_value=True).arch)
    with pytest.raises(ValueError, match="critic_hidden"):
        check_arch({**arch, "critic_hidden": bad})


def test_a_critic_width_without_a_centralised_critic_is_refused_everywhere() -> None:
    message = r"critic_hidden=8 needs central_value"
    with pytest.raises(ValueError, match=message):
        ActorCritic(16, 1, central_value=False, critic_hidden=8)
    arch = dict(ActorCritic(16, 1, central_value=False).arch)
    with pytest.raises(ValueError, match=message):  # a crafted file: no mismatched value head
        check_arch({**arch, "critic_hidden": 8})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"critic_hidden": -4}, r"critic_hidden must be an int 0-"),
        ({"critic_hidden": MAX_HIDDEN + 1}, r"critic_hidden must be an int 0-"),
        ({"critic_hidden": 16, "central_value": False}, r"critic_hidden=16 needs central_value"),
    ],
)
def test_a_bad_critic_width_in_a_config_is_refused(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        replace(Config(), **fields).validate()


def test_a_narrow_critic_run_trains_resumes_and_plays(tmp_path: Path) -> None:
    from agents.ppo_agent import PPOAgent
    from tests.test_ppo import tiny_config
    from train.ppo import train
    from train.run_folder import RunRefused

    export = tmp_path / "agent.pt"
    cfg = tiny_config(tmp_path, critic_hidden=8, total_updates=2, export_path=str(export))
    train(cfg)
    path = tmp_path / "t" / "checkpoint.pt"
    data = load_checkpoint(path)
    assert data["arch"]["critic_hidden"] == 8
    assert tuple(data["model"]["value.weight"].shape) == (1, 8)
    seen: list[dict[str, float]] = []
    train(replace(cfg, resume=True, total_updates=3), seen.append)
    assert [m["update"] for m in seen] == [3] and load_checkpoint(path)["update"] == 3
    agent = PPOAgent(export)
    obs = np.zeros((1, 491), np.uint8)
    obs[0, :12] = 1  # some cards in hand; the agent only has to pick a legal action
    mask = np.zeros((1, 56), np.int8)
    mask[0, [0, 3]] = 1
    assert int(agent.act_batch(obs, mask)[0]) in (0, 3)
    other = replace(
        cfg, run_name="w", critic_hidden=0, resume=False, init_from=str(path), export_path=None
    )
    with pytest.raises(RunRefused, match=r"critic_hidden=8 \(asked: 0\)"):
        train(other)
