"""The torch rule-based player (agents.rule_torch) decides exactly as the numpy batch one.

``agents.rule_batch.decide_batch`` is held to the scalar ``agents.rule_based.decide`` by
tests/test_rule_batch.py; here ``decide_batch_torch`` is held to ``decide_batch`` on the same
kind of sample (the batched engine under several option sets, played by the rule agent, the
random agent or a mix; :func:`tests.test_rule_batch.positions`), with the same coverage
counts asserted so the comparison is not vacuous: every phase, leads and the three following
positions, every bid and doubling level. On CPU always, on CUDA when there is one.

That it never waits for the device is checked three ways: it runs end to end on the ``meta``
device (tensors without data, where any read of a value on the host raises), under
``torch.cuda.set_sync_debug_mode("error")`` on CUDA, and by a scan of its source for the
calls that read values on the host.
"""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys

import numpy as np
import pytest

from agents import RuleBasedAgent
from agents.rule_batch import decide_batch
from butifarra_env.core.actions import DELEGATE, N_ACTIONS
from butifarra_env.core.cards import N_CARDS
from butifarra_env.core.observation import OBS_SIZE, field, scale_vector
from butifarra_env.core.rules import (
    PHASE_CHOOSE_TRUMP,
    PHASE_CHOOSE_TRUMP_DELEGATED,
    PHASE_DOUBLING,
    PHASE_HAND_OVER,
    PHASE_PLAY,
)
from tests.extras import need
from tests.test_rule_batch import check_coverage, phases, positions

torch = need("torch")

from agents import rule_torch  # noqa: E402
from agents.rule_torch import TorchRuleAgent, decide_batch_torch  # noqa: E402

CUDA = torch.cuda.is_available()
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not CUDA, reason="needs a CUDA device")),
]
CHUNK = 65_536
"""Rows per call in the comparisons: bounded memory on the slow tier's half million rows."""


@pytest.fixture(scope="module")
def few() -> tuple[np.ndarray, np.ndarray]:
    """About 10,000 positions of every phase, for the edge-case tests."""
    return positions(num_envs=24, steps=64, seed=5)


def on_device(obs: np.ndarray, masks: np.ndarray, device: str) -> np.ndarray:
    """``decide_batch_torch`` on ``device``, in chunks; checks the output's kind on the way."""
    out = []
    for lo in range(0, len(obs), CHUNK):
        o = torch.from_numpy(obs[lo : lo + CHUNK]).to(device)
        m = torch.from_numpy(masks[lo : lo + CHUNK]).to(device)
        got = decide_batch_torch(o, m)
        assert got.dtype == torch.int64 and got.shape == (len(o),)
        assert got.device == o.device
        out.append(got.cpu().numpy())
    return np.concatenate(out)


def assert_same(obs: np.ndarray, masks: np.ndarray, device: str) -> np.ndarray:
    """decide_batch_torch equals decide_batch on every row (the first differing rows shown);
    returns the decisions."""
    expected = decide_batch(obs, masks)
    got = on_device(obs, masks, device)
    bad = np.flatnonzero(got != expected)
    assert not len(bad), (
        f"{len(bad)} of {len(obs)} rows differ on {device}, e.g. rows {bad[:5].tolist()}: "
        f"torch {got[bad[:5]].tolist()} vs numpy {expected[bad[:5]].tolist()} (phases "
        f"{phases(obs[bad[:5]]).tolist()})"
    )
    return expected


@pytest.mark.parametrize("device", DEVICES)
def test_torch_decides_like_decide_batch_in_every_phase(device: str) -> None:
    obs, masks = positions(num_envs=160, steps=64, seed=11)
    assert len(obs) >= 50_000
    check_coverage(obs, assert_same(obs, masks, device), scale=1000)


@pytest.mark.parametrize("device", DEVICES)
def test_torch_decides_like_decide_batch_on_many_hands(device: str) -> None:
    """The same comparison on ten times the positions (slow tier)."""
    obs, masks = positions(num_envs=800, steps=128, seed=2026)
    assert len(obs) >= 500_000
    check_coverage(obs, assert_same(obs, masks, device), scale=10_000)


@pytest.mark.parametrize("device", DEVICES)
def test_float_observations_bool_masks_and_restricted_masks(
    few: tuple[np.ndarray, np.ndarray], device: str
) -> None:
    """The float32 observation format and bool masks decide alike; any non-empty subset of
    the legal actions (a quarter of the rows down to one) agrees with numpy, including the
    first-legal fallback of a heuristic choice outside the mask."""
    obs, masks = few
    expected = assert_same(obs, masks, device)
    as_float = obs.astype(np.float32) * scale_vector()
    assert np.array_equal(on_device(as_float, masks.astype(bool), device), expected)

    rng = np.random.default_rng(7)
    keep = (rng.random(masks.shape) < 0.5) & (masks != 0)
    single = rng.random(len(masks)) < 0.25
    for i in np.flatnonzero(single):
        keep[i] = False
        keep[i, rng.choice(np.flatnonzero(masks[i]))] = True
    empty = ~keep.any(axis=1)
    keep[empty] = masks[empty] != 0
    sub = keep.astype(np.int8)
    got = assert_same(obs, sub, device)
    assert sub[np.arange(len(sub)), got].all()
    ph = phases(obs)
    bidding = (ph == PHASE_DOUBLING) | (ph == PHASE_CHOOSE_TRUMP_DELEGATED)
    bidding |= (ph == PHASE_CHOOSE_TRUMP) & (sub[:, DELEGATE] == 1)
    fallback = bidding & (sub[np.arange(len(sub)), expected] == 0)
    assert fallback.sum() >= 200  # the fallback branch was met
    assert (got[fallback] == sub[fallback].argmax(axis=1)).all()


def test_rows_outside_the_deciding_phases_and_unreachable_vectors(
    few: tuple[np.ndarray, np.ndarray],
) -> None:
    """Rows in no deciding phase take the first legal id; vectors no game reaches (every
    card in hand, cards on the table by every seat in the bidding...) still match numpy, so
    the 48-column card choice is not tied to 12 cards a hand."""
    obs, masks = few
    weird = obs[:40].copy()
    phase = field(weird, "phase")
    phase[:] = 0
    phase[:20, PHASE_HAND_OVER] = 1  # and rows 20-39 have no phase at all
    mask = np.zeros((40, N_ACTIONS), dtype=np.int8)
    mask[np.arange(40), np.arange(40) % N_ACTIONS] = 1
    got = assert_same(weird, mask, "cpu")
    assert (got == mask.argmax(axis=1)).all()

    rng = np.random.default_rng(3)
    noisy = obs[:3000].copy()
    hand = field(noisy, "hand")  # a view: writes go to noisy
    hand[:1000] = 1  # the whole deck in hand
    hand[1000:2000] |= rng.random((1000, N_CARDS)) < 0.5
    all_cards = masks[:3000].copy()
    all_cards[field(noisy, "phase")[:, PHASE_PLAY] == 1, :N_CARDS] = 1
    assert (field(noisy, "hand").sum(axis=1) > 12).sum() >= 1500
    assert_same(noisy, all_cards, "cpu")


def test_check_refuses_a_row_without_legal_action_and_the_hot_path_does_not_wait(
    few: tuple[np.ndarray, np.ndarray],
) -> None:
    obs = torch.from_numpy(few[0][:5])
    masks = torch.from_numpy(few[1][:5].copy())
    masks[3] = 0
    with pytest.raises(ValueError, match="row 3 of the action mask has no legal action"):
        decide_batch_torch(obs, masks, check=True)
    out = decide_batch_torch(obs, masks)  # no check: no error, action 0 for the empty row
    assert out[3] == 0
    masks[3, 0] = 2
    with pytest.raises(ValueError, match="0 and 1 only"):
        decide_batch_torch(obs, masks, check=True)
    with pytest.raises(ValueError, match="row 3 of the action mask has no legal action"):
        TorchRuleAgent().act_batch(few[0][:5], np.where(np.arange(5)[:, None] == 3, 0, few[1][:5]))


def test_bad_arguments_are_refused_naming_what_was_wrong() -> None:
    obs = torch.zeros((4, OBS_SIZE), dtype=torch.uint8)
    masks = torch.ones((4, N_ACTIONS), dtype=torch.int8)
    with pytest.raises(ValueError, match=f"expected observations \\(N, {OBS_SIZE}\\)"):
        decide_batch_torch(obs[:, :N_CARDS], masks)
    with pytest.raises(ValueError, match="masks \\(N, 56\\)"):
        decide_batch_torch(obs, masks[:3])
    with pytest.raises(ValueError, match="uint8 or float32"):
        decide_batch_torch(obs.to(torch.int16), masks)
    with pytest.raises(ValueError, match="one device"):
        decide_batch_torch(obs, masks.to("meta"))
    with pytest.raises(TypeError, match="torch tensors"):
        decide_batch_torch(obs.numpy(), masks)
    assert decide_batch_torch(obs[:0], masks[:0]).shape == (0,)


def test_runs_on_the_meta_device_so_it_reads_no_value_on_the_host() -> None:
    """Meta tensors have shapes and dtypes but no data: ``.item()``, ``bool(t)``,
    ``nonzero``, boolean indexing or a copy to the host raise there, so a full run proves
    the hot path has no host sync and no shape that depends on the data."""
    obs = torch.zeros((64, OBS_SIZE), dtype=torch.uint8, device="meta")
    masks = torch.zeros((64, N_ACTIONS), dtype=torch.int8, device="meta")
    out = decide_batch_torch(obs, masks)
    assert out.device.type == "meta" and out.shape == (64,) and out.dtype == torch.int64
    assert decide_batch_torch(obs.float(), masks.bool()).shape == (64,)
    with pytest.raises((RuntimeError, NotImplementedError)):  # the probe itself works
        decide_batch_torch(obs, masks, check=True)


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_no_host_sync_on_cuda(few: tuple[np.ndarray, np.ndarray]) -> None:
    """With CUDA's sync debug mode at "error", any call that waits for the device raises."""
    obs = torch.from_numpy(few[0]).cuda()
    masks = torch.from_numpy(few[1]).cuda()
    as_float = torch.from_numpy(few[0].astype(np.float32) * scale_vector()).cuda()
    decide_batch_torch(obs, masks)  # the first call on a device copies the tables there
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out = decide_batch_torch(obs, masks)
        out_float = decide_batch_torch(as_float, masks.bool())
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(out, out_float)
    assert np.array_equal(out.cpu().numpy(), decide_batch(*few))


FORBIDDEN_METHODS = {
    "item",
    "cpu",
    "tolist",
    "numpy",
    "nonzero",
    "argwhere",
    "unique",
    "unique_consecutive",
    "masked_select",
    "repeat_interleave",
    "synchronize",
    "tensor",
    "as_tensor",
    "from_numpy",
}
"""Calls that read device values on the host (or copy host data in, a sync in CUDA's debug
mode)."""
FORBIDDEN_BUILTINS = {"bool", "int", "float"}
HOST_SIDE = {"_validate", "_Tables", "TorchRuleAgent"}
"""The parts allowed to touch the host: the opt-in check, the per-device table copy (once),
the numpy-facing agent."""


def test_the_hot_path_source_has_no_host_reads() -> None:
    """A static guard beside the meta run: no function on the decision path calls anything
    that waits for the device."""
    tree = ast.parse(inspect.getsource(rule_torch))
    found = []
    for top in tree.body:
        if getattr(top, "name", None) in HOST_SIDE:
            continue
        for node in ast.walk(top):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in FORBIDDEN_METHODS:
                found.append(f"line {node.lineno}: .{f.attr}()")
            if isinstance(f, ast.Name) and f.id in FORBIDDEN_BUILTINS | FORBIDDEN_METHODS:
                found.append(f"line {node.lineno}: {f.id}()")
    assert not found, found
    # the probe sees what it looks for
    assert "item" in {
        n.func.attr
        for n in ast.walk(ast.parse(inspect.getsource(rule_torch._validate)))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
    }


def test_torch_rule_agent_plays_like_the_rule_agent(few: tuple[np.ndarray, np.ndarray]) -> None:
    obs, masks = few[0][:3000], few[1][:3000]
    agent = TorchRuleAgent()
    expected = RuleBasedAgent().act_batch(obs, masks)
    got = agent.act_batch(obs, masks)
    assert got.dtype == np.int64 and np.array_equal(got, expected)
    assert np.array_equal(agent.act_batch(obs.astype(np.float32) * scale_vector(), masks), got)
    assert [agent.act(obs[i], masks[i]) for i in range(20)] == expected[:20].tolist()


def test_the_agents_package_does_not_import_torch() -> None:
    code = (
        "import sys, agents, agents.rule_based, agents.rule_batch; "
        "assert 'torch' not in sys.modules and 'agents.rule_torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
