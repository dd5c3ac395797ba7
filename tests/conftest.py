import importlib.util
import json
import shutil
import signal
import sys
from pathlib import Path
from types import ModuleType

import pytest


@pytest.fixture
def sigprof_restored():
    """SIGPROF's handler as it was before the test: the A/B worker's line sampler installs its
    own at start() (in a worker process, which never needs it back); left in this process, a
    later test's CPU sampler found the signal taken and fell back to a POSIX timer."""
    previous = signal.getsignal(signal.SIGPROF)
    yield
    signal.signal(signal.SIGPROF, previous)


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


# Figures that add up over the code objects sharing a line; the others are levels (the highest).
ADDITIVE = {"cpu_python_s", "cpu_native_s", "cpu_system_s", "alloc_mb", "copy_mb", "rss_mb"}


def line_at(test: dict, path: Path | str, text: str) -> dict:
    """The profiled line whose source contains `text`. Before Python 3.12 a comprehension has
    its own code object, so its line comes as two entries (the function's and `<listcomp>`'s):
    they are combined, as the line's total (which one a sample lands in varies with timing)."""
    source = Path(path).read_text().splitlines()
    number = next(i for i, s in enumerate(source, 1) if text in s)
    entries = [ln for ln in test["lines"] if ln["line"] == number]
    if not entries:
        raise LookupError(f"line {number} ({text}) not in the profile: {test['lines']}")
    combined = dict(entries[0])
    for entry in entries[1:]:
        for key, value in entry.items():
            mine = combined.get(key)
            if isinstance(value, (int, float)) and isinstance(mine, (int, float)):
                combined[key] = mine + value if key in ADDITIVE else max(mine, value)
            elif mine is None:
                combined[key] = value
    return combined


def load_module(name: str, path: Path | str) -> ModuleType:
    """The Python file at `path` imported as module `name` (a script of benchmarks/ or
    scripts/, a workload written by a test); registered in sys.modules, where dataclasses
    look their module up by name."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def c_compiler(needed_for: str) -> str:
    """The C compiler, or a skip that says what it was needed for (Debian's gcc)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip(f"needs a C compiler (Debian's gcc) to build {needed_for}")
    return compiler
