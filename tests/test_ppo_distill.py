"""Search distillation in PPO (issue 26): the labels are the search's best cards on the real
deal (exact in the endgame, the search's own choice before it) or, with ``distill_search``,
the card the search agent plays with the learner as its prior (expert iteration); the loss
teaches the policy to play them, the labels survive a resume, and the settings are checked."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.extras import need

torch = need("torch")

from agents import make_agent  # noqa: E402
from agents.ppo_agent import PPOAgent  # noqa: E402
from agents.ppo_net import (  # noqa: E402
    hidden_hands,
    load_checkpoint,
    masked_logits,
    model_from_checkpoint,
)
from agents.search_agent import (  # noqa: E402
    SearchAgent,
    SearchConfig,
    best_cards_on_deal,
    card_groups,
    choose_card,
)
from butifarra_env.core.actions import bits_from_mask  # noqa: E402
from butifarra_env.core.cards import N_CARDS, cards_of  # noqa: E402
from butifarra_env.core.game import Game  # noqa: E402
from butifarra_env.core.observation import View, encode, pack_bits  # noqa: E402
from butifarra_env.core.rules import PHASE_PLAY  # noqa: E402
from butifarra_env.envs.batched import BatchedEnv  # noqa: E402
from tests.helpers import endgame  # noqa: E402
from tests.test_ppo import assert_same_weights, tiny_config, train_crashing_at  # noqa: E402
from tests.test_search import minimax  # noqa: E402
from train.ppo import SearchLabeller, SearchLabels, label_positions, model_for, train  # noqa: E402
from train.ppo_config import Config  # noqa: E402


def mover_view(game: Game) -> tuple[View, list[int], int]:
    """The mover's view, the hidden hands (next, partner, previous) and the legal cards."""
    seat = game.to_move
    view = View(pack_bits(encode(game, seat)))
    hidden = [game.hands[(seat + k) % 4] for k in (1, 2, 3)]
    return view, hidden, sum(1 << c for c in game.legal_actions())


# ----------------------------------------------------------------------------- the labels
@pytest.mark.parametrize("seed", range(40))
def test_endgame_labels_are_the_minimax_best_cards(seed: int) -> None:
    """From ``distill_endgame`` tricks left the label is exact: the cards after which plain
    minimax (no pruning, no merging) gives the mover's team the most points."""
    game, trick = endgame(seed, 2 + seed % 2)
    view, hidden, legal = mover_view(game)
    seat = game.to_move
    values = {}
    for card in cards_of(legal):
        hands = list(game.hands)
        hands[seat] ^= 1 << card
        team_a = minimax(hands, (seat + 1) % 4, [*trick, (seat, card)], game.trump)
        values[card] = team_a if seat % 2 == 0 else -team_a
    top = max(values.values())
    expected = sum(1 << c for c, v in values.items() if v == top)
    assert best_cards_on_deal(view, legal, hidden, endgame=3) == expected


def play_positions(n_envs: int, steps: int, seed: int) -> tuple[np.ndarray, ...]:
    """Observations, masks and hidden hands of card decisions with a choice, from hands of
    the rule-based player."""
    env, rule = BatchedEnv(n_envs, seed=seed), make_agent("rule")
    obs, mask, seat = env.reset(seed=seed)
    rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for _ in range(steps):
        hid = hidden_hands(env.state(), seat)
        choice = (mask[:, :N_CARDS] != 0).sum(1) >= 2
        rows += [(obs[i].copy(), mask[i].copy(), hid[i].copy()) for i in np.flatnonzero(choice)]
        obs, mask, seat, _, _ = env.step(rule.act_batch(obs, mask))
    o, m, h = (np.stack(x) for x in zip(*rows, strict=True))
    return o, m, h


def hidden_bits(hid: np.ndarray) -> list[int]:
    return [bits_from_mask(hid[N_CARDS * s : N_CARDS * (s + 1)]) for s in range(3)]


def test_labels_are_what_the_search_plays_when_it_samples_the_real_deal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before the endgame the label is the search agent's own choice on one sampled deal,
    with that deal the real one: the card it plays is among the labelled ones, the labelled
    cards are legal and whole groups of interchangeable cards."""
    import agents.search_agent as search

    obs, mask, hid = play_positions(16, 40, seed=5)
    checked = 0
    for o, m, h in zip(obs[::7], mask[::7], hid[::7], strict=True):
        view, legal, hidden = View(pack_bits(o)), bits_from_mask(m), hidden_bits(h)
        assert view.phase == PHASE_PLAY
        best = best_cards_on_deal(view, legal, hidden, endgame=2)
        assert best and best & ~legal == 0
        in_play = view.unseen | view.hand | sum(1 << c for c in view.trick if c >= 0)
        for group in card_groups(legal, in_play):
            inside = [(best >> c) & 1 for c in group]
            assert min(inside) == max(inside), (group, best)
        real = {1: hidden[0], 2: hidden[1], 3: hidden[2]}
        monkeypatch.setattr(search, "_draw_deals", lambda *a, real=real, **k: [real])
        config = SearchConfig(samples=1, endgame=2, infer=1)
        played = choose_card(view, legal, config, np.random.default_rng(0))
        assert (best >> played) & 1, (played, best)
        checked += view.sizes[0] > 2  # a rollout, not the exact endgame
    assert checked >= 20


def test_label_positions_draws_card_choices_of_finished_hands() -> None:
    """At most ``distill_labels`` rows, each a decision of the batch with a choice of cards,
    labelled with its own hidden hands."""
    obs, mask, hid = play_positions(8, 30, seed=2)
    n = len(obs)
    bids = np.zeros((3, mask.shape[1]), np.int8)
    bids[:, 48:52] = 1  # trump choices: never labelled
    batch = {
        "obs": np.concatenate([obs, obs[:3]])[None],
        "mask": np.concatenate([mask, bids])[None],
        "hid": np.concatenate([hid, hid[:3]])[None],
        "len": np.array([n + 1]),  # the last two rows are padding
    }
    cfg = Config(distill_labels=16)
    o, m, best = label_positions(batch, cfg, np.random.default_rng(0))
    assert len(o) == 16 and best.shape == (16, 56) and best.dtype == bool
    index = {row.tobytes(): i for i, row in enumerate(np.concatenate([obs, mask], 1))}
    for row in range(16):
        i = index[np.concatenate([o[row], m[row]]).tobytes()]  # a real decision of the batch
        expected = best_cards_on_deal(
            View(pack_bits(obs[i])), bits_from_mask(mask[i]), hidden_bits(hid[i]), 3
        )
        assert bits_from_mask(best[row]) == expected
    every = label_positions(batch, replace(cfg, distill_labels=4096), np.random.default_rng(0))
    assert len(every[0]) == n  # the bids and the padding are not labelled


def test_search_labels_are_the_cards_the_search_plays_with_the_learner_inside() -> None:
    """With ``distill_search`` the label is the one card the search agent plays, its prior
    and bidder the learner's weights at the time of the call (a change of the weights shows
    in the next labels), its deals drawn from a seed of the run's generator."""
    obs, mask, _ = play_positions(8, 40, seed=4)
    obs, mask = obs[:48], mask[:48]
    cfg = replace(Config(), distill_search="samples=3,endgame=2,infer=0,policy=3")
    search = SearchConfig.parse(cfg.distill_search)
    model = model_for(cfg)
    labeller = SearchLabeller(search, model)

    def expected(seed_rng: np.random.Generator) -> np.ndarray:
        twin = model_for(cfg)
        twin.load_state_dict(model.state_dict())
        agent = SearchAgent(search, bidding=PPOAgent.from_model(twin))
        agent.reset(int(seed_rng.integers(2**63)))
        return agent.act_batch(obs, mask)

    best = labeller(obs, mask, np.random.default_rng(7))
    assert best.shape == (48, 56) and (best.sum(1) == 1).all()
    assert (mask[best] != 0).all()  # legal cards
    np.testing.assert_array_equal(best.argmax(1), expected(np.random.default_rng(7)))
    with torch.no_grad():  # another policy: another prior, other labels
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    again = labeller(obs, mask, np.random.default_rng(7))
    np.testing.assert_array_equal(again.argmax(1), expected(np.random.default_rng(7)))
    assert (again != best).any()


def test_label_positions_asks_the_labeller_for_the_drawn_rows() -> None:
    obs, mask, hid = play_positions(8, 30, seed=2)
    batch = {"obs": obs[None], "mask": mask[None], "hid": hid[None], "len": np.array([len(obs)])}
    cfg = replace(Config(), distill_labels=16)
    seen: list[np.ndarray] = []

    def labeller(o: np.ndarray, m: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        seen.append(o)
        first = np.zeros(m.shape, bool)
        first[np.arange(len(m)), (m != 0).argmax(1)] = True
        return first

    o, m, best = label_positions(batch, cfg, np.random.default_rng(0), labeller)
    assert len(o) == 16 and len(seen) == 1 and np.array_equal(seen[0], o)
    assert (best.argmax(1) == (m != 0).argmax(1)).all()


def test_label_ring_keeps_the_newest_and_round_trips() -> None:
    labels = SearchLabels.empty(4, 3)
    rows = np.arange(6 * 3, dtype=np.uint8).reshape(6, 3)
    masks = np.ones((6, 56), np.int8)
    best = np.zeros((6, 56), bool)
    best[np.arange(6), np.arange(6)] = True
    labels.add(rows[:3], masks[:3], best[:3])
    labels.add(rows[3:], masks[3:], best[3:])
    assert labels.size == 4 and labels.next == 2
    kept = sorted(int(k) for k in labels.best.nonzero()[:, 1])
    assert kept == [2, 3, 4, 5]  # the two oldest were overwritten
    again = SearchLabels.restored(labels.state(), 4, 3)
    assert torch.equal(again.obs, labels.obs) and torch.equal(again.best, labels.best)
    assert (again.size, again.next) == (4, 2)
    with pytest.raises(ValueError, match="distill_buffer"):
        SearchLabels.restored(labels.state(), 3, 3)
    assert SearchLabels.empty(4, 3).draw(5, torch.device("cpu")) is None


# ----------------------------------------------------------------------------- training
def agreement_with_labels(path: Path, obs: np.ndarray, mask: np.ndarray, best: list[int]) -> float:
    """How often the greedy policy of a checkpoint plays one of the labelled cards, over the
    positions where the labels rule some legal card out (elsewhere every policy agrees)."""
    model = model_from_checkpoint(load_checkpoint(path), path)
    tm = torch.from_numpy(mask)
    with torch.no_grad():
        greedy = masked_logits(model.logits(torch.from_numpy(obs), tm), tm).argmax(-1).numpy()
    hits = [
        (b >> int(a)) & 1
        for a, b, m in zip(greedy, best, mask, strict=True)
        if b != bits_from_mask(m)
    ]
    return float(np.mean(hits))


def test_distillation_makes_the_learner_play_the_search_best_cards(tmp_path: Path) -> None:
    """Trained with the distillation loss, the policy picks the labelled cards on new
    positions far more often than the same run without it; the loss is logged and falls."""
    base = tiny_config(  # the recipe this was measured with (forced moves stored, 5% random)
        tmp_path, total_updates=12, hidden=64, num_steps=120, learning_rate=3e-3, teacher=None,
        skip_forced=False, opp_rule=0.9, opp_random=0.05,
    )  # fmt: skip
    losses: list[float] = []
    distilled = replace(base, distill_coef=20.0, distill_labels=512, distill_batch=512)
    train(distilled, on_update=lambda m: losses.append(m["loss_distill"]))
    alone: list[float] = []
    train(replace(base, run_name="alone"), on_update=lambda m: alone.append(m["loss_distill"]))
    obs, mask, hid = play_positions(16, 60, seed=99)
    best = [
        best_cards_on_deal(View(pack_bits(o)), bits_from_mask(m), hidden_bits(h), 3)
        for o, m, h in zip(obs, mask, hid, strict=True)
    ]
    with_labels, without = (
        agreement_with_labels(tmp_path / name / "checkpoint.pt", obs, mask, best)
        for name in ("t", "alone")
    )
    # measured 0.485 vs 0.427 over the positions where the labels rule a card out
    assert with_labels > without + 0.03, (with_labels, without)
    assert losses[-1] < losses[0], losses
    assert all(math.isnan(v) for v in alone)  # off: no labels, no loss


@pytest.mark.parametrize("search", ["", "samples=2,endgame=2,infer=0,policy=3"])
def test_resume_with_distillation_is_bit_exact(tmp_path: Path, search: str) -> None:
    """The labels are part of the training state: a run killed mid-way and resumed ends
    exactly where an uninterrupted one does (with the search's labels too: its deals come
    from the run's generator)."""
    kw = {
        "distill_coef": 1.0, "distill_labels": 8, "distill_buffer": 64, "distill_batch": 16,
        "distill_search": search,
    }  # fmt: skip
    train(tiny_config(tmp_path / "a", **kw))
    cfg = tiny_config(tmp_path / "b", **kw)
    train_crashing_at(cfg, 3)
    newest = tmp_path / "b" / "t" / "checkpoint.pt"
    saved = load_checkpoint(newest)
    assert saved["update"] == 2 and len(saved["labels"]["best"]) > 0
    train(replace(cfg, resume=True))
    full = load_checkpoint(tmp_path / "a" / "t" / "checkpoint.pt")
    assert_same_weights(full, load_checkpoint(newest))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("distill_coef", -0.5),
        ("distill_coef", math.nan),
        ("distill_labels", 0),
        ("distill_labels", 5000),
        ("distill_endgame", 6),
        ("distill_buffer", 0),
        ("distill_batch", 2.5),
    ],
)
def test_distillation_settings_are_checked(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        replace(Config(), **{field: value}).validate()


@pytest.mark.parametrize(
    ("value", "obs_version", "message"),
    [
        ("samples=0", 0, "samples"),
        ("sample=3", 0, "use key=value with keys"),
        ("samples=3,bidding=rule", 0, "leave out bidding"),
        ("samples=3,budget=0.1", 0, "leave out budget"),
        ("samples=3", 1, "needs obs_version 0"),
        (3, 0, "search options as text"),
        ("samples=3", 0, "set distill_coef > 0"),
    ],
)
def test_distill_search_is_checked(value: object, obs_version: int, message: str) -> None:
    coef = 0.0 if message.startswith("set distill_coef") else 0.2
    cfg = replace(Config(), distill_search=value, obs_version=obs_version, distill_coef=coef)
    with pytest.raises(ValueError, match=message) as refused:
        cfg.validate()
    assert "distill_search" in str(refused.value)
