"""The notebooks in notebooks/ run top to bottom (small settings) and show what they promise.

Each notebook is executed from an in-memory copy with nbclient in a fresh ``python3`` kernel,
``notebooks/`` as working directory and ``BUTIFARRA_NB_QUICK=1`` (each takes well under two
minutes on two cores); the committed files are never written. Regenerate the committed outputs
with ``python notebooks/execute.py``.

The notebooks use the shipped PPO checkpoint; until it exists these tests are skipped.
``BUTIFARRA_PPO_CHECKPOINT=PATH`` runs them against another checkpoint.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path

import pytest

from tests.extras import need

nbformat = need("nbformat")
need("nbclient")
need("ipykernel")
need("matplotlib")

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = ROOT / "notebooks"
SHIPPED = ROOT / "agents" / "checkpoints" / "ppo_butifarra.pt"
TIMEOUT_S = 600  # per cell; the quick settings need a small fraction of it


def _load_execute():
    spec = importlib.util.spec_from_file_location("nb_execute", NB_DIR / "execute.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


execute_mod = _load_execute()

# notebook -> (minimum number of figures, texts that must appear in the outputs)
EXPECTED = {
    "01_quickstart.ipynb": (
        1,
        [
            "Hand of player_0",  # a rendered hand
            "observation length 491",
            "'choose_trump' may: trump oros",  # a mask in each phase, with action names
            "'choose_trump_delegated' may:",
            "'doubling' may: double, pass",
            "[follow]",
            "total for ppo",  # the agents played
            "replayed result",
            "All tricks",
        ],
    ),
    "02_train_ppo.ipynb": (
        3,  # the live learning curve, the duels, the strength-against-compute curve
        [
            "changed from the defaults",
            "metrics.csv:",
            "architecture:",
            "shipped checkpoint vs rule",
            "60 min: IQM",  # the curve's table, from docs/strength_curve_nb.csv
        ],
    ),
    "03_benchmark_strategies.ipynb": (
        4,
        [
            "| agent",
            "ordinal",
            "| rule",
            "| ppo",
            "| random",
            "row agent vs column agent",
            "| search vs",
        ],
    ),
    "04_other_frameworks.ipynb": (
        3,  # the rgb_array frame, the learning curve, the arena chart
        [
            "render_mode: rgb_array",  # SB3's make_vec_env default reached the env
            "masking supported: True",
            "illegal moves: 0",
            "PredictAgent(name='sb3')",
            "| sb3",
            "sb3 vs rule",
            "same hands as in the round robin: True",
        ],
    ),
}
# notebook -> modules it needs beyond the notebooks extra (its tests skip without them)
NEEDS = {"04_other_frameworks.ipynb": ("stable_baselines3", "sb3_contrib")}


def test_every_notebook_is_tested():
    assert sorted(p.name for p in NB_DIR.glob("*.ipynb")) == sorted(EXPECTED)
    assert sorted(execute_mod.NOTEBOOKS) == sorted(EXPECTED)


def _texts(nb) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                parts.append(out.get("text", ""))
            elif "data" in out:
                parts.append(str(out["data"].get("text/plain", "")))
    return "\n".join(parts)


def _n_figures(nb) -> int:
    return sum(
        "image/png" in out.get("data", {}) for cell in nb.cells for out in cell.get("outputs", [])
    )


@pytest.fixture
def quick_env(monkeypatch):
    """The environment the kernel inherits: quick settings, the repo importable, a checkpoint."""
    assert os.environ.get("BUTIFARRA_PPO_CHECKPOINT") or SHIPPED.is_file(), (
        f"the shipped PPO checkpoint {SHIPPED.relative_to(ROOT)} is missing"
    )
    monkeypatch.setenv("BUTIFARRA_NB_QUICK", "1")
    monkeypatch.setenv("JUPYTER_PREFER_ENV_PATH", "1")  # this environment's python3 kernel
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), path) if p))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_executes(name, quick_env):
    for module in NEEDS.get(name, ()):
        need(module)
    path = NB_DIR / name
    before = path.read_bytes()
    nb = execute_mod.execute(path, timeout=TIMEOUT_S)  # raises CellExecutionError on failure
    assert path.read_bytes() == before, "executing must not modify the committed notebook"

    assert execute_mod.error_outputs(nb) == []  # no tracebacks, no warnings on stderr
    n_figures, texts = EXPECTED[name]
    assert _n_figures(nb) >= n_figures
    out = _texts(nb)
    missing = [t for t in texts if t not in out]
    assert not missing, f"{name}: expected output text not found: {missing}"
    for cell in nb.cells:  # a figure redrawn in place (the live curve) stays one output
        images = ["image/png" in o.get("data", {}) for o in cell.get("outputs", [])]
        assert sum(images) <= 1, f"{name}: a cell shows {sum(images)} figures"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_committed_notebook_has_full_outputs(name):
    """The committed file shows a complete full-settings run (what a repository page renders)."""
    nb = nbformat.read(NB_DIR / name, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    counts = [c.get("execution_count") for c in code]
    assert all(counts), f"{name}: some cells were not executed; run python notebooks/execute.py"
    assert counts == sorted(counts), f"{name}: cells were run out of order"
    assert execute_mod.error_outputs(nb) == []
    assert _n_figures(nb) >= EXPECTED[name][0]
    run = nb.metadata.get("butifarra", {})
    assert run.get("quick") is False, f"{name}: committed outputs come from a --quick run"
    if SHIPPED.is_file():
        digest = hashlib.sha256(SHIPPED.read_bytes()).hexdigest()
        assert run.get("ppo_checkpoint_sha256") == digest, (
            f"{name}: outputs were made with another PPO checkpoint than the shipped one; "
            "regenerate them with: python notebooks/execute.py"
        )
