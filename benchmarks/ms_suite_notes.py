"""Findings about the millisecond suite measured once (dated), printed under each run's
figures by benchmarks/ms_suite.py; a run does not re-measure them."""

# Measured 2026-11-26 with callgrind over the suite (the main process).
WHERE_THE_TIME_GOES = (
    "Where the time goes (2026-11-26, this VM). CPU only: the profiled test's "
    "lifecycle (the sampler's signal checked, its timer armed and disarmed, the "
    "process and thread clocks read at both ends) is 96 k instructions and 11 system "
    "calls a test (the hot path `test_per_test_lifecycle`; 153 k and 18 before the "
    "fourth 2026-11-26 round, when the signal was taken and given back, and the signal "
    "guard and blocking-call patches applied and undone, around every test: they are "
    "now kept from the first test to the session's end). Counted over the whole "
    "1,000-test suite under callgrind with no sample landing (the main process), "
    "that round took CPU only from +229 M to +168 M instructions over plain (1.019x "
    "-> 1.014x) and full mode from +451 M to +388 M (1.037x -> 1.032x). The rest is "
    "pytest's calls of the plugin's hooks and the cyclic collector walking the "
    "objects each test's profile keeps. Full mode adds, counted under callgrind over "
    "200 tests (the main process, before -> after the third 2026-11-26 round): "
    "Python's allocator hooks, which marked every object allocation as Python's "
    "(58 M -> 16 M instructions: requests pymalloc serves from its arenas now pass "
    "through unmarked, and free is not wrapped); memcpy and memmove counted for the "
    "copy volume (17.5 M); rewriting the loaded libraries' tables at start-up (14.4 M, "
    "once); and the memory collector's start and stop (the shim armed and drained, "
    "the resident set's high-water mark reset and read, the test's figures written: "
    "18 M, 11 us a test in-process, 14 us before its real-time signal was kept for "
    "the session; 12 system calls a test -> 5). Cut in earlier rounds: JUnit "
    "properties written only with `--junitxml` (15 us a test), no budget parsing "
    "without a marker, one sampler, timer and signal guard per session, the last "
    "partial interval no longer looked up in pytest's frames (12 us), the peak RSS "
    "from `getrusage` where it tracks instead of `/proc/self/status` (9 us), no line "
    "work in a test no sample landed in. These costs are per test, whatever its "
    "length: a suite of 10 ms tests pays a tenth of the ratio above."
)


# Measured 2026-11-27 with `perf record -e cpu-clock` (this VM has no hardware counters, but a
# software clock samples the kernel and every library alike), not re-measured by each run.
TIME_WITHOUT_INSTRUCTIONS = (
    "Why CPU time grows more than the instructions (2026-11-27, this VM). The gap is not "
    "hidden kernel work: user time carries it (8 interleaved rounds, medians: plain "
    "2.46 s user + 0.10 s system, CPU only 2.54 + 0.13, full 2.75 + 0.14; page faults "
    "10.6 k / 10.7 k / 10.9 k, 15 voluntary context switches in each). `perf record -e "
    "cpu-clock` at 4 kHz over three plain and three full runs of the suite (medians of "
    "15.8 k and 16.7 k samples) puts full mode's extra samples in: the interpreter loop "
    "(+350: the plugin's Python code around each test, about 120 calls of its functions a "
    "test, by cProfile's call counts), the cyclic collector (+390 in `gc_collect_main` and "
    "the visits it makes: a full-mode session keeps 9 more tracked objects a test and ran "
    "193 young collections to plain's 179), the shim (+150: the allocation wrappers 86, "
    "memcpy 35, memmove 22) and the kernel (+96). The plugin's per-test Python code runs "
    "at a far lower rate of instructions per second than the tests' own loops (cold code, "
    "`ctypes` and pybind11 calls, system calls), so the instruction ratio understates its "
    "time; tests of a millisecond or two leave little to hide it in. The per-test lifecycle "
    "is already one sampler, timer, signal and patch set per session; what is left is "
    "many small calls (each test checks its signals, arms and disarms the timer, reads "
    "four clocks, resets and reads the resident peak, and judges its report), no one of "
    "them dominant."
)


# Measured 2026-11-27 (the leaner per-test path), not re-measured by each run.
LEANER_PATH = (
    "The leaner per-test path (2026-11-27, this VM). Where a test's plugin code went, counted "
    "two deterministic ways on 300 trivial tests (bytecode caches warm, the hash seed fixed): "
    "the bytecodes the plugin's functions execute a test (`sys.settrace` opcode events over "
    "100 tests; pytest itself runs 23,300 a test) and callgrind's instructions over plain. "
    "Before -> after: CPU only 1,587 -> 1,072 bytecodes and 198 k -> 146 k instructions a "
    "test; full 2,172 -> 1,588 and 375 k -> 322 k (the instructions include the start-up "
    "spread over the 300 tests). Cut: no thread clock or frame walk while `threading` knows "
    "the main thread alone (the process's CPU time is then the main thread's); the last "
    "interval of such a test charged without the general sampler loop; the call hook starts "
    "and stops the profiler without a generator and without building its stop steps each "
    "test; setup and teardown reports that passed leave the profile alone; the signal "
    "guard's patches checked once applied; the leak re-run looked up only when the profile "
    "holds suspects. The hot path `test_per_test_lifecycle` went from 24.1 M to 18.8 M "
    "instructions for 200 tests. What full mode still adds on this suite beyond that, "
    "counted over a run of 200 of its tests (the start-up's calls spread over them): the "
    "shim's wrappers, about 180 k instructions a test (Python's object allocator hook 80 k: "
    "up to 16,000 calls a test at ~5 instructions each; memcpy 64 k and memmove 23 k at "
    "~12 each; malloc and free ~15 k), which every "
    "interposed call pays by design, and its 14 system calls a test (timer, clocks, "
    "resident peak, signal checks)."
)


# Measured 2026-11-27 (alternated sessions of one empty test, 10 rounds), not re-measured by
# each run: the start-up table of each run gives the figures as they are now.
SESSION_FIXED_COST = (
    "The plugin's fixed cost a session (2026-11-27, this VM). Until that date this page's "
    "baseline was pytest with the plugin installed but not profiling, which pays the "
    "plugin's imports too. Alternated with pytest without it (`-p no:scalene`), a session "
    "of one empty test cost +0.33 to +0.35 s of CPU installed but idle and +0.33 to +0.37 s "
    "in full mode (the baseline: 0.92-1.02 s on this host, which ran the same plain suite "
    "1.6x slower than on 2026-11-26). Nearly all of it was importing the package (a session "
    "that only imported it: +0.29 s): pytest rewrites the asserts of every module of a "
    "plugin's distribution, and without cached bytecode (PYTHONDONTWRITEBYTECODE, set on "
    "this VM as in many containers, or a read-only site-packages) parses and compiles each "
    "of them in every session (~0.1 s); and 109 modules were imported, whose dataclasses "
    "took ~40% of the import under cProfile. Since then the package leaves assertion "
    "rewriting, a session imports the A/B comparison, the history, the selection's "
    "pre-pass and stored map, the report writers, the stack recorder and the instruction "
    "runner only where its options use them (75 modules in a default session), and git "
    "runs at the session's end only to record a saved baseline's commit: +0.22 s installed "
    "but idle, +0.28 s full, in the same kind of rounds (the table above has this run's "
    "figures). What is left is the import of "
    "those 75 modules (dataclass creation, unmarshalling); next: a plugin module that "
    "imports the profiler only when a session profiles (without --profile and without a "
    "perf_budget marker a session would import next to nothing), and fewer dataclasses on "
    "the start-up path."
)
