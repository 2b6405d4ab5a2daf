"""The PPO network's card features say what the rules say (checked against the rules core
on random positions), move with the cards when suits are relabelled, and a card-head model
trains, resumes, round-trips and plays."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.extras import need

torch = need("torch")

from agents.ppo_net import (  # noqa: E402
    ActorCritic,
    build_model,
    card_inputs,
    card_tables,
    check_weights,
    load_checkpoint,
    state_shapes,
)
from butifarra_env.core import observation, rules  # noqa: E402
from butifarra_env.core.cards import BEATS, N_CARDS  # noqa: E402
from butifarra_env.core.game import Game  # noqa: E402
from butifarra_env.core.options import Options  # noqa: E402
from butifarra_env.core.rules import PHASE_PLAY, random_deal  # noqa: E402


def play_positions(n_games: int, seed: int) -> list[Game]:
    """Copies of random games at every card-play decision."""
    import copy

    rng = np.random.default_rng(seed)
    out: list[Game] = []
    for _ in range(n_games):
        dealer = int(rng.integers(4))
        game = Game(Options(), dealer, random_deal(rng, dealer))
        while not game.is_over:
            if game.phase == PHASE_PLAY:
                out.append(copy.deepcopy(game))
            game.step(int(rng.choice(game.legal_actions())))
    return out


def test_card_features_match_the_rules() -> None:
    games = play_positions(12, seed=7)
    obs = np.stack([observation.encode(g, g.to_move) for g in games])
    legal = np.zeros((len(games), N_CARDS), np.float32)
    for i, g in enumerate(games):
        legal[i, [a for a in g.legal_actions() if a < N_CARDS]] = 1.0
    tables = {k: torch.from_numpy(v) for k, v in card_tables().items()}
    per_card, relational, position = card_inputs(
        torch.from_numpy(obs), torch.from_numpy(legal), tables
    )
    assert per_card.shape[:2] == (len(games), N_CARDS)
    checked_beats = 0
    for i, g in enumerate(games):
        seat = g.to_move
        started = g.cards_in_trick > 0
        assert position[i, 1].item() == float(started)
        partner = started and g.win_seat == rules.partner_of(seat)
        assert position[i, 0].item() == float(partner), i
        assert position[i, 2].item() == pytest.approx(g.trick_points / 20.0)
        seen = g.hands[seat] | g.played[0] | g.played[1] | g.played[2] | g.played[3]
        for c in range(N_CARDS):
            if not (g.hands[seat] >> c) & 1:
                continue
            out = BEATS[c] & ~seen
            assert relational[i, c, 0].item() == pytest.approx(bin(out).count("1") / 11.0)
            assert relational[i, c, 1].item() == float(out == 0)
            expect = started and rules.beats(c, g.win_card, g.trump)
            assert relational[i, c, 2].item() == float(expect), (i, c)
            checked_beats += int(expect)
    assert checked_beats > 50  # the positions cover tricks the mover can take


def test_card_features_move_with_the_cards_and_a_card_head_model_round_trips() -> None:
    torch.manual_seed(0)
    model = ActorCritic(64, 1, central_value=True, belief=True, card_features=True, card_head=True)
    games = play_positions(3, seed=3)[:60]
    obs = torch.from_numpy(np.stack([observation.encode(g, g.to_move) for g in games]))
    mask = torch.zeros(len(games), 56)
    for i, g in enumerate(games):
        mask[i, g.legal_actions()] = 1.0
    # Relabel the suits (oros <-> copas, espadas -> bastos -> espadas): each card's features
    # are the same numbers, found at its new id. Nothing in them names a suit.
    order = [1, 0, 3, 2]
    perm = torch.from_numpy(observation.suit_permutation(order))
    card_perm = torch.tensor([order[c // 12] * 12 + c % 12 for c in range(N_CARDS)])
    tables = model._tables()
    a, ra, pa = card_inputs(obs, mask[:, :N_CARDS], tables)
    b, rb, pb = card_inputs(obs.gather(1, perm.expand(len(games), -1)), mask[:, card_perm], tables)
    assert torch.equal(a[:, card_perm], b) and torch.equal(ra[:, card_perm], rb)
    assert torch.equal(pa, pb)
    assert a.std(0).gt(0).sum() > 20  # the features vary over positions
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert state_shapes(model.arch) == shapes  # what load_checkpoint checks files against
    rebuilt = build_model(model.arch)
    rebuilt.load_state_dict(check_weights(model.state_dict(), model.arch))
    with torch.no_grad():
        assert torch.equal(model.logits(obs, mask), rebuilt.logits(obs, mask))


def test_a_card_head_run_trains_resumes_and_plays(tmp_path: Path) -> None:
    """The two options go through training, the checkpoint's arch, resuming (which checks
    the network against the settings) and the agent that plays the file."""
    from agents.ppo_agent import PPOAgent
    from tests.test_ppo import tiny_config
    from train.ppo import train
    from train.run_folder import RunRefused

    export = tmp_path / "agent.pt"
    cfg = tiny_config(tmp_path, card_features=True, card_head=True, total_updates=2)
    train(replace(cfg, export_path=str(export)))
    path = tmp_path / "t" / "checkpoint.pt"
    arch = load_checkpoint(path)["arch"]
    assert arch["card_features"] is True and arch["card_head"] is True
    seen: list[dict[str, float]] = []
    train(replace(cfg, resume=True, total_updates=3, export_path=str(export)), seen.append)
    assert [m["update"] for m in seen] == [3] and load_checkpoint(path)["update"] == 3
    agent = PPOAgent(export)  # the export is the model of the newest checkpoint
    games = play_positions(2, seed=11)
    obs = np.stack([observation.encode(g, g.to_move) for g in games])
    mask = np.zeros((len(games), 56), np.int8)
    for i, g in enumerate(games):
        mask[i, g.legal_actions()] = 1
    actions = agent.act_batch(obs, mask)
    assert all(mask[i, a] for i, a in enumerate(actions))
    with torch.no_grad():
        model = build_model(arch)
        model.load_state_dict(load_checkpoint(path)["model"])
        ours = model.logits(torch.from_numpy(obs), torch.from_numpy(mask))
        theirs = agent.model.logits(torch.from_numpy(obs), torch.from_numpy(mask))
    assert torch.equal(ours, theirs)
    plain = replace(cfg, run_name="p", card_head=False, resume=False, init_from=str(path))
    with pytest.raises(RunRefused, match="card_head"):
        train(plain)
