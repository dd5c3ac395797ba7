"""Which test and which function an instruction count belongs to: each test its own count,
recursion counted once in a function's figure (never above its test's), figures labelled
inclusive, and no function named where the counts cannot name one (before Python 3.12)."""

from __future__ import annotations

from pytest_scalene.instructions import callgrind_out

# A test (0x1000) calling fib (0x2000), which calls itself once: callgrind writes the deeper
# activation as 0x2000'2 (--separate-recs), its eval loop as _PyEval_EvalFrameDefault'2.
# Self costs: 5 + 100 + 5 + (300 + 585) + 10 = 1005, the total; fib's outermost call: 900.
RECURSIVE_DUMP = """# callgrind format
version: 1
desc: Trigger: Client Request: pytest-scalene#0
events: Ir
fn=(1) 0x0000000000001000
0 5
cfn=(2) _PyEval_EvalFrameDefault
calls=1 0
0 1000
fn=(2)
0 100
cfn=(3) 0x0000000000002000
calls=1 0
0 900
fn=(3)
0 5
cfn=(4) _PyEval_EvalFrameDefault'2
calls=1 0
0 895
fn=(4)
0 885
cfn=(5) 0x0000000000002000'2
calls=1 0
0 595
fn=(5)
0 10
cfn=(4)
calls=1 0
0 585
totals: 1005
"""
RECURSIVE_MAP = """1000 40 py::test_fib:/src/test_r.py
2000 40 py::fib:/src/test_r.py
"""


def test_a_recursive_function_is_counted_once_never_above_its_test(tmp_path):
    (tmp_path / "out").write_text(RECURSIVE_DUMP)
    (tmp_path / "map").write_text(RECURSIVE_MAP)
    dump = callgrind_out.parse(tmp_path / "out")
    named = callgrind_out.python_functions(dump, callgrind_out.read_perf_map(tmp_path / "map"))
    assert dump.total == 1005
    assert named == {"test_fib:/src/test_r.py": 1005, "fib:/src/test_r.py": 900}
