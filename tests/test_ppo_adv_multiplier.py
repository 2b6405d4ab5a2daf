"""``--adv-per-multiplier``: card decisions' advantages divided by their hand's multiplier,
read from the observation; bids and doubles untouched."""

from __future__ import annotations

import numpy as np
import pytest

from tests.extras import need

torch = need("torch")

from butifarra_env.core.actions import mask_from_bits  # noqa: E402
from butifarra_env.core.game import Game  # noqa: E402
from butifarra_env.core.observation import encode  # noqa: E402
from butifarra_env.core.options import Options  # noqa: E402
from butifarra_env.core.rules import PHASE_PLAY, random_deal  # noqa: E402
from tests.helpers import choose_batch_actions  # noqa: E402
from train.ppo import Config, card_multipliers, flat_batch  # noqa: E402


def _decisions(options: Options, games: int, seed: int) -> tuple[np.ndarray, ...]:
    """Every decision of ``games`` random hands (doubling half the time it is offered, so that
    high multipliers come up): observations, masks, and the multiplier each should give."""
    rng = np.random.default_rng(seed)
    obs, masks, want = [], [], []
    for g in range(games):
        game = Game(options, g % 4, random_deal(rng, g % 4))
        while not game.is_over:
            mask = mask_from_bits(game.legal)
            obs.append(encode(game, game.to_move))
            masks.append(mask)
            want.append(game.multiplier if game.phase == PHASE_PLAY else 1)
            game.step(int(choose_batch_actions(rng, mask[None], 0.5)[0]))
    return np.stack(obs), np.stack(masks), np.array(want)


@pytest.mark.parametrize("base", [2, 1])
def test_card_multipliers_are_the_games_multiplier_at_card_decisions(base: int) -> None:
    obs, mask, want = _decisions(Options(butifarra_base=base), 60, seed=base)
    got = card_multipliers(obs, mask)
    assert got.tolist() == want.tolist()
    assert {1, 2, 4}.issubset(set(got.tolist())) and got.max() >= 8  # the doubling chain came up


def test_flat_batch_divides_card_advantages_only() -> None:
    """Two hands: the advantages with the option on are those without it, divided by the
    multiplier at card decisions and unchanged at bids and doubles."""
    obs, mask, want = _decisions(Options(), 8, seed=5)
    n = len(obs) // 2
    rng = np.random.default_rng(0)
    batch = {
        "obs": np.stack([obs[:n], obs[n : 2 * n]]),
        "mask": np.stack([mask[:n], mask[n : 2 * n]]).astype(bool),
        "act": np.zeros((2, n), np.int64),
        "logp": np.zeros((2, n), np.float32),
        "val": rng.normal(size=(2, n)).astype(np.float32),
        "teach": np.full((2, n), -1, np.int64),
        "seat": np.tile(np.arange(n) % 4, (2, 1)),
        "len": np.array([n, n]),
        "rew": rng.normal(size=(2, 4)).astype(np.float32),
    }
    cpu = torch.device("cpu")
    plain = Config(central_value=False, belief=False, adv_per_multiplier=False)
    off = flat_batch(batch, plain, cpu)
    on = flat_batch(batch, Config(central_value=False, belief=False, adv_per_multiplier=True), cpu)
    divisor = torch.as_tensor(want[: 2 * n], dtype=torch.float32)
    assert (divisor > 1).any()
    torch.testing.assert_close(on["adv"], off["adv"] / divisor)
    torch.testing.assert_close(on["ret"], off["ret"])  # the critic's targets are unchanged
