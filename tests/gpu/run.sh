#!/usr/bin/env bash
# The CUDA verification (doc/cuda.md, "What a GPU session verifies"): builds with CUDA, then runs
# tests/gpu (every CUDA row against the CPU, the RNG bit-for-bit check, the device and its
# allocator) and bench/gpu.lua.  Without a GPU it says so in one line and exits 0: the CPU
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
echo "== bench/gpu.lua"
./dtlua bench/gpu.lua || rc=1
exit $rc
