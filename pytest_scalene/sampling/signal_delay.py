"""The main thread's Python/native split by signal-delay inference (cpu_sampler.py's module doc).

CPython runs a signal handler only between bytecodes, so the main thread's CPU time from the
signal's delivery to the handler was spent where no bytecode ran: native code. A C handler in
front of Python's stamps each delivery with the main thread's CPU clock (native/timer_calls.c),
so the delay is measured from the delivery. Measured from the timer's expiry (where there is no
stamp), it also holds the kernel's lag in noticing the expiry: CPU timers are checked at ticks
on a CPU running the process, and on a CPU shared with busy processes that lag reached several
milliseconds whatever ran (a pure-Python loop read 3-19% Python sharing one CPU with a busy
process, docs/cpu.md). The stretch before the delivery is credited to Python in proportion to
the two ends that were observed: the previous handler and this one, each either prompt (Python
was running) or delayed (native was running). A pure-Python loop is all Python, back-to-back
native calls are all native, and a single switch in between is split evenly, which is unbiased
when switches fall uniformly. The test's end is prompt: a signal delivered before it would have
had its handler run at a bytecode first.
"""

from __future__ import annotations

# A handler later than this fraction of an interval was held back by native code. Measured from
# the timer's expiry (no stamp), it must clear the kernel's lag: CPU-time timers are checked on
# the scheduler tick, so even while bytecode runs a signal can arrive up to one tick (1-10 ms by
# kernel, 4 ms measured here) late; wall timers are late whenever the machine is busy. Half an
# interval clears both at the default 10 ms interval; native calls shorter than that count as
# Python (documented in docs/cpu.md).
PROMPT_FRACTION = 0.5
# Measured from the delivery (stamped) it has no lag to clear: the main thread reaches its next
# bytecode within microseconds while Python runs. A tenth of an interval (1 ms by default): with
# half, a sort's interval whose delivery came in its last 5 ms read as Python (sorts 56-73%
# native sharing a CPU with a busy process, 90-98% with the expiry-measured rule).
PROMPT_HELD_FRACTION = 0.1


class SignalDelay:
    """One test's main-thread split, interval by interval, on the timer's clock (the process's
    CPU time, or wall time)."""

    def __init__(self, interval_s: float, clock: str) -> None:
        self.prompt_s = PROMPT_FRACTION * interval_s
        self.prompt_held_s = PROMPT_HELD_FRACTION * interval_s
        self.wall = clock == "wall"
        self.was_prompt = True  # the last handler (or the test's start) was on time
        self.timer_clock = 0.0  # the timer's clock at the last handler's exit, or the start
        self.until_expiry = 0.0  # timer-clock seconds from then to the timer's expiry

    def restart(self, timer_clock: float, until_expiry: float) -> None:
        """A new test: its timer just armed, its start as prompt as a handler on time."""
        self.was_prompt = True
        self.timer_clock, self.until_expiry = timer_clock, until_expiry

    def python_share(
        self, main_cpu: float, timer_now: float, held: float | None = None, ended: bool = False
    ) -> float:
        """The Python share of the main thread's `main_cpu` seconds since the last handler;
        `timer_now`: the timer's clock, read after the CPU times. `held`: the main thread's CPU
        seconds from the signal's delivery to this handler, where it was stamped; `ended`: at
        the test's end, which no handler ends."""
        elapsed = timer_now - self.timer_clock
        if elapsed <= 0 or (self.was_prompt and (ended or elapsed <= self.until_expiry)):
            return 1.0  # since a prompt handler (or the start), up to one: bytecode ran
        before_expiry = min(elapsed, self.until_expiry)
        after_expiry = elapsed - before_expiry
        if ended:
            prompt, late = True, 0.0
        elif held is not None:
            # The kernel's lag goes with the stretch before the delivery; what held the handler
            # after it is measured on the main thread's own clock.
            late = min(held, after_expiry)
            prompt = late <= self.prompt_held_s
        else:
            # On the wall clock, only the part of the delay the main thread spent on a CPU can
            # be native: on a busy machine it may also have waited for a core.
            running = min(1.0, main_cpu / elapsed) if self.wall else 1.0
            late = after_expiry
            prompt = after_expiry * running <= self.prompt_s
        # A prompt handler's small delay is the kernel's delivery latency: bytecode was running.
        unobserved = elapsed - late
        python = unobserved * (self.was_prompt + prompt) / 2 + late * prompt
        self.was_prompt = prompt
        return python / elapsed
