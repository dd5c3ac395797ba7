#!/usr/bin/env bash
# Build two stress programs with ThreadSanitizer and run them; any TSan report or failed
# invariant fails the script:
# - scripts/tsan/shim_stress.cpp (native/shim.cpp compiled in, its entry points renamed):
#   threads allocate and free (a quarter across threads) while the shim is re-armed every
#   millisecond;
# - scripts/tsan/hooks_stress.cpp: the shim with the in-process hooks (native/got_hooks.cpp),
#   built as one library and loaded as the plugin loads it, installed and removed under threads
#   that allocate and copy through a library's GOT (scripts/tsan/hooks_work.c) while another
#   opens and closes copies of that library (the dlopen and dlsym wrappers).
#
#   scripts/tsan_shim.sh [SECONDS]      # default 3
#
# Output: build/tsan/. Linux with g++, gcc and libtsan (GCC 12 tested).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${TSAN_OUT:-$root/build/tsan}
mkdir -p "$out"
"${CXX:-g++}" -std=c++17 -O1 -g -fsanitize=thread -fno-exceptions -fno-rtti \
  -fno-tree-loop-distribute-patterns -I "$root/native" "$root/scripts/tsan/shim_stress.cpp" \
  -o "$out/shim_stress" -ldl -lpthread
flags=(-O1 -g -fsanitize=thread)
"${CXX:-g++}" -std=c++17 "${flags[@]}" -shared -fPIC -fno-exceptions -fno-rtti \
  -fvisibility=hidden -fno-tree-loop-distribute-patterns -ftls-model=initial-exec \
  -I "$root/native" "$root/native/shim.cpp" "$root/native/got_hooks.cpp" \
  -o "$out/libshim_tsan.so" -ldl -lpthread
copies=()
for name in work copy0 copy1 copy2; do
  "${CC:-gcc}" "${flags[@]}" -shared -fPIC "$root/scripts/tsan/hooks_work.c" \
    -o "$out/libhooks_$name.so" -ldl
  [ "$name" = work ] || copies+=("$out/libhooks_$name.so")
done
"${CXX:-g++}" -std=c++17 "${flags[@]}" -I "$root/native" "$root/scripts/tsan/hooks_stress.cpp" \
  -o "$out/hooks_stress" -ldl -lpthread
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}"
"$out/shim_stress" "${1:-3}"
"$out/hooks_stress" "${1:-3}" "$out/libshim_tsan.so" "$out/libhooks_work.so" "${copies[@]}"
