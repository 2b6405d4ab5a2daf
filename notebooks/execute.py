"""Re-execute the notebooks in place (full settings) to regenerate their committed outputs.

Usage (from the repository root, in the project's virtual environment)::

    python notebooks/execute.py                    # all notebooks, full settings, in place
    python notebooks/execute.py 02_train_ppo.ipynb # only some (names or paths)
    python notebooks/execute.py --quick --check    # the test suite's small settings; write nothing

Each notebook runs in a fresh ``python3`` kernel with ``notebooks/`` as its working directory.
A notebook is written back only when every cell ran without error, so a failed run never
leaves half-updated outputs. Timing metadata is not recorded, so re-running with the same
code and checkpoint gives a minimal diff.

The PPO notebooks use the shipped checkpoint ``agents/checkpoints/ppo_butifarra.pt``; the
script stops with a message if it is missing. ``--checkpoint PATH`` runs them against another
checkpoint instead (for development: do not commit outputs made that way).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

NB_DIR = Path(__file__).resolve().parent
ROOT = NB_DIR.parent
NOTEBOOKS = (
    "01_quickstart.ipynb",
    "02_train_ppo.ipynb",
    "03_benchmark_strategies.ipynb",
    "04_other_frameworks.ipynb",
)
SHIPPED_CHECKPOINT = ROOT / "agents" / "checkpoints" / "ppo_butifarra.pt"


def execute(path: Path, timeout: int, kernel_name: str = "python3") -> nbformat.NotebookNode:
    """Run a copy of the notebook at ``path``; returns the executed notebook (file untouched).

    Raises CellExecutionError (with the failing cell's traceback) when a cell fails. The
    kernel inherits this process's environment (BUTIFARRA_NB_QUICK, BUTIFARRA_PPO_CHECKPOINT).
    """
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(path.parent)}},
        record_timing=False,
        extra_arguments=["--IPKernelApp.log_level=ERROR"],  # no start-up chatter on stderr
    )
    client.execute()
    return nb


def error_outputs(nb: nbformat.NotebookNode) -> list[str]:
    """Tracebacks or stderr text left in the outputs (a clean notebook has none)."""
    found = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                found.append(f"cell {i}: {out.get('ename')}: {out.get('evalue')}")
            elif out.get("output_type") == "stream" and out.get("name") == "stderr":
                found.append(f"cell {i}: stderr: {out.get('text', '')[:200]!r}")
    return found


def resolve(names: list[str]) -> list[Path]:
    if not names:
        return [NB_DIR / n for n in NOTEBOOKS]
    paths = []
    for n in names:
        p = Path(n)
        if not p.is_file():
            p = NB_DIR / n
        if not p.is_file():
            raise SystemExit(f"error: no notebook {n!r} (known: {', '.join(NOTEBOOKS)})")
        paths.append(p.resolve())
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", help="notebook names or paths (default: all)")
    parser.add_argument(
        "--quick", action="store_true", help="small settings (BUTIFARRA_NB_QUICK=1)"
    )
    parser.add_argument("--check", action="store_true", help="execute only; write nothing")
    parser.add_argument("--checkpoint", help="PPO checkpoint to use instead of the shipped one")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell (default 900)")
    args = parser.parse_args(argv)

    paths = resolve(args.notebooks)
    os.environ.pop("BUTIFARRA_NB_QUICK", None)
    os.environ.pop("BUTIFARRA_PPO_CHECKPOINT", None)
    if args.quick:
        os.environ["BUTIFARRA_NB_QUICK"] = "1"
    if args.checkpoint:
        ckpt = Path(args.checkpoint).resolve()
        if not ckpt.is_file():
            raise SystemExit(f"error: checkpoint not found: {ckpt}")
        os.environ["BUTIFARRA_PPO_CHECKPOINT"] = str(ckpt)
        if not args.check:
            print(f"warning: outputs will use {ckpt}, not the shipped checkpoint", file=sys.stderr)
    elif not SHIPPED_CHECKPOINT.is_file():
        raise SystemExit(
            f"error: the shipped checkpoint {SHIPPED_CHECKPOINT.relative_to(ROOT)} is missing; "
            "the notebooks need it (or pass --checkpoint PATH for a development run)"
        )
    # The python3 kernel of this environment (not a user-wide one), with the repository
    # importable even without an editable install.
    os.environ["JUPYTER_PREFER_ENV_PATH"] = "1"
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
    )

    # Recorded in each written notebook; tests/test_notebooks.py checks that the committed
    # outputs come from a full run with the shipped checkpoint.
    ckpt_used = Path(os.environ.get("BUTIFARRA_PPO_CHECKPOINT", SHIPPED_CHECKPOINT))
    run_info = {
        "quick": bool(args.quick),
        "ppo_checkpoint": "shipped" if ckpt_used == SHIPPED_CHECKPOINT else ckpt_used.name,
        "ppo_checkpoint_sha256": hashlib.sha256(ckpt_used.read_bytes()).hexdigest(),
    }

    failed = 0
    for path in paths:
        t0 = time.perf_counter()
        try:
            nb = execute(path, args.timeout)
        except CellExecutionError as e:
            failed += 1
            print(
                f"FAILED {path.name} after {time.perf_counter() - t0:.0f}s:\n{e}", file=sys.stderr
            )
            continue
        problems = error_outputs(nb)
        status = "ok" if not problems else "ok, but: " + "; ".join(problems)
        if not args.check:
            nb.metadata["butifarra"] = run_info
            nbformat.write(nb, path)
            status += ", written"
        print(f"{path.name}: {time.perf_counter() - t0:.0f}s, {status}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
