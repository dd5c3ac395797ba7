"""How the memory sampler divides its threshold into the shim's steps: shared with the gates,
which judge a figure counted in steps with its error, without importing the sampler (a session
without memory profiling leaves it out)."""

# The shim tracks the allocation at each new high-water mark in threshold / 80 steps (128 KB by
# default): fine enough to find a line retaining a few hundred KB per test (leaks.retained),
# for +11% time on a test keeping 1 GB (docs/memory.md). The leak score counts one of them per
# threshold / 10 (~1 MB), as with a 1 MB step, so a suspect needs as much evidence as before.
TRACK_STEPS_PER_THRESHOLD = 80
LEAK_STEPS_PER_THRESHOLD = 10
COPY_STEP_THRESHOLDS = 2  # one copy sample per 2 x threshold bytes copied
