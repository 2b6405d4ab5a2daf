"""Regenerate tests/goldens/ppo_logits.npz: the shipped checkpoint's logits and values on a
fixed set of observations (random play on the batched engine, seed 2024, 12 steps x 64).

Made from the code at the commit named in the file (``git show HEAD:agents/ppo_net.py``);
``python tests/goldens/make_ppo_logits.py`` rewrites it (only when the network or the
shipped weights change on purpose).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from agents.ppo_net import load_checkpoint, model_from_checkpoint
from agents.registry import DEFAULT_PPO_CHECKPOINT
from butifarra_env.envs.batched import BatchedEnv

GOLDEN = Path(__file__).with_name("ppo_logits.npz")


def observations() -> tuple[np.ndarray, np.ndarray]:
    """(obs, mask) of every slot at each of 12 steps of uniformly random play."""
    env, rng = BatchedEnv(64, seed=2024), np.random.default_rng(2024)
    obs, mask, _ = (np.asarray(x) for x in env.reset(seed=2024))
    all_obs, all_mask = [], []
    for _ in range(12):
        all_obs.append(obs)
        all_mask.append(mask)
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in mask])
        obs, mask, _, _, _ = (np.asarray(x) for x in env.step(actions))
    return np.concatenate(all_obs), np.concatenate(all_mask)


def shipped_outputs(obs: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The shipped policy's raw logits (one thread, so the sums run in one order)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = model_from_checkpoint(load_checkpoint(DEFAULT_PPO_CHECKPOINT), "shipped")
        model.eval()
        with torch.no_grad():
            logits = model.logits(torch.from_numpy(obs), torch.from_numpy(mask))
    finally:
        torch.set_num_threads(threads)
    return logits.numpy(), mask


if __name__ == "__main__":
    obs, mask = observations()
    logits, _ = shipped_outputs(obs, mask)
    np.savez_compressed(GOLDEN, obs=obs, mask=mask, logits=logits)
    print(f"wrote {GOLDEN}: {len(obs)} observations")
