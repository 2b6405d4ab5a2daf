"""A real multi-node run: a two-node Ray cluster on this machine (``ray.cluster_utils.Cluster``,
127.0.0.1), the training command pointed at it with env runners on both nodes, a resume from
its checkpoint, and the arena playing the export. The test stops only the cluster it started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray.rllib")

from ray.cluster_utils import Cluster  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
NODE = {
    "num_cpus": 1,
    "node_ip_address": "127.0.0.1",
    "object_store_memory": 100 * 2**20,
}


@pytest.fixture
def two_nodes() -> Iterator[Cluster]:
    cluster = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    try:
        cluster.add_node(**NODE)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()


def _run(args: list[str], timeout: float = 150) -> subprocess.CompletedProcess[str]:
    # Ray replaces a 127.0.0.1 address by the machine's outward IP before connecting, unless
    # "cluster mode" is off; the nodes listen on 127.0.0.1 only, so the driver must keep it.
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "RAY_DEDUP_LOGS": "0",
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    }
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def test_training_spans_two_nodes_resumes_and_exports(two_nodes: Any, tmp_path: Path) -> None:
    train = [
        "-m", "train.rllib_ppo", "--address", two_nodes.address, "--run-dir", str(tmp_path),
        "--run-name", "cluster", "--num-env-runners", "2", "--num-hands", "8",
        "--train-batch", "512", "--minibatch", "256", "--update-epochs", "1", "--hidden", "32",
        "--layers", "1", "--snapshot-pool", "1", "--checkpoint-every", "1", "--eval-every", "0",
        "--total-minutes", "0",
    ]  # fmt: skip
    first = _run([*train, "--total-updates", "2"])
    assert first.returncode == 0, first.stderr[-3000:]
    run = tmp_path / "cluster"
    nodes = json.loads((run / "cluster.json").read_text())["runner_nodes"]
    alive = {n["NodeID"] for n in _nodes(two_nodes)}
    assert len(nodes) == 2 and len(set(nodes)) == 2 and set(nodes) <= alive
    assert "2 env runner(s) on 2 node(s)" in first.stderr

    second = _run([*train, "--total-updates", "3", "--resume"])
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
        timeout=120,
    )
    assert arena.returncode == 0, arena.stderr[-3000:]
    assert "4 duplicate deals" in arena.stdout and "95% CI" in arena.stdout
    for out in (first.stderr, second.stderr, first.stdout, second.stdout, arena.stdout):
        print("\n".join(line for line in out.splitlines() if "WARNING" not in line))


def _nodes(cluster: Cluster) -> list[dict[str, Any]]:
    """The cluster's live nodes, from its own GCS (no driver connection needed)."""
    return [n for n in cluster.global_state.node_table() if n["Alive"]]
