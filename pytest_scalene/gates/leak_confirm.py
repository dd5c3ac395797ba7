"""Confirming suspected leaks by running the test once more (docs/memory.md, Leaks).

A first run cannot tell a leak from a cache that fills once (memoization, functools.lru_cache, a
module-level dict filled up to a bound): both keep the allocations that set the footprint's new
high-water marks. So only a test with a suspect (sampling/leaks.py) has its function body run
once more, profiled apart (the profile of the re-run is dropped); a suspect becomes a likely
leak (`leaks`, which the leak gate counts) only when the re-run retained again, at the same
line, at least half what the first run did. Otherwise it stays under `held`, with why, and never
fails a test. The re-run's outcome, warnings and records never reach pytest: a re-run that
fails or skips confirms nothing, and says so.
"""

from __future__ import annotations

import warnings

import pytest

from ..core import extra_keys
from ..core.model import TestProfile
from ..sampling import leaks
from ..sampling.profiler import Profiler
from .repeat import first_run_recorded_outcome, rerun_of

NOT_REPEATABLE = "not confirmed: the test is not repeatable (a repeat failed or skipped)"


def _failure(exc: BaseException) -> str:
    if isinstance(exc, pytest.skip.Exception):
        return "was skipped"
    text = str(exc).strip().splitlines()
    return f"failed ({type(exc).__name__}{': ' + text[0][:80] if text else ''})"


def _run_again(profiler: Profiler, item: pytest.Item) -> TestProfile | str:
    """The profile of one more run of the test's function, or why there is none."""
    tests = profiler.session.tests
    first = tests.pop(item.nodeid)
    try:
        # The warnings (record=True drops them) and outcome of a test are its first run's.
        with warnings.catch_warnings(record=True), profiler.profiling(item.nodeid):
            rerun_of(item)()
    except (KeyboardInterrupt, pytest.exit.Exception):
        raise
    except BaseException as exc:  # the test's outcome is its first run's
        return f"not confirmed: the test {_failure(exc)} when run again"
    finally:
        again = tests.pop(item.nodeid, None)
        tests[item.nodeid] = first
    return again if again is not None else "not confirmed: the second run was not profiled"


def confirm_leaks(profiler: Profiler, item: pytest.Item) -> None:
    """Run the test again when its profile has suspects; move the confirmed ones to `leaks`."""
    profile = profiler.session.tests.get(item.nodeid)
    if profile is None:
        return
    held = profile.extra.get(extra_keys.HELD) or []
    suspects = [s for s in held if isinstance(s, dict) and s.get("why") == leaks.NOT_RUN_AGAIN]
    if not suspects or first_run_recorded_outcome(item):
        return  # a unittest failure or skip: the suspects stay "not run again"
    if extra_keys.NOT_REPEATABLE in profile.extra:  # a repeat already failed: another run would too
        again: TestProfile | str = NOT_REPEATABLE
    else:
        again = _run_again(profiler, item)
    if isinstance(again, str):
        for suspect in suspects:
            suspect["why"] = again
        return
    if extra_keys.RETAINED not in again.extra:  # memory was not profiled in the re-run
        for suspect in suspects:
            suspect["why"] = "not confirmed: memory was not profiled when run again"
        return
    retained_again = leaks.retained_at(again.extra)
    confirmed = []
    for suspect in suspects:
        again_mb = retained_again.get((str(suspect["file"]), int(suspect["line"])), 0.0)
        suspect["again_mb"] = again_mb
        if leaks.confirmed(float(suspect.get("leaked_mb") or 0.0), again_mb):
            suspect.pop("why")
            confirmed.append(suspect)
        else:
            suspect["why"] = leaks.DID_NOT_GROW
    profile.extra[extra_keys.HELD] = [s for s in held if not any(s is c for c in confirmed)]
    found = [*(profile.extra.get(extra_keys.LEAKS) or []), *confirmed]
    found.sort(key=lambda leak: (-leak["probability"], -leak["rate_mb_s"]))
    profile.extra[extra_keys.LEAKS] = found
