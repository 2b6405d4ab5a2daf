"""Speed and memory of the batched engine, with peers measured in the same process.

Run from the repository root::

    python benchmarks/bench_batched.py                 # everything (torch on CPU to 262k: minutes)
    python benchmarks/bench_batched.py --no-torch      # the numpy engine and peers, ~2 minutes
    python benchmarks/bench_batched.py --quick         # a smoke run (seconds)
    python benchmarks/bench_batched.py --batches 4096 --repeats 9 --no-peers

What it reports (medians of ``--repeats`` runs, because the machine is shared and noisy):

* decisions/s of :class:`~butifarra_env.envs.batched.BatchedEnv` at each batch size, one decision
  per hand per ``step`` with observations and masks returned. "env" counts only the time
  inside ``step``; "loop" adds a random legal policy picking the actions from the mask.
* peak traced memory (tracemalloc) at several batch sizes and the bytes per hand (the
  slope between the largest two sizes); memory must grow linearly with the batch.
* peers, when installed (``pip install -e .[bench]``): OpenSpiel spades, hearts and bridge
  (random play, its C++ observer tensor filled at every decision; hearts has only the
  information-state tensor) and RLCard bridge (its state dict, with ``obs``, at every
  decision), each one game at a time as those libraries run, chance moves (the deal)
  included. Our speed is printed as a ratio to theirs, measured in alternation with ours
  so the ratio holds on a busy machine.
* with CUDA, decisions/s at batch 65,536 of the numpy engine with torch actions chosen on
  the GPU and every output handed back as CUDA tensors (``BatchedEnv(device="cuda")``).
* the torch engine (:class:`~butifarra_env.envs.batched_torch.TorchBatchedEnv`), when torch is
  installed, on CPU and (when present) CUDA at ``--torch-batches`` (1k to 262k): decisions/s
  with observations and masks, actions picked on the device from the mask, unchecked
  (``check=False``, no host read) and checked (``check=True``, one host read per step); and
  memory per hand: the bytes of its state tensors, and on CUDA the peak allocated
  (``torch.cuda.max_memory_allocated``, step temporaries and tables included) per hand.
  Only the torch columns: ``--skip-numpy --no-peers`` (what benchmarks/gpu_check.sh runs).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from butifarra_env.envs.batched import BatchedEnv  # noqa: E402

Measure = Callable[[float], float]


# --------------------------------------------------------------------------- ours
def ours(batch: int, seconds: float, seed: int = 0) -> tuple[float, float]:
    """(env-only, whole-loop) decisions/s at ``batch`` over about ``seconds``."""
    eng = BatchedEnv(batch, seed=seed)
    _, mask, _ = eng.reset()
    rng = np.random.default_rng(seed)
    noise = rng.integers(1, 256, size=(8, batch, 56), dtype=np.uint8)
    for i in range(60):  # warm up until hands are spread over every phase
        _, mask, _, _, _ = eng.step((mask.view(np.uint8) * noise[i & 7]).argmax(axis=1))
    in_env = 0.0
    steps = 0
    start = time.perf_counter()
    while True:
        action = (mask.view(np.uint8) * noise[steps & 7]).argmax(axis=1)
        t = time.perf_counter()
        _, mask, _, _, _ = eng.step(action)
        in_env += time.perf_counter() - t
        steps += 1
        if steps >= 5 and time.perf_counter() - start >= seconds:
            break
    loop = time.perf_counter() - start
    return batch * steps / in_env, batch * steps / loop


def ours_cuda(batch: int, seconds: float) -> float | None:
    """Decisions/s with torch CUDA actions in and CUDA tensors out, or None without CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    eng = BatchedEnv(batch, seed=0, device="cuda")
    _, mask, _ = eng.reset()
    gen = torch.Generator(device="cuda").manual_seed(0)
    noise = torch.randint(1, 256, (8, batch, 56), device="cuda", generator=gen, dtype=torch.uint8)
    for i in range(30):
        _, mask, _, _, _ = eng.step((mask.to(torch.uint8) * noise[i & 7]).argmax(dim=1))
    torch.cuda.synchronize()
    steps = 0
    start = time.perf_counter()
    while True:
        _, mask, _, _, _ = eng.step((mask.to(torch.uint8) * noise[steps & 7]).argmax(dim=1))
        steps += 1
        if steps >= 5 and time.perf_counter() - start >= seconds:
            break
    torch.cuda.synchronize()
    return batch * steps / (time.perf_counter() - start)


def torch_devices(wanted: list[str] | None) -> list[str]:
    """The devices to time the torch engine on: ``wanted``, else cpu and cuda if present;
    none without torch."""
    try:
        import torch
    except ImportError:
        return []
    if wanted is not None:
        return wanted
    return ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


def ours_torch(
    batch: int, seconds: float, device: str, check: bool, seed: int = 0, engine: Any = None
) -> float:
    """Decisions/s of TorchBatchedEnv on ``device``: random legal actions picked on the device
    from the mask (no host round trip), observations and masks returned every step. ``engine``:
    time this one (e.g. a compiled engine, reused so it compiles once) instead of a new one."""
    import torch

    from butifarra_env.envs.batched_torch import TorchBatchedEnv

    eng = engine or TorchBatchedEnv(batch, seed=seed, device=device, check=check)
    _, mask, _ = eng.reset(seed=seed)
    gen = torch.Generator(device=device).manual_seed(seed)
    noise = torch.randint(1, 256, (8, batch, 56), device=device, generator=gen, dtype=torch.uint8)

    def sync() -> None:
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize()

    for i in range(30):  # warm up until hands are spread over every phase
        _, mask, _, _, _ = eng.step((mask.view(torch.uint8) * noise[i & 7]).argmax(dim=1))
    sync()
    steps = 0
    start = time.perf_counter()
    while True:
        _, mask, _, _, _ = eng.step((mask.view(torch.uint8) * noise[steps & 7]).argmax(dim=1))
        steps += 1
        if steps >= 5 and time.perf_counter() - start >= seconds:
            break
    sync()
    return batch * steps / (time.perf_counter() - start)


def torch_memory(batch: int, device: str, steps: int = 40) -> dict[str, float]:
    """Bytes per hand of TorchBatchedEnv's state tensors; on CUDA also the peak allocated
    while building, resetting and stepping it, per hand."""
    import torch

    from butifarra_env.envs.batched_torch import TorchBatchedEnv

    cuda = torch.device(device).type == "cuda"
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    eng = TorchBatchedEnv(batch, seed=0, device=device)
    _, mask, _ = eng.reset()
    for _ in range(steps):
        _, mask, _, _, _ = eng.step(mask.argmax(dim=1))
    eng.state()
    out = {"state_bytes_per_hand": eng.state_nbytes() / batch}
    if cuda:
        torch.cuda.synchronize()
        out["cuda_peak_bytes_per_hand"] = (torch.cuda.max_memory_allocated() - base) / batch
    del eng, mask
    return out


def memory(batches: list[int], steps: int = 40) -> dict[int, int]:
    """Peak bytes traced while building, resetting and stepping an engine of each size."""
    out = {}
    for batch in batches:
        gc.collect()
        tracemalloc.start()
        eng = BatchedEnv(batch, seed=0)
        _, mask, _ = eng.reset()
        for _ in range(steps):
            _, mask, _, _, _ = eng.step(np.argmax(mask, axis=1))
        eng.state()
        out[batch] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        del eng, mask
    return out


# --------------------------------------------------------------------------- peers
def open_spiel_peer(spec: str, list_observation: bool = False) -> Measure | None:
    """Random play of an OpenSpiel game with an observation at every decision: filled in place
    by the C++ observer, or (``list_observation``) as ``state.observation_tensor()``, the fresh
    Python list a Python user most often reads."""
    try:
        import pyspiel
        from open_spiel.python.observation import make_observation
    except ImportError:
        return None
    game = pyspiel.load_game(spec)
    observer = make_observation(game)
    if observer is None:  # hearts: information-state tensor only
        observer = make_observation(game, pyspiel.IIGObservationType(perfect_recall=True))

    def run(seconds: float) -> float:
        rng = random.Random(0)
        decisions = 0
        start = time.perf_counter()
        while decisions == 0 or time.perf_counter() - start < seconds:
            state = game.new_initial_state()
            while not state.is_terminal():
                if state.is_chance_node():
                    outcomes, probs = zip(*state.chance_outcomes(), strict=True)
                    state.apply_action(rng.choices(outcomes, probs)[0])
                    continue
                if list_observation:
                    state.observation_tensor(state.current_player())
                else:
                    observer.set_from(state, state.current_player())
                state.apply_action(rng.choice(state.legal_actions()))
                decisions += 1
        return decisions / (time.perf_counter() - start)

    return run


def rlcard_bridge_peer() -> Measure | None:
    try:
        import rlcard
    except ImportError:
        return None
    env = rlcard.make("bridge", config={"seed": 0})

    def run(seconds: float) -> float:
        rng = random.Random(0)
        decisions = 0
        start = time.perf_counter()
        while decisions == 0 or time.perf_counter() - start < seconds:
            state, _ = env.reset()
            while not env.is_over():
                state, _ = env.step(rng.choice(list(state["legal_actions"])))
                decisions += 1
        return decisions / (time.perf_counter() - start)

    return run


PEERS: dict[str, Callable[[], Measure | None]] = {
    "open_spiel spades": lambda: open_spiel_peer("spades"),
    "open_spiel hearts": lambda: open_spiel_peer("hearts"),
    "open_spiel bridge": lambda: open_spiel_peer("bridge(use_double_dummy_result=false)"),
    "rlcard bridge": rlcard_bridge_peer,
}


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batches", type=int, nargs="+", default=[1, 64, 1024, 4096])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seconds", type=float, default=1.0, help="length of one timed run")
    p.add_argument("--memory-batches", type=int, nargs="+", default=[1, 64, 1024, 4096, 16384])
    p.add_argument("--cuda-batch", type=int, default=65536)
    p.add_argument("--no-peers", action="store_true")
    p.add_argument(
        "--torch-batches", type=int, nargs="+", default=[1024, 4096, 16384, 65536, 262144]
    )
    p.add_argument(
        "--torch-devices", nargs="+", help="devices for the torch engine (default: cpu, cuda)"
    )
    p.add_argument("--torch-threads", type=int, help="torch.set_num_threads for torch on CPU")
    p.add_argument("--no-torch", action="store_true", help="skip the torch engine")
    p.add_argument(
        "--torch-compile",
        action="store_true",
        help="add a 'compiled' column: checked, TorchBatchedEnv(compile=True); compile time apart",
    )
    p.add_argument(
        "--skip-numpy", action="store_true", help="skip the numpy engine (and its CUDA run)"
    )
    p.add_argument("--quick", action="store_true", help="1 repeat of 0.2 s, small memory runs")
    p.add_argument("--json", type=Path, help="also write the figures to this file")
    args = p.parse_args(argv)
    if args.quick:
        args.repeats, args.seconds, args.memory_batches = 1, 0.2, [1, 64, 1024]
        args.torch_batches = [b for b in args.torch_batches if b <= 4096] or [1024]
    if args.skip_numpy:
        args.batches, args.memory_batches = [], []

    peers: dict[str, Measure] = {}
    if not args.no_peers:
        for name, make in PEERS.items():
            try:
                measure = make()
            except Exception as err:  # a peer that fails to build is skipped, not fatal
                print(f"peer {name}: skipped ({type(err).__name__}: {err})")
                continue
            if measure is None:
                print(f"peer {name}: not installed, skipped (pip install -e .[bench])")
            else:
                peers[name] = measure

    env_runs: dict[int, list[float]] = {b: [] for b in args.batches}
    loop_runs: dict[int, list[float]] = {b: [] for b in args.batches}
    peer_runs: dict[str, list[float]] = {name: [] for name in peers}
    for rep in range(args.repeats):  # alternate ours and peers so load hits both alike
        for b in args.batches:
            env, loop = ours(b, args.seconds, seed=rep)
            env_runs[b].append(env)
            loop_runs[b].append(loop)
        for name, measure in peers.items():
            peer_runs[name].append(measure(args.seconds))
        print(f"repeat {rep + 1}/{args.repeats} done", file=sys.stderr)

    med = statistics.median
    results: dict[str, Any] = {"repeats": args.repeats, "seconds_per_run": args.seconds}
    results["ours"] = {}
    if args.batches:
        print(f"\nBatchedEnv decisions/s with obs + mask (median of {args.repeats} runs)")
        print(f"{'batch':>8} {'env':>14} {'loop':>14}   runs (env, M/s)")
    for b in args.batches:
        runs_text = ", ".join(f"{x / 1e6:.2f}" for x in env_runs[b])
        print(f"{b:>8} {med(env_runs[b]):>14,.0f} {med(loop_runs[b]):>14,.0f}   {runs_text}")
        results["ours"][b] = {"env": med(env_runs[b]), "loop": med(loop_runs[b])}

    if peers and args.batches:
        top = max(args.batches)
        print(
            f"\npeers, one game at a time (median of {args.repeats} runs); ratio = ours / "
            f"theirs, per repeat then median"
        )
        print(f"{'peer':<20} {'decisions/s':>12} {'x ours@1':>9} {f'x ours@{top}':>11}")
        results["peers"] = {}
        for name, runs in peer_runs.items():
            r1 = med(
                [o / t for o, t in zip(env_runs.get(1, [np.nan] * len(runs)), runs, strict=True)]
            )
            rt = med([o / t for o, t in zip(env_runs[top], runs, strict=True)])
            print(f"{name:<20} {med(runs):>12,.0f} {r1:>9.2f} {rt:>11.1f}")
            results["peers"][name] = {
                "decisions_per_s": med(runs),
                "ratio_batch1": r1,
                f"ratio_batch{top}": rt,
            }

    cuda = None
    if not args.skip_numpy:
        cuda = ours_cuda(args.cuda_batch, args.seconds * 3)
        if cuda is None:
            print("\nBatchedEnv with CUDA tensors: CUDA not available here, skipped")
        else:
            print(
                f"\nBatchedEnv (numpy) with CUDA tensors in/out, batch {args.cuda_batch}: "
                f"{cuda:,.0f} decisions/s"
            )
    results["cuda"] = None if cuda is None else {"batch": args.cuda_batch, "decisions": cuda}

    if not args.no_torch:
        results["torch"] = run_torch(args)

    mem = memory(args.memory_batches) if args.memory_batches else {}
    sizes = sorted(mem)
    if sizes:
        print("\nBatchedEnv peak traced memory (construct, reset, 40 steps, state)")
        print(f"{'batch':>8} {'peak MiB':>10} {'bytes/hand':>11}")
    for b in sizes:
        print(f"{b:>8} {mem[b] / 2**20:>10.2f} {mem[b] / b:>11,.0f}")
    if len(sizes) >= 2:
        a, b = sizes[-2], sizes[-1]
        slope = (mem[b] - mem[a]) / (b - a)
        print(f"marginal bytes per hand ({a} -> {b}): {slope:,.0f}")
        results["memory"] = {"peak_bytes": mem, "bytes_per_hand": slope}
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return results


def run_torch(args: argparse.Namespace) -> dict[str, Any]:
    """The torch engine's columns: decisions/s (unchecked, checked) and memory per hand at
    each of ``--torch-batches`` on each device."""
    devices = torch_devices(args.torch_devices)
    if not devices:
        print("\nTorchBatchedEnv: torch not installed, skipped (pip install -e .[train])")
        return {}
    import torch

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    med = statistics.median
    out: dict[str, Any] = {}
    for device in devices:
        if torch.device(device).type == "cuda" and not torch.cuda.is_available():
            print(f"\nTorchBatchedEnv on {device}: CUDA not available here, skipped")
            continue
        name = torch.cuda.get_device_name(device) if device.startswith("cuda") else "cpu"
        threads = f", {torch.get_num_threads()} threads" if device == "cpu" else ""
        print(
            f"\nTorchBatchedEnv on {device} ({name}{threads}) decisions/s with obs + mask "
            f"(median of {args.repeats} runs)"
        )
        extra = f" {'compiled':>14} {'compile s':>10}" if args.torch_compile else ""
        print(
            f"{'batch':>8} {'unchecked':>14} {'checked':>14}{extra} {'state B/hand':>13} "
            f"{'peak B/hand':>12}"
        )
        out[device] = {}
        for b in args.torch_batches:
            free = [ours_torch(b, args.seconds, device, False, rep) for rep in range(args.repeats)]
            checked = [
                ours_torch(b, args.seconds, device, True, rep) for rep in range(args.repeats)
            ]
            row: dict[str, Any] = {"unchecked": med(free), "checked": med(checked)}
            text = ""
            if args.torch_compile:
                row.update(compiled_torch(b, args.seconds, device, args.repeats))
                rate = row["compiled"]
                rate_text = "fell back" if rate is None else f"{rate:,.0f}"
                text = f" {rate_text:>14} {row['compile_seconds']:>10.1f}"
            mem = torch_memory(b, device)
            peak = mem.get("cuda_peak_bytes_per_hand")
            peak_text = "-" if peak is None else f"{peak:,.0f}"
            print(
                f"{b:>8} {med(free):>14,.0f} {med(checked):>14,.0f}{text} "
                f"{mem['state_bytes_per_hand']:>13,.0f} {peak_text:>12}",
                flush=True,
            )
            out[device][b] = {**row, **mem}
    return out


def compiled_torch(batch: int, seconds: float, device: str, repeats: int) -> dict[str, Any]:
    """The compiled engine's decisions/s (median of ``repeats``, one engine compiled once) and
    the seconds its first step took (the compilation); ``compiled`` is None if it fell back."""
    import torch

    from butifarra_env.envs.batched_torch import TorchBatchedEnv

    eng = TorchBatchedEnv(batch, seed=0, device=device, compile=True)
    _, mask, _ = eng.reset()
    start = time.perf_counter()
    eng.step(mask.argmax(dim=1))
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
    took = time.perf_counter() - start
    if not eng.compile:
        return {"compiled": None, "compile_seconds": took}
    rates = [ours_torch(batch, seconds, device, True, rep, engine=eng) for rep in range(repeats)]
    return {"compiled": statistics.median(rates), "compile_seconds": took}


if __name__ == "__main__":
    main()
