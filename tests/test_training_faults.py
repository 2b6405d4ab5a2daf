"""Faults a training run must survive without losing anything: kill -9 at any moment (also
in the middle of writing a checkpoint), Ctrl-C, a re-run without ``--resume``, a truncated
newest checkpoint, a spent budget, bad flags, and hostile checkpoint files.

Runs are tiny (8 hands x 64 steps per update, a 32-wide one-layer net, a checkpoint every
update, so that a resume from any checkpoint is bit-exact) and go through
``python -m train.ppo`` as subprocesses, or through ``train.ppo.main`` in-process where
only the refusal or the message is tested. Every wait is bounded; every process is killed
by its own pid.
"""

from __future__ import annotations

import csv
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import pytest

from tests.extras import need

torch = need("torch")

import agents.ppo_net as ppo_net  # noqa: E402
from agents.ppo_net import ActorCritic, load_checkpoint, model_payload  # noqa: E402
from train.ppo import Config, main, parse_config, train  # noqa: E402
from train.run_folder import SAVE_DELAY_ENV, RunRefused  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
UPDATES = 8
TINY = [
    "--num-envs", "8", "--num-steps", "64", "--hidden", "32", "--layers", "1",
    "--update-epochs", "1", "--num-minibatches", "2", "--eval-every", "0", "--no-tensorboard",
    "--no-progress", "--checkpoint-every", "1", "--torch-threads", "1", "--total-minutes", "0",
]  # fmt: skip
TIMING_COLUMNS = ("minutes", "steps_per_second", "eval_seconds")
"""metrics.csv columns that measure wall-clock time (they differ between identical runs)."""


def run_args(run_dir: Path, *extra: str, name: str = "r", updates: int = UPDATES) -> list[str]:
    head = ["--run-dir", str(run_dir), "--run-name", name, "--total-updates", str(updates)]
    return head + TINY + list(extra)


def start(argv: list[str], **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "train.ppo", *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 90) -> tuple[int, str]:
    """Wait for ``proc`` (killing it, by its pid, if it overruns); (status, stderr)."""
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"train.ppo did not finish in {timeout} s: {err[-2000:]}")
    return proc.returncode, err


POLLS = 6000
"""Most times :func:`wait_until` looks (10 ms apart: at most a minute)."""


def wait_until(proc: subprocess.Popen[str], ready: Callable[[], bool]) -> bool:
    """Poll ``ready()`` until it holds (True) or ``proc`` has exited (False), at most POLLS
    times; then kill ``proc`` (by its pid) and fail."""
    for _ in range(POLLS):
        if ready():
            return True
        if proc.poll() is not None:
            return ready()
        time.sleep(0.01)
    proc.kill()
    proc.communicate()
    pytest.fail(f"gave up waiting after {POLLS} polls")


def rows(run: Path) -> list[dict[str, str]]:
    path = run / "metrics.csv"
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative name -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def assert_same_run(run: Path, reference: Path) -> None:
    """``run`` ended exactly where the uninterrupted ``reference`` did: same weights, same
    metrics rows (wall-clock columns aside)."""
    got, want = load_checkpoint(run / "checkpoint.pt"), load_checkpoint(reference / "checkpoint.pt")
    assert got["update"] == want["update"] == UPDATES
    for name, tensor in want["model"].items():
        assert torch.equal(got["model"][name], tensor), name

    def strip(rs: list[dict[str, str]]) -> list[dict[str, str]]:
        return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in rs]

    assert strip(rows(run)) == strip(rows(reference))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted run of UPDATES updates (in-process: the same code as the command)."""
    root = tmp_path_factory.mktemp("reference")
    main(run_args(root))
    run = root / "r"
    assert [int(r["update"]) for r in rows(run)] == list(range(1, UPDATES + 1))
    assert int(rows(run)[-1]["hands"]) > 0  # hands finish, so the updates really learn
    return run


def copy_of(run: Path, tmp_path: Path) -> Path:
    target = tmp_path / run.name
    shutil.copytree(run, target)
    return target


# ----------------------------------------------------------------------------- kill -9
def test_kill_9_anywhere_then_resume_ends_like_an_uninterrupted_run(
    tmp_path: Path, reference: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Killed at two moments of random updates (just after an update's metrics row was
    written, before its checkpoint; and once its checkpoint is written, in the next update's
    rollout) and once in the middle of writing a checkpoint, each time resumed: the run
    continues from its last good checkpoint, leaves no temporary file behind, and ends
    bit-identical to the uninterrupted run."""
    rng = random.Random(7)
    run = tmp_path / "r"
    newest = run / "checkpoint.pt"

    def saved() -> int:
        try:
            return int(load_checkpoint(newest)["update"])
        except (FileNotFoundError, ValueError):
            return 0

    target = 0
    for session in range(2):  # kill -9 at a known moment of a random update
        target = rng.randint(target + 1, target + 2)
        proc = start(run_args(tmp_path, *(["--resume"] if session else [])))
        if session == 0:  # the row is on disk; the checkpoint may not be yet
            assert wait_until(proc, lambda n=target: len(rows(run)) >= n)
        else:  # the checkpoint of that update is on disk: the next update is under way
            assert wait_until(proc, lambda n=target: saved() >= n)
        proc.kill()
        finish(proc)
    assert load_checkpoint(newest)["update"] < UPDATES - 1
    # kill -9 while a checkpoint is half written (the test hook pauses the write there)
    good = load_checkpoint(newest)["update"]
    proc = start(run_args(tmp_path, "--resume"), **{SAVE_DELAY_ENV: "60"})
    assert wait_until(proc, lambda: any(p.stat().st_size for p in run.glob(".checkpoint.pt.*.tmp")))
    proc.kill()
    finish(proc)
    assert list(run.glob(".checkpoint.pt.*.tmp")), "the kill should leave a half-written file"
    assert load_checkpoint(newest)["update"] == good  # the file being replaced is untouched
    main(run_args(tmp_path, "--resume"))
    assert "interrupted write" in capsys.readouterr().err
    assert not list(run.glob("*.tmp")) and not list(run.glob(".*.tmp"))
    assert_same_run(run, reference)
    assert load_checkpoint(run / "checkpoint.prev.pt")["update"] == UPDATES - 1


# ----------------------------------------------------------------------------- torn CSV
@pytest.mark.parametrize("damage", ["torn last row", "row with missing fields"])
def test_a_row_torn_by_a_kill_is_dropped_and_the_resumed_log_is_whole(
    tmp_path: Path, reference: Path, damage: str
) -> None:
    """A kill mid-append leaves the last metrics row cut mid-line (or, written by hand, a
    row with fields missing); ``--resume`` drops it, redoes that update and ends with the
    same log as the uninterrupted run."""
    half = UPDATES // 2

    def stop_after_half(metrics: dict[str, float]) -> None:
        if metrics["update"] == half:  # its checkpoint is written (one per update)
            raise InterruptedError

    with pytest.raises(InterruptedError):
        train(parse_config(run_args(tmp_path)), on_update=stop_after_half)
    path = tmp_path / "r" / "metrics.csv"
    next_row = (reference / "metrics.csv").read_text().splitlines()[half + 1]
    with open(path, "a", newline="") as f:
        if damage == "torn last row":
            f.write(next_row[: len(next_row) // 2])  # no line end: cut mid-line
        else:
            f.write(",".join(next_row.split(",")[:3]) + "\r\n")  # update, step, hands only
    main(run_args(tmp_path, "--resume"))
    assert_same_run(tmp_path / "r", reference)
    assert path.read_text().count("\n") == UPDATES + 1  # the header and one row per update


# ----------------------------------------------------------------------------- Ctrl-C
def test_ctrl_c_saves_a_final_checkpoint_and_exits_130(tmp_path: Path) -> None:
    export = tmp_path / "agent.pt"
    endless = 1_000_000
    proc = start(
        run_args(
            tmp_path, "--checkpoint-every", "1000", "--export-path", str(export), updates=endless
        )
    )
    run = tmp_path / "r"
    assert wait_until(proc, lambda: len(rows(run)) >= 2)
    proc.send_signal(signal.SIGINT)
    status, err = finish(proc)
    assert status == 130, err[-3000:]
    assert "Traceback" not in err
    saved = load_checkpoint(run / "checkpoint.pt")
    assert saved["update"] == len(rows(run)) >= 2  # the last finished update, not a scheduled one
    assert str(run / "checkpoint.pt") in err and "--resume" in err
    assert load_checkpoint(export)["update"] == saved["update"]
    # the checkpoint resumes, and the run may update its own export
    main(run_args(tmp_path, "--resume", "--export-path", str(export), updates=saved["update"] + 1))
    assert load_checkpoint(export)["update"] == saved["update"] + 1
    # another run may not overwrite it
    before = export.read_bytes()
    with pytest.raises(SystemExit) as stop:
        main(run_args(tmp_path, "--export-path", str(export), name="other"))
    assert stop.value.code == 2 and export.read_bytes() == before


# ----------------------------------------------------------------------------- refusals
def test_rerun_without_resume_is_refused_and_changes_nothing(
    tmp_path: Path, reference: Path
) -> None:
    run = copy_of(reference, tmp_path)
    before = snapshot(run)
    status, err = finish(start(run_args(tmp_path)))
    assert status == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "--resume" in lines[0] and "--run-name" in lines[0]
    assert snapshot(run) == before
    with pytest.raises(RunRefused, match="already holds a run"):  # the Python API too
        train(Config(run_dir=str(tmp_path), run_name="r", total_updates=1))


@pytest.mark.parametrize(
    "budget,message",
    [
        ([], f"update {UPDATES} of --total-updates {UPDATES}"),
        (["--total-updates", "0", "--total-minutes", "0.0001"], "of --total-minutes 0.0001"),
    ],
)
def test_spent_budget_is_refused_and_creates_nothing(
    tmp_path: Path,
    reference: Path,
    capsys: pytest.CaptureFixture[str],
    budget: list[str],
    message: str,
) -> None:
    run = copy_of(reference, tmp_path)
    before = snapshot(run)
    with pytest.raises(SystemExit) as stop:
        main(run_args(tmp_path, "--resume", "--tensorboard", *budget))
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and len(err.splitlines()) == 1
    assert "spent its budget" in err and message in err and "to train it further" in err, err
    assert snapshot(run) == before  # no events file, no rewritten CSV


def test_truncated_newest_checkpoint_resumes_from_the_previous(
    tmp_path: Path, reference: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_of(reference, tmp_path)
    newest = run / "checkpoint.pt"
    torn = newest.read_bytes()[: newest.stat().st_size // 2]
    newest.write_bytes(torn)
    (run / ".checkpoint.pt.abc123.tmp").write_bytes(b"left by a kill")
    main(run_args(tmp_path, "--resume"))
    err = capsys.readouterr().err
    assert "truncated" in err and "checkpoint.prev.pt" in err and f"(update {UPDATES - 1})" in err
    assert_same_run(run, reference)  # the last update was redone exactly
    assert (run / "checkpoint.pt.unreadable").read_bytes() == torn  # kept, not lost
    assert not (run / ".checkpoint.pt.abc123.tmp").exists()


def test_resume_with_no_readable_checkpoint_is_a_clear_error(
    tmp_path: Path, reference: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_of(reference, tmp_path)
    for name in ("checkpoint.pt", "checkpoint.prev.pt"):
        (run / name).write_bytes(b"")
    before = snapshot(run)
    with pytest.raises(SystemExit) as stop:
        main(run_args(tmp_path, "--resume"))
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and len(err.splitlines()) == 1
    assert "no readable checkpoint" in err and "checkpoint.prev.pt" in err
    assert snapshot(run) == before


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--seed", "-1"], "seed must be an int >= 0"),
        (["--eval-seed", "-2"], "eval_seed"),
        (["--opp-rule", "inf"], "opp_rule"),
        (["--hidden", "100000"], "hidden must be an int 1-4096"),
        (["--run-name", "a/b"], "run_name"),
        (["--export-path", "{tmp}"], "is a folder"),
        (["--export-path", "{tmp}/notes.txt/agent.pt"], "is a file"),
        (["--export-path", "{tmp}/notes.txt"], "not a butifarra-ppo checkpoint"),
    ],
)
def test_bad_flags_are_one_line_errors_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    argv = run_args(tmp_path / "runs") + [f.format(tmp=tmp_path) for f in flags]
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and message in err, err
    assert not (tmp_path / "runs").exists() and notes.read_text() == "my notes\n"


# ----------------------------------------------------------------------------- hostile files
def tiny_payload(**extra: object) -> dict[str, object]:
    torch.manual_seed(0)
    return model_payload(ActorCritic(hidden=16, layers=1), asdict(Config()), dict(extra))


def save(payload: dict[str, object], path: Path, reseal: bool) -> Path:
    if reseal:  # a consistent fingerprint: only the structural checks can catch it
        payload["fingerprint"] = ppo_net.fingerprint(payload)
    torch.save(payload, path)
    return path


def test_hostile_arch_is_rejected_before_any_model_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was built from an unchecked arch")

    monkeypatch.setattr(ppo_net, "ActorCritic", no_build)
    from agents.ppo_agent import PPOAgent

    payload = tiny_payload()
    payload["arch"]["hidden"] = 4000  # within the bound, but the tensors are 16 wide
    wide = save(payload, tmp_path / "wide.pt", reseal=True)
    with pytest.raises(ValueError, match=r"wide\.pt.*shape \(16, 547\).*\(4000, 547\)"):
        load_checkpoint(wide)
    with pytest.raises(ValueError, match=r"wide\.pt"):
        ppo_net.model_from_checkpoint(torch.load(wide, weights_only=True), wide)
    with pytest.raises(ValueError, match=r"wide\.pt"):
        PPOAgent(wide)
    payload["arch"]["hidden"] = 6_000_000
    huge = save(payload, tmp_path / "huge.pt", reseal=True)
    with pytest.raises(ValueError, match=r"huge\.pt.*hidden.*1-4096"):
        load_checkpoint(huge)
    with pytest.raises(ValueError, match="1-4096"):
        ppo_net.build_model(payload["arch"])


def test_non_finite_weights_are_rejected(tmp_path: Path) -> None:
    for bad in (float("nan"), float("inf")):
        payload = tiny_payload()
        payload["model"]["policy.weight"][3, 4] = bad
        path = save(payload, tmp_path / "nan.pt", reseal=True)
        with pytest.raises(ValueError, match=r"nan\.pt.*'policy\.weight' holds NaN or infinite"):
            load_checkpoint(path)


@pytest.mark.parametrize("edit", ["canonical_suits", "mask_input", "config", "weights"])
def test_a_checkpoint_changed_after_writing_fails_its_fingerprint(
    tmp_path: Path, edit: str
) -> None:
    payload = tiny_payload(update=3)
    if edit == "config":
        payload["config"]["learning_rate"] = 0.1
    elif edit == "weights":
        payload["model"]["value.bias"] += 1.0
    else:  # a flag that leaves every tensor shape as it is
        payload["arch"][edit] = not payload["arch"][edit]
    path = save(payload, tmp_path / "edited.pt", reseal=False)
    if edit == "mask_input":  # this one changes the input width: the shapes catch it first
        with pytest.raises(ValueError, match=r"edited\.pt.*shape"):
            load_checkpoint(path)
    else:
        with pytest.raises(ValueError, match=r"edited\.pt.*integrity check"):
            load_checkpoint(path)
