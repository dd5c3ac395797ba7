"""One empty test: its run under a profiler, against the unprofiled run, is the profiler's
fixed cost per pytest session (start-up, re-exec, writing the report)."""


def test_empty():
    pass
