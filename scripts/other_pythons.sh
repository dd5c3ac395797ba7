#!/usr/bin/env bash
# The supported Pythons other than CI's own (pyproject: requires-python >= 3.10): each gets a
# fresh virtual environment under build/, the project built and installed there, and a
# representative subset of the tests (the everyday suite in every mode, options and ini keys,
# budgets, baselines, the terminal report, memory budgets through the shim, leaks, memory
# accuracy (on 3.12/3.13 pip picks numpy 2.5, which allocates array data through the RAW domain),
# Python's share under pymalloc and PYTHONMALLOC=malloc (the shim probes which one serves it),
# the line memory is charged to (the frame walk differs per version), instruction counts (on
# 3.12+ they also name the Python function that grew, recursion counted once), the code map's
# recorder (a frame-evaluation hook on 3.10/3.11, sys.monitoring on 3.12+), test selection, and
# the CPU sampler's calls in C (native/timer_calls.c, which reads each version's dicts).
# Tests marked version_independent (slow, and what they check does not vary with the Python:
# the gates' logic over the counts) run on CI's own Python only, to keep CI within its time.
# How the interpreters are found: pyenv's versions directory ($(pyenv root)/versions/X.Y.*,
# ~/.pyenv without pyenv on PATH), else pythonX.Y on PATH. An absent one is skipped with a
# message; it does not fail CI.
# Usage: scripts/other_pythons.sh [X.Y ...]   (default 3.10 3.12 3.13)
set -uo pipefail
cd "$(dirname "$0")/.."
subset=(tests/test_everyday_suite.py tests/test_ini_options.py tests/test_budgets.py
    tests/test_baseline_keep.py tests/test_terminal_report.py tests/test_memory_leaks.py
    tests/test_options.py tests/test_memory_accuracy.py tests/test_memory_attribution.py
    tests/test_instructions.py tests/test_instruction_attribution.py
    tests/test_code_seen.py tests/test_selection.py tests/test_thread_clocks.py
    tests/test_ab_robustness.py tests/test_python_share.py tests/test_timer_calls.py)
root="$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"
status=0
for version in "${@:-3.10 3.12 3.13}"; do
    for v in $version; do
        python="$(ls -d "$root"/versions/"$v".*/bin/python 2>/dev/null | sort -V | tail -1)"
        [ -x "$python" ] || python="$(command -v "python$v" || true)"
        if [ -z "$python" ]; then
            echo "Python $v: not found (no $root/versions/$v.*, no python$v on PATH): skipped"
            continue
        fi
        venv="build/venv-$v"
        echo "== Python $v: $python"
        rm -rf "$venv"
        if ! { "$python" -m venv "$venv" && "$venv/bin/pip" install -q '.[test]'; }; then
            echo "Python $v: install failed" >&2
            status=1
            continue
        fi
        "$venv/bin/pytest" -q -p no:cacheprovider -m "not version_independent" "${subset[@]}" || status=1
    done
done
exit $status
