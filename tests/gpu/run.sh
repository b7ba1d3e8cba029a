#!/usr/bin/env bash
# GPU verification (issue: CUDA tensors, cuBLAS and NCCL).  A minimal runner created on the
# NCCL branch: builds with CUDA/NCCL and runs the NCCL specs; the cuda branch's runner (op
# specs on "cuda", RNG, training demo, bench/gpu.lua) extends it.  Without a GPU it says so
# and exits 0 after the build.
set -uo pipefail
cd "$(dirname "$0")/../.."
scripts/bootstrap --with-nccl || exit 1
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${gpus:-0}" -lt 1 ]; then
  echo "tests/gpu/run.sh: no GPU (nvidia-smi lists none): built with NCCL, nothing run"
  exit 0
fi
status=0
spec="tests/run_specs.lua -o tests/busted_summary.lua tests/gpu/nccl_spec.lua"
for n in 1 2 4; do
  if [ "$n" -gt "$gpus" ]; then echo "tests/gpu/run.sh: $n ranks need $n GPUs, $gpus present: skipped"; continue; fi
  echo "== NCCL specs, dtlua -n $n"
  DTLUA_TIMEOUT=120 timeout 600 ./dtlua -n "$n" $spec || status=1
done
if [ "$gpus" -ge 2 ]; then
  echo "== NCCL watchdog: a recv that is never sent, DTLUA_TIMEOUT=5"
  out=$(DTLUA_TIMEOUT=5 timeout 120 ./dtlua -n 2 tests/gpu/nccl_watchdog.lua 2>&1); rc=$?
  echo "$out"
  if [ $rc -eq 0 ] || ! grep -q "recv: NCCL watchdog: rank 0 found the collective still running after 5 s" <<<"$out"; then
    echo "tests/gpu/run.sh: the watchdog did not end the world naming rank 0 and recv"; status=1
  fi
else
  echo "tests/gpu/run.sh: the watchdog check needs 2 GPUs: skipped"
fi
exit $status
