#!/usr/bin/env bash
# The torch engine on a CUDA machine, in one short run (about 2-3 minutes on an H200):
#   1. the environment: Python, numpy, pytest, torch and the CUDA device (stops if none);
#   2. the differential test of tests/test_batched_torch.py on CUDA (its CUDA cases: the
#      quick ones and the 200k-decision one), against the numpy engine;
#   3. bench_batched.py's torch-CUDA columns at batch 65,536 and 262,144 (decisions/s
#      unchecked and checked, bytes per hand);
#   4. PPO on the device: the CUDA tests of tests/test_rule_torch.py and
#      tests/test_ppo_device.py, then a ~45 s `python -m train.ppo --engine torch --device
#      cuda` run (the shipped recipe otherwise) printing learner decisions trained/s.
# It installs nothing. Output goes to $OUT (default /tmp/gpu_check): gpu_check.log,
# environment.json, junit.xml, bench.json. Run from anywhere: benchmarks/gpu_check.sh
# PYTHON=/path/to/python picks the interpreter (default: .venv/bin/python, else python3).
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/gpu_check}"
export OUT
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_check.log") 2>&1

PY="${PYTHON:-}"
if [ -z "$PY" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
status=0
start=$(date +%s)

echo "== 1/4 environment ($PY)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null \
    || echo "nvidia-smi: not found"
"$PY" benchmarks/gpu_check.py
env_status=$?
if [ "$env_status" -ne 0 ]; then
    echo "gpu_check: stopping, environment status $env_status (see above)"
    exit "$env_status"
fi

echo "== 2/4 differential test on CUDA (torch engine == numpy engine, step for step)"
timeout 170 "$PY" -m pytest -p no:xdist -p no:cacheprovider -o addopts="" -q \
    --durations=10 --junitxml "$OUT/junit.xml" tests/test_batched_torch.py -k cuda
test_status=$?
echo "differential test exit status: $test_status (124: timed out)"
[ "$test_status" -eq 0 ] || status=1

echo "== 3/4 torch-CUDA decisions/s and memory per hand"
timeout 120 "$PY" benchmarks/bench_batched.py --skip-numpy --no-peers --torch-devices cuda \
    --torch-batches 65536 262144 --repeats 3 --seconds 1 --json "$OUT/bench.json"
bench_status=$?
echo "bench exit status: $bench_status (124: timed out)"
[ "$bench_status" -eq 0 ] || status=1

echo "== 4/4 PPO on the device (rule-based player and trainer tests on CUDA, a short run)"
timeout 90 "$PY" -m pytest -p no:xdist -p no:cacheprovider -o addopts="" -q \
    --junitxml "$OUT/junit_ppo.xml" tests/test_rule_torch.py tests/test_ppo_device.py -k cuda
ppo_test_status=$?
echo "PPO device tests exit status: $ppo_test_status (124: timed out)"
[ "$ppo_test_status" -eq 0 ] || status=1
timeout 120 "$PY" -m train.ppo --engine torch --device cuda --no-deterministic \
    --total-minutes 0.75 --eval-every 0 --milestone-minutes --no-tensorboard --no-progress \
    --run-dir "$OUT/ppo_runs" --run-name "gpu_check_$(date +%s)" > "$OUT/ppo_train.log" 2>&1
train_status=$?
tail -n 3 "$OUT/ppo_train.log"
"$PY" - "$OUT/ppo_runs" <<'PYEOF'
import csv, statistics, sys
from pathlib import Path
files = sorted(Path(sys.argv[1]).glob("*/metrics.csv"))
rows = list(csv.DictReader(files[-1].open()))[2:] if files else []
rates = [float(r["batch_transitions"] or 0) * float(r["steps_per_second"]) / (256 * 64) for r in rows]
print(f"PPO on cuda: {len(rows) + 2 if files else 0} updates, median learner decisions "
      f"trained/s {statistics.median(rates):,.0f} (warm-up of 2 updates left out)" if rates else
      "PPO on cuda: no update finished")
PYEOF
echo "PPO training run exit status: $train_status (124: timed out)"
[ "$train_status" -eq 0 ] || status=1

echo "== done in $(( $(date +%s) - start )) s, status $status; files in $OUT"
exit "$status"
