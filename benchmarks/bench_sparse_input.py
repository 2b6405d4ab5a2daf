"""Would a sparse first layer speed up the PPO update? The trunk input's density, and its first
layer as a dense and as a sparse (CSR, COO) product.

    python benchmarks/bench_sparse_input.py [--rows 1800] [--hidden 128 256] [--repeats 9]
        [--hands 600] [--seed 0] [--threads 1] [--checkpoint PATH]

The trunk input (:meth:`agents.ppo_net.ActorCritic.inputs`: the scaled suit-canonical
observation, the mask and the card features) of the positions met in ``--hands`` hands of the
batched engine (:func:`benchmarks.bench_rule_torch.positions`: rule-based and random moves),
as the network of ``--checkpoint`` (release 12 by default) reads them. Printed: the share of
non-zero entries, then for ``--rows`` rows (a minibatch of the recipe is about 1,800
decisions) and a first layer ``--hidden`` wide, the medians of
``--repeats`` timed calls of what the update computes with that layer: the forward product
and the weight gradient (the first layer needs no input gradient), each

* **dense**: ``x @ W.T`` and ``gy.T @ x``;
* **CSR**: ``x`` and ``x.T`` in compressed sparse rows, built per minibatch (its own
  figure): the minibatches are drawn afresh every epoch, and a CSR tensor cannot be sliced
  into them (torch 2.13 has no ``index_select`` for it on the CPU);
* **COO**: ``torch.sparse.mm`` on coordinate tensors, likewise.

The sparse products are checked against the dense ones first (a mismatch stops the run).
``--threads`` sets torch's CPU threads (1: the figures are per core, as the trainer runs).
Timing lives here, not in the tests.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents import DEFAULT_PPO_CHECKPOINT  # noqa: E402
from agents.ppo_net import load_checkpoint, model_from_checkpoint  # noqa: E402
from benchmarks.bench_rule_torch import positions, timed  # noqa: E402


def median_ms(run: Callable[[], object], repeats: int) -> float:
    """Median milliseconds of ``repeats`` calls of ``run`` after one warm-up (CPU only)."""
    return 1000 * statistics.median(timed(run, repeats, sync=lambda: None))


def csr_pair(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` and its transpose in compressed sparse rows."""
    return x.to_sparse_csr(), x.t().contiguous().to_sparse_csr()


def coo_pair(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` and its transpose as coalesced coordinate tensors."""
    x_coo = x.to_sparse().coalesce()
    return x_coo, x_coo.t().coalesce()


def measure(x: torch.Tensor, hidden: int, repeats: int) -> str:
    """The first layer's products on ``x``, ``hidden`` wide: dense, CSR and COO (checked
    against the dense ones), as milliseconds per call, and the sparse tensors' build time."""
    w = torch.randn(hidden, x.shape[1]) / x.shape[1] ** 0.5
    gy = torch.randn(len(x), hidden)
    x_csr, xt_csr = csr_pair(x)
    x_coo, xt_coo = coo_pair(x)
    products: dict[str, Callable[[], tuple[torch.Tensor, torch.Tensor]]] = {
        "dense": lambda: (x @ w.t(), gy.t() @ x),
        "CSR": lambda: (x_csr @ w.t(), (xt_csr @ gy).t()),
        "COO": lambda: (torch.sparse.mm(x_coo, w.t()), torch.sparse.mm(xt_coo, gy).t()),
    }
    dense = products["dense"]()
    for name, run in products.items():
        for want, have in zip(dense, run(), strict=True):
            if not torch.allclose(want, have, rtol=1e-4, atol=1e-4):
                raise SystemExit(f"{name} product differs from the dense one")
    build = {"CSR": csr_pair, "COO": coo_pair}
    figures = []
    for name, run in products.items():
        figure = f"{name} {median_ms(run, repeats):.1f} ms"
        if name in build:
            figure += f" (+{median_ms(partial(build[name], x), repeats):.1f} ms to build)"
        figures.append(figure)
    return ", ".join(figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rows", type=int, default=1800, help="rows per product (a minibatch of the recipe)"
    )
    parser.add_argument("--hidden", type=int, nargs="+", default=[128, 256], help="layer widths")
    parser.add_argument("--repeats", type=int, default=9, help="timed calls (median reported)")
    parser.add_argument("--hands", type=int, default=600, help="hands to collect positions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--checkpoint", default=str(DEFAULT_PPO_CHECKPOINT))
    args = parser.parse_args()
    if min(args.rows, args.repeats, args.hands, args.threads, *args.hidden) < 1:
        parser.error("--rows, --hidden, --repeats, --hands and --threads must be >= 1")
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    torch.manual_seed(args.seed)

    model = model_from_checkpoint(load_checkpoint(args.checkpoint), args.checkpoint)
    obs, mask = positions(args.hands, args.seed)
    with torch.no_grad():
        x_all = model.inputs(torch.from_numpy(obs), torch.from_numpy(mask)).x
    if len(x_all) < args.rows:
        parser.error(f"--rows {args.rows}: only {len(x_all)} positions; raise --hands")
    x = x_all[torch.randperm(len(x_all))[: args.rows]].contiguous()
    nonzero = (x_all != 0).sum(1).float()
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(
        f"machine: {platform.processor() or platform.machine()}, python "
        f"{platform.python_version()}, torch {torch.__version__} ({args.threads} CPU threads)"
        + (f"; load average {load[0]:.2f}" if load else "")
    )
    print(
        f"trunk input: {len(x_all):,} positions x {x_all.shape[1]} columns, "
        f"{100 * nonzero.mean().item() / x_all.shape[1]:.1f}% non-zero "
        f"(median {nonzero.median().item():.0f} per row)"
    )

    for hidden in args.hidden:
        print(
            f"{args.rows} x {x.shape[1]} x {hidden}, forward + weight gradient: "
            f"{measure(x, hidden, args.repeats)} (medians of {args.repeats})"
        )


if __name__ == "__main__":
    main()
