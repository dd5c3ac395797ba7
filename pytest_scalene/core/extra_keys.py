"""The one registry of `extra`'s keys: TestProfile.extra (a test's figures and judgements beyond
the CPU split) and LineStats.extra (a line's). They are the JSON's keys too
(docs/json-schema.md). Every module reads and writes `extra` through these names, never a
string of its own (tests/test_architecture.py checks it), so a key is spelled once and a reader
finds here who writes it and what it holds.
"""

from __future__ import annotations

# -- memory, leaks and copies (sampling/memory_sampler.py, sampling/leaks.py); test and line -----
PEAK_MB = "peak_mb"  # footprint above the test's start: its high-water mark (a line's: sampled)
AVG_MB = "avg_mb"  # the footprint's average over the samples
ALLOC_MB = "alloc_mb"  # net growth at the grow samples (counted in threshold steps)
PYTHON_ALLOC_FRACTION = "python_alloc_fraction"  # the share allocated by Python's allocator
COPY_MB = "copy_mb"  # MB copied by memcpy/memmove, counted in whole copy steps
COPY_MB_S = "copy_mb_s"  # copy_mb per second of the test, or of the line's CPU time
RSS_MB = "rss_mb"  # the resident set's growth (sampling/resident.py)
TIMELINE = "timeline"  # [(seconds, MB)]: the footprint over the test (sampling/timeline.py)
LEAKS = "leaks"  # the likely leaks: [{line, probability, rate, ...}]
LEAK_PROBABILITY = "leak_probability"  # a line's: Laplace's rule of succession, 0..1
LEAK_RATE_MB_S = "leak_rate_mb_s"  # a line's: MB a second its leak grows by
RETAINED = "retained"  # the net growth split across the lines still holding tracked allocations
HELD = "held"  # leak suspects: to LEAKS when a run again confirms them (gates/leak_confirm.py)


# -- CPU (sampling/cpu_sampler.py, sampling/profiler.py) -------------------------------------------
WAIT_S = "wait_s"  # a line's main-thread time off the CPU (--profile-clock=wall)
CPU_SAMPLING_SKIPPED = "cpu_sampling_skipped"  # why the test's CPU was not sampled
WARM_UP = "warm_up"  # the CPU figure is the session's first call (also a baseline's cpu key)

# -- GPU (sampling/gpu_sampler.py) --------------------------------------------------------------
GPU_PEAK_MB = "gpu_peak_mb"
GPU_UTIL_PERCENT = "gpu_util_percent"
GPU_MEMORY_SCOPE = "gpu_memory_scope"  # "process" or "device": what gpu_peak_mb counts

# -- profiled child processes (subprocesses/child_profiles.py) ---------------------------------
CHILDREN = "children"  # how many profiled children reported
CHILDREN_CPU_S = "children_cpu_s"
CHILDREN_PEAK_MB = "children_peak_mb"
CHILDREN_LOST = "children_lost"  # children that started but sent no profile

# -- runs of the call (gates/repeat.py, benchmark/calls.py) -------------------------------------
REPEAT = "repeat"  # how many runs the figures come from (--profile-repeat)
CPU_RUNS = "cpu_runs"  # the CPU seconds of each timed run
CPU_RUNS_SPAN_S = "cpu_runs_span_s"  # the wall seconds those runs added up to
NOT_REPEATABLE = "not_repeatable"  # why the repeats stopped early
BENCHMARK_CALLS = "benchmark_calls"  # figures per call of the `benchmark` fixture's function
# The fastest CPU seconds of a fixed probe timed beside the timed runs, where they are saved into
# a baseline or confirm a regression against one (gates/machine_speed.py; a baseline's cpu key)
MACHINE_S = "machine_s"
MACHINE_SLOWER = "machine_slower"  # a CPU growth the machine's slowdown explains: not judged

# -- instruction counts (instructions/counts.py) ------------------------------------------------
INSTRUCTIONS = "instructions"  # the test's count (the METRICS table's "instructions")
INSTRUCTIONS_FUNCTIONS = "instructions_functions"  # inclusive count per Python function
INSTRUCTIONS_ENVIRONMENT = "instructions_environment"  # what the counts depend on
INSTRUCTIONS_MISSING = "instructions_missing"  # why a test that needs counts has none

# -- judgements (gates/, compare_ref/, history/) -----------------------------------------------
BASELINE = "baseline"  # the stored baseline's file, line matching and notes
AB = "ab"  # the A/B comparison against a git ref (compare_ref/ref_judge.py)
HISTORY = "history"  # how the test was judged against its recent runs
VERDICTS = "verdicts"  # the verdicts, in the JSON only (TestProfile.verdicts in memory)
