import json
from pathlib import Path

import pytest


@pytest.fixture
def run_profiled(pytester: pytest.Pytester):
    """Run pytest --profile on the given test source in a subprocess; return (result, profile)."""

    def run(source: str, *args: str, name: str = "test_workload"):
        pytester.makepyfile(**{name: source})
        out = pytester.path / "profile.json"
        result = pytester.runpytest_subprocess(
            "--profile", f"--profile-json={out}", "-p", "no:cacheprovider", *args
        )
        profile = json.loads(out.read_text()) if out.exists() else None
        return result, profile

    return run


def lines_of(test: dict, function: str | None = None) -> list[dict]:
    return [ln for ln in test["lines"] if function is None or ln["function"] == function]


def line_at(test: dict, path: Path | str, text: str) -> dict:
    """The profiled line whose source contains `text`."""
    source = Path(path).read_text().splitlines()
    number = next(i for i, s in enumerate(source, 1) if text in s)
    return next(ln for ln in test["lines"] if ln["line"] == number)
