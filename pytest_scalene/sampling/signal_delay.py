"""The main thread's Python/native split by signal-delay inference (cpu_sampler.py's module doc).

CPython runs a signal handler only between bytecodes, so the time from the timer's expiry to the
handler was spent where no bytecode ran: native code. The expiry time is known from the timer's
schedule (getitimer at the previous handler's exit, or right after arming), so the delay is
measured, not assumed. The stretch before the expiry is credited to Python in proportion to the
two ends that were observed: the previous handler and this one, each either prompt (Python was
running) or delayed (native was running). A pure-Python loop is all Python, back-to-back native
calls are all native, and a single switch in between is split evenly, which is unbiased when
switches fall uniformly.
"""

from __future__ import annotations

# A handler later than this fraction of an interval after its timer expired was held back by
# native code. CPU-time timers are checked on the scheduler tick, so even while bytecode runs a
# signal can arrive up to one tick (1-10 ms by kernel, 4 ms measured here) late; wall timers are
# late whenever the machine is busy. Half an interval clears both at the default 10 ms interval;
# native calls shorter than that count as Python (documented in docs/cpu.md).
PROMPT_FRACTION = 0.5


class SignalDelay:
    """One test's main-thread split, interval by interval, on the timer's clock (the process's
    CPU time, or wall time)."""

    def __init__(self, interval_s: float, clock: str) -> None:
        self.prompt_s = PROMPT_FRACTION * interval_s
        self.wall = clock == "wall"
        self.was_prompt = True  # the last handler (or the test's start) was on time
        self.timer_clock = 0.0  # the timer's clock at the last handler's exit, or the start
        self.until_expiry = 0.0  # timer-clock seconds from then to the timer's expiry

    def restart(self, timer_clock: float, until_expiry: float) -> None:
        """A new test: its timer just armed, its start as prompt as a handler on time."""
        self.was_prompt = True
        self.timer_clock, self.until_expiry = timer_clock, until_expiry

    def python_share(self, main_cpu: float, timer_now: float) -> float:
        """The Python share of the main thread's `main_cpu` seconds since the last handler;
        `timer_now`: the timer's clock, read after the CPU times."""
        elapsed = timer_now - self.timer_clock
        if elapsed <= 0 or (self.was_prompt and elapsed <= self.until_expiry):
            return 1.0  # since a prompt handler (or the start), before the expiry: bytecode ran
        before_expiry = min(elapsed, self.until_expiry)
        after_expiry = elapsed - before_expiry
        # On the wall clock, only the part of the delay the main thread spent on a CPU can be
        # native: on a busy machine it may also have waited for a core.
        running = min(1.0, main_cpu / elapsed) if self.wall else 1.0
        prompt = after_expiry * running <= self.prompt_s
        # A prompt handler's small delay is the kernel's delivery latency: bytecode was running.
        python = before_expiry * (self.was_prompt + prompt) / 2 + after_expiry * prompt
        self.was_prompt = prompt
        return python / elapsed
