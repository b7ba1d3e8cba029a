#!/usr/bin/env bash
# Builds tests/fuzz/file_parsers_fuzz.c with clang -fsanitize=fuzzer,address,undefined (with
# the io layer and what it needs, instrumented alike) and runs it for SECONDS (default 30) on
# a seed corpus of valid files written by dtlua (tests/fuzz/make_file_corpus.lua).
#   tests/fuzz/file_parsers_fuzz.sh [SECONDS] [BUILD_DIR]
# Exits 0 on a clean run, 1 on a finding (the crashing input is left in BUILD_DIR), and 77
# with one line saying why when clang or libFuzzer is missing.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-30}
out=${2:-$top/tests/fuzz/build}
cc=${CLANG:-clang}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "file parsers fuzz: skipped (no clang; Debian: apt-get install clang)"
  exit 77
fi
mkdir -p "$out/corpus" "$out/findings"
probe=$out/probe.c
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }' >"$probe"
if ! "$cc" -fsanitize=fuzzer "$probe" -o "$out/probe" 2>/dev/null; then
  echo "file parsers fuzz: skipped ($cc has no libFuzzer: -fsanitize=fuzzer does not link)"
  exit 77
fi
# the io layer and what it needs on the host: src/tensor without the CUDA device (cuda_none.c
# stands in for it, whatever the tree's build: the tree's config.h without CUDA/NCCL comes first)
mkdir -p "$out/cfg"
grep -v -E 'DT_HAVE_(CUDA|NCCL)' "$top/config.h" >"$out/cfg/config.h" 2>/dev/null || : >"$out/cfg/config.h"
srcs=(tests/fuzz/file_parsers_fuzz.c src/io/json.c src/io/npy.c src/io/safetensors.c src/io/safetensors_boxes.c
  src/io/file.c src/io/file_map.c src/base/*.c)
for f in "$top"/src/tensor/*.c; do
  case $f in */device_cuda.c) ;; *) srcs+=("src/tensor/${f##*/}") ;; esac
done
(cd "$top" && "$cc" -std=c11 -D_GNU_SOURCE -O1 -g -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -I"$out/cfg" -Isrc -I. "${srcs[@]}" -lm -lpthread -o "$out/file_parsers_fuzz") || exit 1
if [ -x "$top/dtlua" ]; then
  "$top/dtlua" "$top/tests/fuzz/make_file_corpus.lua" "$out/corpus" || exit 1
fi
echo "== file parsers fuzz (libFuzzer), ${secs} s"
cd "$out/findings" &&
  ASAN_OPTIONS=detect_leaks=1 "$out/file_parsers_fuzz" -max_total_time="$secs" -max_len=4096 -timeout=10 \
    -print_final_stats=1 "$out/corpus" 2>"$out/fuzz.log"
rc=$?
tail -n 12 "$out/fuzz.log"
[ "$rc" -eq 0 ] || { echo "file parsers fuzz: a finding (input in $out/findings; log $out/fuzz.log)"; exit 1; }
