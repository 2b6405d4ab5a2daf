"""Odd and hostile inputs at the boundaries: JSON within limits, reset arguments, the agent
boundary, checkpoints holding code, output paths that cannot be created. Each case failed
before (a crash, a silent acceptance or a misleading message)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from agents import make_agent
from butifarra_env import BatchedEnv, butifarra_v0
from butifarra_env.core import json_input
from butifarra_env.core.fileio import check_can_create
from butifarra_env.core.observation import scale_vector
from butifarra_env.envs.gym_env import SingleAgentEnv
from butifarra_env.records import RecordError, check_record_file, iter_records, load_records
from tests.extras import need


def _record() -> dict:
    env = butifarra_v0.raw_env()
    env.reset(seed=3)
    for _ in range(10):
        env.step(int(np.flatnonzero(env.observe(env.agent_selection)["action_mask"])[0]))
    return env.game_record()


# ------------------------------------------------------------------ JSON within limits
@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[" * 5000 + "]" * 5000, "nested deeper than"),
        ("[" * 40 + "]" * 40, "nested deeper than 32"),
        ('{"seed": ' + "9" * 5000 + "}", "5000 digits"),
        ("[NaN]", "NaN is not a JSON number"),
        ("[-Infinity]", "-Infinity is not a JSON number"),
        ('{"a": 1', "not valid JSON"),
    ],
)
def test_json_beyond_the_limits_is_one_clear_error(text: str, says: str) -> None:
    with pytest.raises(json_input.JSONInputError, match=says):
        json_input.loads(text)


def test_json_reads_bytes_with_a_byte_order_mark_and_refuses_non_utf8() -> None:
    assert json_input.loads(b'\xef\xbb\xbf{"a": [1, 2.5]}') == {"a": [1, 2.5]}
    with pytest.raises(json_input.JSONInputError, match="not UTF-8"):
        json_input.loads(b'{"a": "\xff"}')


def test_a_hostile_line_in_a_records_file_is_skipped_by_name(tmp_path: Path) -> None:
    good = json.dumps(_record())
    path = tmp_path / "games.jsonl"
    lines = [good, "[" * 3000 + "]" * 3000, '{"x": ' + "7" * 6000 + "}", good]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    skipped: list[str] = []
    kept = list(iter_records(path, skip_bad=True, skipped=skipped))
    assert len(kept) == 2
    assert [s.split(": ", 1)[0] for s in skipped] == [f"{path}:2", f"{path}:3"]
    assert "nested deeper" in skipped[0] and "6000 digits" in skipped[1]
    with pytest.raises(RecordError, match=rf"{path.name}:2: nested deeper"):
        load_records(path)


def test_a_records_file_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(_record()).encode() + b"\n")
    assert len(load_records(path)) == 1
    assert check_record_file(path) == path


def test_format_version_true_is_not_version_1(tmp_path: Path) -> None:
    record = _record()
    record["format_version"] = True
    path = tmp_path / "v.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(RecordError, match="format_version True is not supported"):
        load_records(path)


# ------------------------------------------------------------------ reset arguments
@pytest.mark.parametrize("make", [butifarra_v0.env, butifarra_v0.raw_env, SingleAgentEnv])
def test_reset_refuses_options_that_are_not_a_mapping_and_a_bool_seed(make) -> None:
    env = make()
    env.reset(seed=5)
    before = env.unwrapped.game.actions[:] if hasattr(env.unwrapped, "game") else None
    with pytest.raises(ValueError, match=r"reset options must be a dict .* got \[1, 2\]"):
        env.reset(options=[1, 2])
    with pytest.raises(ValueError, match="seed must be an int >= 0 or None, got True"):
        env.reset(seed=True)
    if before is not None:
        assert env.unwrapped.game.actions == before  # the refused calls changed nothing


def test_batched_and_vector_resets_refuse_a_bool_seed() -> None:
    import gymnasium

    with pytest.raises(ValueError, match="seed must be an int >= 0 or None, got True"):
        BatchedEnv(2).reset(seed=True)
    vec = gymnasium.make_vec("butifarra_env/Butifarra-v0", num_envs=2)
    with pytest.raises(ValueError, match="reset options must be a dict"):
        vec.reset(options=[1])


def test_match_scores_at_or_past_the_target_are_refused() -> None:
    env = butifarra_v0.raw_env(target_score=101)
    with pytest.raises(ValueError, match=r"below target_score 101 .* got \[150, 3\]"):
        env.reset(options={"match_scores": [150, 3]})
    with pytest.raises(ValueError, match=r"got \[0, 101\]"):
        env.reset(options={"match_scores": [0, 101]})
    env.reset(options={"match_scores": [100, 100]})  # one point short: still a match
    assert env.match_scores == [100, 100]


def test_single_agent_env_takes_a_numpy_seat_and_names_a_string_opponent() -> None:
    env = SingleAgentEnv(seat=np.int64(1))
    obs, _ = env.reset(seed=0)
    assert env.unwrapped.seat == 1 and obs["action_mask"].any()
    with pytest.raises(ValueError, match=r"got the string 'rule'.*make_agent\('rule'\)"):
        SingleAgentEnv(opponents="rule")


# ------------------------------------------------------------------ the agent boundary
def _positions(n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    eng = BatchedEnv(n, seed=11)
    obs, mask, _ = eng.reset()
    for _ in range(30):  # into the card play
        obs, mask, *_ = eng.step(mask.argmax(axis=1))
    return obs, mask


@pytest.mark.parametrize("name", ["random", "rule", "ppo"])
def test_agents_play_float32_observations_as_the_uint8_ones(name: str) -> None:
    obs, mask = _positions()
    scaled = obs * scale_vector()
    a = make_agent(name, seed=0)
    plain = a.act_batch(obs, mask)
    a.reset(seed=0)
    assert np.array_equal(a.act_batch(scaled, mask), plain)
    one = make_agent(name, seed=0)
    other = make_agent(name, seed=0)
    for i in range(5):
        assert one.act(scaled[i], mask[i]) == other.act(obs[i], mask[i])


@pytest.mark.parametrize("name", ["random", "rule", "ppo"])
@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (lambda o: o[:, :100], "shape"),
        (lambda o: o.astype(np.float32), "float observations"),  # counts, not scaled
        (lambda o: np.full_like(o, 200), "above the most that entry"),
        (lambda o: o.astype(np.int64) - 1, "0-255"),
        (lambda o: o.astype(object), "dtype object"),
    ],
)
def test_agents_refuse_what_is_not_an_observation(name: str, bad, says: str) -> None:
    obs, mask = _positions(8)
    obs[:, 0] = 1  # make sure a plain float copy has an entry > 1 somewhere
    wrong = bad(obs)
    agent = make_agent(name, seed=0)
    with pytest.raises(ValueError, match=says):
        agent.act_batch(wrong, mask)


def test_agents_refuse_masks_that_are_not_zero_one() -> None:
    obs, mask = _positions(4)
    with pytest.raises(ValueError, match="action_masks must hold 0 and 1 only"):
        make_agent("rule").act_batch(obs, mask * 2)


# ------------------------------------------------------------------ checkpoints holding code
class _Payload:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_checkpoint_holding_code_is_refused_in_one_line(tmp_path: Path) -> None:
    torch = need("torch")
    from agents.ppo_net import load_checkpoint

    marker = tmp_path / "ran"
    path = tmp_path / "evil.pt"
    torch.save({"format": "butifarra-ppo", "x": _Payload(str(marker))}, path)
    with pytest.raises(ValueError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert "holds pickled code" in message and "refused" in message
    assert "\n" not in message and "weights_only=False" not in message
    assert info.value.__cause__ is None and not marker.exists()


# ------------------------------------------------------------------ output paths
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_output_paths_under_proc_are_refused_by_trying(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"cannot create files in '/proc'"):
        check_can_create("/proc/card.json")
    target = tmp_path / "new" / "deeper" / "card.json"
    check_can_create(target)  # fine: the probe goes in tmp_path and is removed
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ unknown keywords
@pytest.mark.parametrize(
    "make",
    [
        lambda: butifarra_v0.env(frameskip=1),
        lambda: butifarra_v0.raw_env(frameskip=1),
        lambda: BatchedEnv(2, frameskip=1),
        lambda: SingleAgentEnv(frameskip=1),
    ],
)
def test_an_unknown_keyword_is_a_type_error_naming_the_known_options(make) -> None:
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['frameskip'\]; allowed: "):
        make()
