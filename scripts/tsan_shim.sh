#!/usr/bin/env bash
# Build scripts/tsan/shim_stress.cpp (native/shim.cpp compiled in, its entry points renamed)
# with ThreadSanitizer and run it: threads allocate and free (a quarter across threads) while
# the shim is re-armed every millisecond. Any TSan report or failed invariant fails the script.
#
#   scripts/tsan_shim.sh [SECONDS]      # default 3
#
# Output: build/tsan/shim_stress. Linux with g++ and libtsan (GCC 12 tested).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${TSAN_OUT:-$root/build/tsan}
mkdir -p "$out"
"${CXX:-g++}" -std=c++17 -O1 -g -fsanitize=thread -fno-exceptions -fno-rtti \
  -fno-tree-loop-distribute-patterns -I "$root/native" "$root/scripts/tsan/shim_stress.cpp" \
  -o "$out/shim_stress" -ldl -lpthread
TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}" "$out/shim_stress" "${1:-3}"
