"""The trainer's local Ray stays on this machine and dies with the run.

A small ``python -m train.rllib_ppo --num-env-runners 0`` run: every listening socket of
its process tree (driver, supervisor, GCS, raylet, agents, workers) is on a loopback
address; after a ``kill -9`` of the driver, no process of the run is left. The tests stop
what they started, by pid, with bounded waits."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.extras import need

need("ray.rllib")
psutil = need("psutil")
from tests.integrations.processes import alive, process_tree  # noqa: E402
from train.local_ray import is_loopback  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "--num-env-runners", "0", "--num-hands", "8", "--train-batch", "256", "--minibatch",
    "128", "--update-epochs", "1", "--hidden", "16", "--layers", "1", "--snapshot-pool", "1",
    "--checkpoint-every", "1000", "--eval-every", "0", "--total-minutes", "0",
    "--total-updates", "100000", "--object-store-mb", "80", "--no-tensorboard",
]  # fmt: skip


@contextlib.contextmanager
def training(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A long tiny run in the background, up to its first iteration; every process of its
    tree that is still alive at the end is killed (by pid)."""
    cmd = [sys.executable, "-m", "train.rllib_ppo", "--run-dir", str(tmp_path), *TINY]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = open(tmp_path / "driver.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 240
        csv = tmp_path / "rllib_ppo_s1" / "metrics.csv"
        while not (csv.exists() and len(csv.read_text().splitlines()) >= 2):
            assert proc.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no iteration within 240 s"
            time.sleep(0.5)
        proc.tree = process_tree(proc.pid)  # type: ignore[attr-defined]
        seen |= {p.pid for p in proc.tree}  # type: ignore[attr-defined]
        yield proc
    finally:
        for p in [*(psutil.Process(pid) for pid in seen if psutil.pid_exists(pid))]:
            with contextlib.suppress(psutil.Error):
                p.kill()
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(30)
        log.close()


@pytest.mark.integration
@pytest.mark.cluster
def test_local_ray_listens_on_loopback_only(tmp_path: Path) -> None:
    with training(tmp_path) as proc:
        listening: list[tuple[str, str, int]] = []
        for p in proc.tree:  # type: ignore[attr-defined]
            with contextlib.suppress(psutil.NoSuchProcess):
                for c in p.net_connections(kind="inet"):
                    if c.status == psutil.CONN_LISTEN:
                        listening.append((p.name(), c.laddr.ip, c.laddr.port))
        print("\n".join(f"{name}: {ip}:{port}" for name, ip, port in listening))
        names = {name for name, _, _ in listening}
        assert {"gcs_server", "raylet"} <= names, listening  # the daemons were seen
        outside = [x for x in listening if not is_loopback(x[1])]
        assert not outside, f"listening beyond loopback: {outside}"
        proc.send_signal(signal.SIGINT)  # a clean stop: saves, exits 130, leaves nothing
        assert proc.wait(120) == 130
        pids = {p.pid for p in proc.tree}  # type: ignore[attr-defined]
        deadline = time.monotonic() + 60
        while alive(pids) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not alive(pids), [psutil.Process(p).name() for p in alive(pids)]


@pytest.mark.integration
@pytest.mark.cluster
def test_kill_9_of_the_driver_leaves_no_ray_process(tmp_path: Path) -> None:
    with training(tmp_path) as proc:
        pids = {p.pid for p in proc.tree}  # type: ignore[attr-defined]
        assert len(pids) >= 5  # driver, supervisor, head, GCS, raylet, ...
        cmdlines = [a for p in proc.tree for a in p.cmdline()]  # type: ignore[attr-defined]
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        deadline = time.monotonic() + 60
        while alive(pids) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = alive(pids)
        assert not left, [" ".join(psutil.Process(p).cmdline())[:200] for p in left]
        temp_dirs = {a.split("=", 1)[1] for a in cmdlines if a.startswith("--temp-dir=")}
        assert temp_dirs and not any(Path(d).exists() for d in temp_dirs)  # removed too


def test_loopback_addresses() -> None:
    for host in ("127.0.0.1", "127.9.9.9", "::1", "::ffff:127.0.0.1", "localhost", "[::1]"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "192.0.2.2", "10.0.0.1", "example.org", ""):
        assert not is_loopback(host), host
