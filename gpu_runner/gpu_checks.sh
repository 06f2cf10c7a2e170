#!/usr/bin/env bash
# One prepared GPU check (≤ 5 min): OUT=DIR bash gpu_runner/gpu_checks.sh -> $OUT/gpu_results.json
# Runs from the repository root with the machine's python3; the repo is put on PYTHONPATH.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-./gpu_out}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/nvidia_smi.txt" 2>&1 || true
timeout 290 "$PY" -m gpu_runner.gpu_checks --out "$OUT" 2>&1 | tee "$OUT/gpu_checks.log"
echo "exit status: ${PIPESTATUS[0]}" | tee -a "$OUT/gpu_checks.log"
