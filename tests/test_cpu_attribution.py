"""Where the CPU sampler charges time, and how it splits it (sampling/cpu_sampler.py).

CPU goes to the line that ran, never to a `def` line: on 3.11+ a function's entry RESUME runs
the pending timer signal with the frame's line on the `def`, so every small function called in
a loop used to collect samples on its `def` line. The main thread's Python/native split is
checked on synthetic signal delays."""

from __future__ import annotations

import dis
import resource
import sys
from types import SimpleNamespace

import pytest
from conftest import load_module

from pytest_scalene.core.model import TestProfile
from pytest_scalene.sampling.cpu_sampler import CpuSampler
from pytest_scalene.sampling.scope import CodeScope, where_it_ran
from pytest_scalene.sampling.signal_delay import SignalDelay

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="RESUME is 3.11+")

CALLS = """
class Box:
    def __init__(self, x):  # DEF
        self.x = x

    def __del__(self):  # DEF
        pass


def tiny(x):  # DEF
    return x + 1


def calls(seconds):
    total, end = 0, time.thread_time() + seconds
    while time.thread_time() < end:
        for i in range(10_000):
            total += tiny(i)  # CALLER
            box = Box(i)  # CALLER
    return total, box
"""


def test_small_functions_called_in_a_loop_charge_their_callers_not_their_def_lines(tmp_path):
    (tmp_path / "calls.py").write_text("import time\n" + CALLS)
    module = load_module("calls", tmp_path / "calls.py")
    source = (tmp_path / "calls.py").read_text().splitlines()
    marked = {tag: {n for n, t in enumerate(source, 1) if tag in t} for tag in ("DEF", "CALLER")}

    profile = TestProfile("calls")
    sampler = CpuSampler(CodeScope(tmp_path), 0.01)
    sampler.start(profile)
    try:
        module.calls(0.6)  # ~60 samples; before the fix the three defs took ~45% of them
    finally:
        sampler.stop()
        sampler.close()  # the signal back: stop() keeps it for a next test
    by_line = {key.line: stats.cpu_s for key, stats in profile.lines.items()}
    total = sum(by_line.values())
    on_defs = sum(by_line.get(n, 0.0) for n in marked["DEF"])
    on_callers = sum(by_line.get(n, 0.0) for n in marked["CALLER"])
    assert total > 0.3, by_line
    assert on_defs <= 0.02 * total, by_line
    assert on_callers >= 0.5 * total, by_line


DECORATED = """
def deco(function):
    return function


@deco
def helper(x):  # DEF
    # a comment, no instruction
    return x + 1  # BODY


def caller():
    return helper(1)  # CALLER
"""


def _load(tmp_path, name: str, source: str):
    (tmp_path / f"{name}.py").write_text(source)
    module = load_module(name, tmp_path / f"{name}.py")
    lines = source.splitlines()
    return module, {tag: n for n, t in enumerate(lines, 1) for tag in t.split("# ")[1:]}


def _at_entry(code, back=None) -> SimpleNamespace:
    """A frame of `code` stopped on its entry RESUME, as the signal handler sees it."""
    resume = next(i.offset for i in dis.get_instructions(code) if i.opname == "RESUME")
    return SimpleNamespace(f_code=code, f_lasti=resume, f_back=back, f_lineno=code.co_firstlineno)


def test_a_sample_at_a_function_entry_goes_to_its_caller_else_its_first_body_line(tmp_path):
    module, at = _load(tmp_path, "entry", DECORATED)
    scope = CodeScope(tmp_path)
    code, calling = module.helper.__code__, module.caller.__code__
    caller = SimpleNamespace(f_code=calling, f_lasti=-1, f_back=None, f_lineno=at["CALLER"])
    key, _first = where_it_ran(scope, _at_entry(code, back=caller))
    assert (key.line, key.function) == (at["CALLER"], "caller")
    # Called from outside profiled code (pytest calling a test): past the decorator and the
    # comment, the first line with instructions.
    key, first = where_it_ran(
        scope,
        _at_entry(
            code, back=SimpleNamespace(f_code=dis.dis.__code__, f_lasti=-1, f_back=None, f_lineno=1)
        ),
    )
    assert (key.line, key.function, first) == (at["BODY"], "helper", code.co_firstlineno)


# -- the main thread's Python/native split, on synthetic delays ----------------------------------
def python_shares(intervals: list[tuple[float, float]]) -> list[float]:
    """The estimator's Python share of each interval, given (seconds before the timer expired,
    seconds from the expiry to the handler) per interval; the first interval follows a prompt
    handler (as after start())."""
    split = SignalDelay(0.01, "cpu")
    shares, clock = [], 0.0
    for before_expiry, delay in intervals:
        split.timer_clock, split.until_expiry = clock, before_expiry
        clock += before_expiry + delay
        shares.append(split.python_share(before_expiry + delay, clock))
    return shares


def test_the_stretch_before_the_expiry_is_split_by_both_ends_of_the_interval():
    # prompt ends: all Python; a delayed end (native held the signal back 8 ms): the delay is
    # native and the stretch before the expiry, between a prompt and a delayed end, half Python;
    # then the next interval, after the delayed end and ending prompt, half again.
    shares = python_shares([(0.01, 0.001), (0.01, 0.008), (0.01, 0.001), (0.01, 0.009)])
    assert shares == pytest.approx([1.0, 0.005 / 0.018, (0.005 + 0.001) / 0.011, 0.005 / 0.019])


def test_a_stamped_delivery_splits_the_kernels_lag_from_what_held_the_handler():
    # Each interval: 10 ms to the expiry, 8 ms after it; of those 8 ms, the handler was held
    # after the delivery (the stamp) 0.2 ms (the kernel's lag before: bytecode ran), or 6 ms.
    split = SignalDelay(0.01, "cpu")
    split.restart(0.0, 0.01)
    assert split.python_share(0.018, 0.018, held=0.0002) == 1.0  # a lag, not native
    split.restart(0.0, 0.01)
    # held 6 ms: native; the 12 ms before the delivery, between a prompt and a late end, half
    assert split.python_share(0.018, 0.018, held=0.006) == pytest.approx(0.006 / 0.018)
    split.restart(0.0, 0.01)
    assert split.python_share(0.018, 0.018) == pytest.approx(0.005 / 0.018)  # no stamp: 8 ms late


def test_back_to_back_native_calls_are_all_native():
    shares = python_shares([(0.01, 0.009), (0.01, 0.009), (0.01, 0.008)])
    assert shares[1:] == pytest.approx([0.0, 0.0])


def test_a_handler_that_spent_its_time_in_the_kernel_leaves_no_negative_share(tmp_path):
    """The handler's own time is taken off the process's user time; where it was spent in the
    kernel, the next reading's user time is below zero and its system time above the total:
    the header read 'python -136% native -139% system 374%'."""
    (tmp_path / "calls.py").write_text("import time\n" + CALLS)
    module = load_module("calls_kernel", tmp_path / "calls.py")
    profile = TestProfile("calls")
    sampler = CpuSampler(CodeScope(tmp_path), 10.0)  # no timer sample: the one below only
    sampler.start(profile)
    try:
        module.calls(0.05)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        sampler._user = usage.ru_utime + 0.01  # 10 ms of kernel time taken off as user time
        sampler._system = usage.ru_stime - 0.02
        sampler._sample(sys._getframe())
    finally:
        sampler.stop()
        sampler.close()  # the signal back: stop() keeps it for a next test
    figures = [(profile.cpu_python_s, profile.cpu_native_s, profile.cpu_system_s)]
    figures += [(s.cpu_python_s, s.cpu_native_s, s.cpu_system_s) for s in profile.lines.values()]
    assert profile.cpu_s > 0 and all(f >= 0 for row in figures for f in row), figures
