#!/usr/bin/env bash
# The third GPU target of issue 30: release 5's strength (+3.1 against the rule-based player
# over 20,000 duplicate deals) from scratch in at most 5 minutes of wall time on one GPU.
# A separate call from gpu_check.sh (about 7 minutes: 5 of training, the rest evaluation),
# run on the device machine from the repository root with the device tool:
#   bash benchmarks/gpu_strength.sh     # writes into $OUT (default /tmp/gpu_strength)
# The recipe is the shipped one on the torch engine with more hands per update, to feed
# the GPU (NUM_ENVS, default 4096, 64 steps each: 16x the CPU recipe's batch, the same number
# of minibatches); every other setting is train.ppo's default. Not yet run: no GPU was lent
# to the sessions that wrote it.
set -u
OUT=${OUT:-/tmp/gpu_strength}
mkdir -p "$OUT"
NUM_ENVS=${NUM_ENVS:-4096}
DEVICE=${DEVICE:-cuda}      # DEVICE=cpu MINUTES=0.2 NUM_ENVS=64 DEALS=200: a dry run on a CPU
MINUTES=${MINUTES:-5}
DEALS=${DEALS:-20000}
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
else
    PY=$PYTHON
fi
run="gpu5_$(date +%s)"
echo "== training $MINUTES minutes on $DEVICE, --num-envs $NUM_ENVS"
timeout 420 "$PY" -m train.ppo --device "$DEVICE" --no-deterministic --num-envs "$NUM_ENVS" \
    --total-minutes "$MINUTES" --eval-every 0 --no-tensorboard --no-progress \
    --run-dir "$OUT/runs" --run-name "$run" > "$OUT/train.log" 2>&1
train_status=$?
tail -n 3 "$OUT/train.log"
echo "training exit status: $train_status (124: timed out)"
[ "$train_status" -eq 0 ] || exit 1
echo "== $DEALS duplicate deals against the rule-based player (all cores)"
timeout 300 "$PY" -m butifarra.cli arena "ppo:$OUT/runs/$run/checkpoint.pt" rule -n "$DEALS" \
    --seed 0 --workers 0 --no-progress --out "$OUT/arena"
