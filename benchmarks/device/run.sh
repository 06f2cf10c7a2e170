#!/usr/bin/env bash
# The one prepared device check (≤ 8 min on one GPU): OUT=DIR bash benchmarks/device/run.sh -> $OUT/gpu_results.json
# Runs from the repository root with the machine's python3; the repo is put on PYTHONPATH.
# Without a GPU every CUDA section is skipped with its reason (the script still exits 0).
set -u
cd "$(dirname "$0")/../.."
OUT="${OUT:-./gpu_out}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/nvidia_smi.txt" 2>&1 || true
timeout 470 "$PY" benchmarks/device/gpu_checks.py --out "$OUT" 2>&1 | tee "$OUT/gpu_checks.log"
echo "exit status: ${PIPESTATUS[0]}" | tee -a "$OUT/gpu_checks.log"
