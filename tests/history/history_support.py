"""Synthetic runs for the history tests."""

from __future__ import annotations

import uuid

from pytest_scalene.history.run_records import LineRecord, RunRecord, TestRecord


def make_run(
    tag: float,
    tests: int = 3,
    lines: int = 4,
    commit: str = "c0ffee",
    machine: str = "machine-a",
    options: dict | None = None,
) -> RunRecord:
    """A run whose every figure derives from `tag`, so that a reader can check each one."""
    records = tuple(
        TestRecord(
            nodeid=f"tests/test_m.py::test_{t}",
            outcome="passed",
            metrics={"cpu_s": tag + t, "elapsed_s": tag + t + 0.5, "peak_mb": 10.0 * t},
            verdicts=[{"kind": "budget", "metric": "cpu_s", "passed": True}],
            lines=tuple(
                LineRecord("tests/test_m.py", 10 + k, f"test_{t}", (tag + k, None, 1.0 * k, 0.0))
                for k in range(lines)
            ),
            machine_s=tag / 1000,
        )
        for t in range(tests)
    )
    return RunRecord(
        run_uuid=uuid.uuid4().hex,
        started_at=1_700_000_000.0 + tag,
        commit=commit,
        branch="main",
        dirty=False,
        machine=machine,
        machine_info={"cpu": "test"},
        options=options or {"interval_s": 0.01},
        tests=records,
    )
