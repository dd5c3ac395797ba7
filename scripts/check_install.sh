#!/usr/bin/env bash
# The install commands of docs/ci.md ("Install"), run as written: from a checkout, and a wheel
# built from it and installed into a new virtual environment where nothing may be compiled; then
# a plain pytest with a memory budget there (the shim must come with the wheel and preload).
# The git URL form is the checkout's build reached through git: it needs a host, so not run here.
# Usage: scripts/check_install.sh [PYTHON]   (default python3)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${1:-python3}"
doc="$repo/docs/ci.md"
checkout='pip install ./pytest-scalene'
build='pip wheel --no-deps -w dist ./pytest-scalene'
wheel='pip install dist/pytest_scalene-*.whl'
for command in "$checkout" "$build" "$wheel"; do  # the commands below are the documented ones
    grep -qxF "$command" "$doc" || { echo "docs/ci.md no longer says: $command" >&2; exit 1; }
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
git clone -q "$repo" pytest-scalene  # a clone: what the docs' checkout is
cp -r "$repo/native" "$repo/pytest_scalene" "$repo/CMakeLists.txt" "$repo/pyproject.toml" \
    "$repo/README.md" pytest-scalene/  # the working tree, uncommitted changes included

"$python" -m venv from-checkout
( source from-checkout/bin/activate && eval "$checkout" -q && eval "$build" -q )
ls dist/pytest_scalene-*.whl

"$python" -m venv from-wheel
cat > test_budget.py <<'PY'
import pytest


@pytest.mark.perf_budget(peak_mb=10)
def test_over():
    block = b"x" * (40 * 2**20)
    assert block


@pytest.mark.perf_budget(peak_mb=100)
def test_within():
    block = b"x" * (40 * 2**20)
    assert block
PY
(
    source from-wheel/bin/activate
    PIP_ONLY_BINARY=:all: eval "$wheel" -q
    out="$(pytest -p no:cacheprovider -q test_budget.py 2>&1 || true)"
    echo "$out" | tail -3
    echo "$out" | grep -q "1 failed, 1 passed" || { echo "install check: wrong outcomes" >&2; exit 1; }
    echo "$out" | grep -q "peak memory .* MB > budget 10 MB" || {
        echo "install check: the memory budget was not judged" >&2; exit 1; }
)
echo "install check: docs/ci.md's commands work (checkout, wheel, no compiler for the wheel)"
