#!/usr/bin/env bash
# The CUDA verification (doc/cuda.md, "What a GPU session verifies"): builds with CUDA (and NCCL,
# found beside it), then runs tests/gpu (every CUDA row against the CPU, the RNG bit-for-bit
# check, the device and its allocator, NCCL on 1 rank), the NCCL specs on as many ranks as
# there are GPUs (2, 4), the NCCL watchdog (2 GPUs) and bench/gpu.lua.  Without a GPU it says so in one line and exits 0: the CPU
# tests (make check) cover what needs no device.
# usage: tests/gpu/run.sh [configure options...]   (from any directory)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

if ! ls /dev/nvidia0 >/dev/null 2>&1 && ! nvidia-smi -L >/dev/null 2>&1; then
  echo "tests/gpu/run.sh: no GPU on this machine (no /dev/nvidia0, no nvidia-smi): skipped; doc/cuda.md lists what is left to verify"
  exit 0
fi

# a CUDA build: reconfigure unless this tree already is one
if ! grep -q '^#define DT_HAVE_CUDA 1' config.h 2>/dev/null; then
  scripts/bootstrap --with-cuda "$@" || { echo "tests/gpu/run.sh: the CUDA build failed"; exit 1; }
else
  make -s -j"$(nproc)" >/dev/null || { echo "tests/gpu/run.sh: the build failed"; exit 1; }
fi
if ! ./dtlua -e 'os.exit(dt.cuda.is_available() and 0 or 3)' 2>/dev/null; then
  echo "tests/gpu/run.sh: a GPU is present but dt.cuda.is_available() is false:"
  ./dtlua -e 'print(pcall(dt.ones(1).cuda, dt.ones(1)))'
  exit 1
fi
nvidia-smi -L 2>/dev/null | head -4

rc=0
echo "== tests/gpu specs (every CUDA row against the CPU, RNG bits, the device)"
./dtlua tests/run_specs.lua -o tests/busted_summary.lua --pattern=_spec tests/gpu || rc=1
echo "== op-table coverage"
./dtlua tests/run_specs.lua --pattern=_spec tests/spec/op_table_spec.lua 2>/dev/null | grep "cuda coverage" || rc=1
echo "== not yet on cuda: DTensor specs on a cuda mesh, the training demo (doc/cuda.md, Open)"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
for n in 2 4; do
  if [ "$n" -gt "${gpus:-0}" ]; then echo "tests/gpu/run.sh: NCCL on $n ranks needs $n GPUs, ${gpus:-0} present: skipped"; continue; fi
  echo "== NCCL specs, dtlua -n $n"
  DTLUA_TIMEOUT=120 timeout 600 ./dtlua -n "$n" tests/run_specs.lua -o tests/busted_summary.lua tests/gpu/nccl_spec.lua || rc=1
done
if [ "${gpus:-0}" -ge 2 ]; then
  echo "== NCCL watchdog: a recv that is never sent, DTLUA_TIMEOUT=5"
  out=$(DTLUA_TIMEOUT=5 timeout 120 ./dtlua -n 2 tests/gpu/nccl_watchdog.lua 2>&1); wrc=$?
  echo "$out"
  if [ $wrc -eq 0 ] || ! grep -q "recv: NCCL watchdog: rank 0 found the collective still running after 5 s" <<<"$out"; then
    echo "tests/gpu/run.sh: the watchdog did not end the world naming rank 0 and recv"; rc=1
  fi
else
  echo "tests/gpu/run.sh: the NCCL watchdog check needs 2 GPUs: skipped"
fi
echo "== bench/gpu.lua"
./dtlua bench/gpu.lua || rc=1
exit $rc
