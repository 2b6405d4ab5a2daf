"""train.ppo's guards against runs that cannot give a result: hands that cannot finish
between two restarts of the engine (the longest hand, from the rules), a time budget spent
before any hand finished, output paths no file can be created in, and ``python -m
train.ppo`` / ``python -m train.rllib_ppo`` without their extras."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from tests.extras import need

if TYPE_CHECKING:
    from train.ppo import Config

ROOT = Path(__file__).resolve().parent.parent


def tiny(tmp_path: Path, **kw: Any) -> Config:
    from train.ppo import Config

    base = Config(
        card_features=False, card_head=False, teacher_bid_floor=0.0, belief=False,
        run_dir=str(tmp_path), run_name="t", seed=3, total_minutes=0, total_updates=1,
        num_envs=8, num_steps=64, hidden=32, layers=1, update_epochs=1, num_minibatches=2,
        eval_every=0, tensorboard=False, progress=False, torch_threads=1, milestone_minutes=(),
    )  # fmt: skip
    return replace(base, **kw)


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


# ----------------------------------------------------------------------------- hand length
def test_the_longest_hand_takes_max_hand_steps() -> None:
    """Delegate, choose, then a pass and a double at each of the 4 levels, then 48 cards:
    58 engine steps, the bound; random play never takes more (nor fewer than 49)."""
    need("torch")
    from butifarra_env.core.actions import DELEGATE, DOUBLE, PASS, TRUMP_BASE
    from butifarra_env.envs.batched import BatchedEnv
    from train.ppo_settings import MAX_HAND_STEPS

    assert MAX_HAND_STEPS == 58
    env = BatchedEnv(1, seed=0)
    _, mask, _ = env.reset(seed=0)
    forced = [DELEGATE, TRUMP_BASE] + [PASS, DOUBLE] * 4
    steps, done = 0, np.zeros(1, bool)
    while not done[0]:
        legal = np.flatnonzero(np.asarray(mask)[0])
        action = forced[steps] if steps < len(forced) else legal[0]
        assert action in legal, (steps, action)
        _, mask, _, _, done = env.step(np.array([action]))
        done = np.asarray(done)
        steps += 1
    assert steps == MAX_HAND_STEPS

    from butifarra_env.core.actions import random_legal_actions

    rng = np.random.default_rng(0)
    env = BatchedEnv(256, seed=1)
    _, mask, _ = env.reset(seed=1)
    length, seen = np.zeros(256, int), []
    for _ in range(4 * MAX_HAND_STEPS):
        _, mask, _, _, done = env.step(random_legal_actions(np.asarray(mask), rng))
        length += 1
        seen += list(length[np.asarray(done)])
        length[np.asarray(done)] = 0
    assert len(seen) > 500 and min(seen) >= 49 and max(seen) <= MAX_HAND_STEPS


def test_settings_under_which_no_hand_can_finish_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    need("torch")
    from butifarra.exploit import main as exploit
    from train.ppo import main, train
    from train.run_folder import RunRefused

    # the engine deals afresh every checkpoint_every updates: 10 x 4 steps end no hand
    with pytest.raises(RunRefused, match=r"num_steps x checkpoint_every = 4 x 10 = 40.*58"):
        train(tiny(tmp_path, num_steps=4, total_updates=100))
    # nor do 2 updates of 16 steps, whatever the checkpoint interval
    with pytest.raises(RunRefused, match=r"num_steps x total_updates = 16 x 2 = 32"):
        train(tiny(tmp_path, num_steps=16, total_updates=2))
    with pytest.raises(SystemExit) as stop:
        main(["--run-dir", str(tmp_path), "--num-steps", "5", "--checkpoint-every", "2"])
    assert stop.value.code == 2 and "a hand can take 58" in one_line_error(capsys)
    argv = ["random", "--minutes", "1", "--num-steps", "4", "--run-dir", str(tmp_path)]
    assert exploit(argv) == 2
    assert "num_steps x checkpoint_every = 4 x 10" in one_line_error(capsys)
    assert list(tmp_path.iterdir()) == []
    # at the bound, hands finish
    assert train(tiny(tmp_path, num_steps=58))["hands"] > 0


def test_a_time_budget_spent_before_any_hand_finished_goes_on_until_one_has(
    tmp_path: Path,
) -> None:
    """A clock that jumps 1000 s per reading spends the one-minute budget in the first
    update; with 8 steps per update, the first hands end in update 7 or 8 (49 to 58 steps)."""
    need("torch")
    from train.ppo import train

    ticks = iter(range(0, 10**9, 1000))
    cfg = tiny(tmp_path, num_steps=8, total_updates=0, total_minutes=1.0)
    seen: list[dict[str, float]] = []
    final = train(cfg, on_update=seen.append, clock=lambda: float(next(ticks)))
    assert final["hands"] > 0 and "loss_policy" in final
    assert 7 <= final["update"] <= 8 and all(m["hands"] == 0 for m in seen[:-1])


# ----------------------------------------------------------------------------- output paths
@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_output_paths_under_proc_are_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As root, /proc passes every permission check; creating a file there fails."""
    need("torch")
    from butifarra.exploit import main as exploit
    from train.ppo import main

    runs = ["--run-dir", str(tmp_path / "runs"), "--total-updates", "1"]
    with pytest.raises(SystemExit) as stop:
        main([*runs, "--export-path", "/proc/x.pt"])
    assert stop.value.code == 2
    assert "--export-path '/proc/x.pt' cannot be written" in one_line_error(capsys)
    with pytest.raises(SystemExit) as stop:
        main(["--run-dir", "/proc", "--total-updates", "1"])
    assert stop.value.code == 2 and "run folder '/proc/ppo_s1'" in one_line_error(capsys)
    assert exploit(["random", "--minutes", "1", "--run-dir", "/proc"]) == 2
    assert "argument --run-dir: cannot use '/proc/exploit_random" in one_line_error(capsys)
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- extras
@pytest.mark.parametrize(
    ("module", "hidden", "extra"),
    [("train.ppo", "torch", "train"), ("train.rllib_ppo", "ray", "integrations")],
)
def test_the_trainers_without_their_extra_say_which_to_install(
    module: str, hidden: str, extra: str
) -> None:
    """``sys.modules[NAME] = None`` makes ``import NAME`` fail as if it were not installed."""
    code = (
        f"import runpy, sys; sys.modules[{hidden!r}] = None; sys.argv = [{module!r}, '--help']; "
        f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stdout == "" and "Traceback" not in out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert f"needs the '{extra}' extra" in line and f"pip install 'butifarra-rl[{extra}]'" in line
