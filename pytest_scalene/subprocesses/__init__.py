"""--profile-subprocesses: the Python child processes a profiled test starts, profiled in
the child (child_agent.py, loaded through site/) and merged into the test (child_profiles.py)."""
