"""Instruction counts under valgrind's callgrind (`--profile-measure=instructions`).

The tests that need counts run once more, in a child pytest session under callgrind with
instrumentation off except around each test's call (child_plugin), the hash seed, `random` and
the garbage collector pinned. runner.py starts that session and reads its dumps
(callgrind_out.py) into one `Counted` per test; counts.py attaches them to the profiles, where
the gates judge them like any other metric (docs/baselines.md, "Instruction counts").
"""
