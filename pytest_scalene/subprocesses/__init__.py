"""--profile-subprocesses: the Python child processes a profiled test starts, profiled in
the child (agent.py, loaded through site/) and merged into the test (collector.py)."""
