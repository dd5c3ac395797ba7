#!/usr/bin/env bash
# Build the allocator shim and the _native extension with AddressSanitizer and run the memory
# tests against them (docs/reliability.md, "AddressSanitizer"). Linux, glibc, GCC's libasan
# (tested with GCC 12: the __interceptor_* entry points differ in newer LLVM runtimes).
#
#   scripts/asan_shim.sh                 # build, then run tests/test_shim_*.py test_memory_*.py
#   scripts/asan_shim.sh -k leak -x      # extra arguments go to pytest
#   scripts/asan_shim.sh tests/           # test paths replace the memory tests
#
# - build/asan/: a separate CMake build of _native with -fsanitize=address, and the shim built
#   from scripts/asan/shim_asan.cpp: native/shim.cpp unchanged, behind entry points that stay
#   uninstrumented until ASan is up, with its glibc calls sent to ASan's allocator (see there).
# - build/asan/venv: a venv whose pytest_scalene is a copy of the sources with these two
#   libraries (the editable install's import hook would load the normal build). It sees .venv's
#   packages through a .pth line; python -P keeps the source tree off sys.path.
# - pytest runs with LD_PRELOAD=libasan (an ASan extension needs the runtime first). When the
#   plugin re-executes with the shim (LD_PRELOAD=shim:libasan), the shim comes first, so it
#   sees every allocation, and hands each to ASan: every block the program allocates gets
#   redzones and a quarantine, and ASan also checks the shim's and the extension's own code.
# - ASAN_OPTIONS: verify_asan_link_order=0 (the shim precedes libasan on purpose),
#   detect_leaks=0 (CPython keeps its objects until exit: LeakSanitizer would report them all),
#   allocator_may_return_null=1 (tests ask for impossible sizes and expect NULL/ENOMEM, as from
#   glibc), alloc_dealloc_mismatch=0 (new/delete may reach ASan through the shim as
#   malloc/free), abort_on_error=1 and halt_on_error=1 so that a finding kills the process, and
#   log_path: every report is also written to build/asan/logs/, and any report fails the script.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
python=${PYTHON:-$root/.venv/bin/python}
build=$root/build/asan
cxx=${CXX:-g++}
flags=(-fsanitize=address -fno-omit-frame-pointer -g -O1)

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE="$python" \
  -Dpybind11_DIR="$("$python" -m pybind11 --cmakedir)" \
  -DCMAKE_CXX_FLAGS="${flags[*]}" -DCMAKE_MODULE_LINKER_FLAGS="-fsanitize=address" >/dev/null
cmake --build "$build" --target _native -j2 >/dev/null
# The shim's own flags (CMakeLists.txt) and --as-needed: only libasan and libc, no C++ runtime.
"$cxx" "${flags[@]}" -std=c++17 -shared -fPIC -fno-exceptions -fno-rtti -fvisibility=hidden \
  -fno-tree-loop-distribute-patterns -ftls-model=initial-exec -I native \
  scripts/asan/shim_asan.cpp native/got_hooks.cpp -o "$build/libpytest_scalene_shim.so" \
  -Wl,--as-needed -ldl -lpthread

pkg=$build/pkg/pytest_scalene
rm -rf "$build/pkg" && mkdir -p "$pkg"
cp -r pytest_scalene/. "$pkg/"  # sources, templates, subprocesses/site/
find "$pkg" \( -name '*.so' -o -name __pycache__ \) -prune -exec rm -rf {} +
cp "$build"/_native*.so "$build/libpytest_scalene_shim.so" "$pkg/"
[ -x "$build/venv/bin/python" ] || "$python" -m venv --without-pip "$build/venv"
site=$("$build/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
deps=$("$python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
printf '%s\n%s\n' "$build/pkg" "$deps" >"$site/asan_deps.pth"

export ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0:abort_on_error=1:halt_on_error=1:allocator_may_return_null=1:alloc_dealloc_mismatch=0
echo "ASan shim: $(readelf -d "$pkg/libpytest_scalene_shim.so" | grep -o 'libasan[^]]*')"
"$build/venv/bin/python" -P - <<'EOF'
import pytest_scalene._native as n
from pytest_scalene.core import runenv
assert "build/asan/pkg" in n.__file__, n.__file__
print("extension:", n.__file__, "shim:", runenv.shim_path())
EOF
# Canaries: ASan must really check this build. A block malloc'd through the shim is ASan's
# (its end is a redzone); then poison the shim's API table: the extension's (instrumented)
# read of it must be reported and abort the process.
canary=$(cd /tmp && LD_PRELOAD=$pkg/libpytest_scalene_shim.so "$build/venv/bin/python" -P -c '
import ctypes
lib = ctypes.CDLL(None)
lib.malloc.restype = ctypes.c_void_p
block = lib.malloc(16)
assert lib.__asan_address_is_poisoned(ctypes.c_void_p(block + 16)) == 1, "no redzone"
lib.free(ctypes.c_void_p(block))
lib.pytest_scalene_shim_api.restype = ctypes.c_void_p
lib.__asan_poison_memory_region(ctypes.c_void_p(lib.pytest_scalene_shim_api()), 8)
from pytest_scalene import _native
print("NOT CAUGHT", _native.shim_loaded())
' 2>&1 || true)
if ! grep -q "AddressSanitizer: use-after-poison" <<<"$canary"; then
  echo "ASan is not checking the build (canary not caught):" >&2
  echo "$canary" | tail -5 >&2
  exit 3
fi
echo "canaries: blocks have redzones, a poisoned read is reported"
# The memory tests, unless test paths are given.
if ! printf '%s\n' "$@" | grep -q '^tests/'; then
  set -- tests/test_shim_api.py tests/test_shim_preload.py tests/test_shim_robustness.py \
    tests/test_memory_accuracy.py tests/test_memory_leaks.py tests/test_memory_timeline.py \
    tests/test_in_process_hooks.py "$@"
fi
# Reports go to files too: a finding in a child whose crash a test expects is not lost.
rm -rf "$build/logs" && mkdir -p "$build/logs"
export ASAN_OPTIONS=$ASAN_OPTIONS:log_path=$build/logs/asan
status=0
LD_PRELOAD=$("$cxx" -print-file-name=libasan.so) \
  "$build/venv/bin/python" -P -m pytest -p no:cacheprovider "$@" || status=$?
if compgen -G "$build/logs/asan*" >/dev/null; then
  echo "AddressSanitizer reports (build/asan/logs):" >&2
  cat "$build"/logs/asan* >&2
  exit 1
fi
echo "no AddressSanitizer report"
exit "$status"
