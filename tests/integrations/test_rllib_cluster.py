"""A real multi-node run: two Ray nodes on this machine started with ``ray start`` (through
``python -m train.local_ray start``: Ray's command with the loopback fix and token auth, as
``docs/distributed.md`` tells users to run it), both on 127.0.0.1 with their own temp dirs
and ports; the training command pointed at them with one env runner on each node, a resume
from its checkpoint, and the arena playing the export. The test stops only the processes it
started (by their process groups), with bounded waits."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.extras import need

need("ray.rllib")
psutil = need("psutil")
from tests.integrations.processes import alive, process_tree  # noqa: E402
from train.local_ray import free_port, is_loopback  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class TwoNodes:
    address: str
    env: dict[str, str]
    nodes: list[subprocess.Popen[bytes]]


def _start_node(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``python -m train.local_ray start --block ARGS`` in its own process group, its output
    in ``log``; returns once Ray says the node runs (bounded), else fails with the log."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "train.local_ray", "start", "--block", *args],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    deadline = time.monotonic() + 120
    while "Ray runtime started" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop([proc])
            pytest.fail(f"node did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.5)
    return proc


def _stop(nodes: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each ``ray start --block`` (it stops its processes), then SIGKILL what is
    left of its process group; bounded."""
    for proc in reversed(nodes):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(20)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)


@pytest.fixture
def two_nodes(tmp_path: Path) -> Iterator[TwoNodes]:
    token = tmp_path / "auth_token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env |= {
        "PYTHONPATH": str(ROOT), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token),
        "RAY_USAGE_STATS_ENABLED": "0",
    }  # fmt: skip
    port = free_port()
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1",
              "--object-store-memory", str(100 * 2**20), "--disable-usage-stats"]  # fmt: skip
    nodes: list[subprocess.Popen[bytes]] = []
    short = Path(tempfile.mkdtemp(prefix="bt-ray-"))  # socket paths must stay short
    try:
        head_dir, worker_dir = short / "head", short / "worker"
        head_args = ["--head", "--port", str(port), "--include-dashboard", "false",
                     "--ray-client-server-port", str(free_port()), "--temp-dir", str(head_dir),
                     *common]  # fmt: skip
        nodes.append(_start_node(head_args, env, tmp_path / "head.log"))
        worker = ["--address", f"127.0.0.1:{port}", "--temp-dir", str(worker_dir), *common]
        nodes.append(_start_node(worker, env, tmp_path / "worker.log"))
        yield TwoNodes(f"127.0.0.1:{port}", env, nodes)
    finally:
        pids = {p.pid for n in nodes for p in process_tree(n.pid, gone_ok=True)}
        _stop(nodes)
        deadline = time.monotonic() + 30
        while alive(pids) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = alive(pids)
        for pid in left:
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()
        shutil.rmtree(short, ignore_errors=True)
        assert not left, f"processes of the test's nodes still alive: {left}"


def _run(
    args: list[str], env: dict[str, str], timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env={**env, "RAY_DEDUP_LOGS": "0"},
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


@pytest.mark.integration
@pytest.mark.cluster
def test_training_spans_two_nodes_resumes_and_exports(two_nodes: TwoNodes, tmp_path: Path) -> None:
    listening = [
        c.laddr.ip
        for node in two_nodes.nodes
        for p in process_tree(node.pid, gone_ok=True)
        for c in p.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    ]
    assert listening and all(is_loopback(ip) for ip in listening), listening
    train = [
        "-m", "train.rllib_ppo", "--address", two_nodes.address, "--run-dir", str(tmp_path),
        "--run-name", "cluster", "--num-env-runners", "2", "--num-hands", "8",
        "--train-batch", "512", "--minibatch", "256", "--update-epochs", "1", "--hidden", "32",
        "--layers", "1", "--snapshot-pool", "1", "--checkpoint-every", "1", "--eval-every", "0",
        "--total-minutes", "0",
    ]  # fmt: skip
    first = _run([*train, "--total-updates", "2"], two_nodes.env)
    assert first.returncode == 0, first.stderr[-3000:]
    run = tmp_path / "cluster"
    nodes = json.loads((run / "cluster.json").read_text())["runner_nodes"]
    assert len(nodes) == 2 and len(set(nodes)) == 2  # one env runner on each node
    assert "2 env runner(s) on 2 node(s)" in first.stderr

    second = _run([*train, "--total-updates", "3", "--resume"], two_nodes.env)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "cluster: iteration 2," in second.stderr  # resumed from its checkpoint
    progress = json.loads((run / "checkpoint" / "butifarra_progress.json").read_text())
    assert progress["iteration"] == 3

    arena = _run(
        [
            "-m",
            "butifarra.cli",
            "arena",
            f"ppo:{run / 'export.pt'}",
            "rule",
            "-n",
            "4",
            "--seed",
            "0",
        ],  # fmt: skip
        two_nodes.env,
        timeout=120,
    )
    assert arena.returncode == 0, arena.stderr[-3000:]
    assert "4 duplicate deals" in arena.stdout and "95% CI" in arena.stdout
    for out in (first.stderr, second.stderr, first.stdout, second.stdout, arena.stdout):
        print("\n".join(line for line in out.splitlines() if "WARNING" not in line))
