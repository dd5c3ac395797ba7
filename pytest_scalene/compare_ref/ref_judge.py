"""The pytest side of `--profile-compare-ref=REF`: after collection, the profiled tests are
compared with REF's version in alternating runs (ab_run.py); each test's result goes on its
profile (extra["ab"]) before its call phase is judged, and `CompareRef` is the judge that turns
it into a verdict (gates/pipeline.py)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest

from ..core import extra_keys, runenv
from ..core.model import TestProfile
from ..core.verdict import REGRESSION, Verdict
from ..gates.pipeline import Unjudged
from ..instructions.runner import kept_arguments
from ..sampling.profiler import Profiler
from . import ab_run, ab_statistic, git_tree, pairs

UNJUDGED = Unjudged("the A/B comparison (--profile-compare-ref)")
NOTHING_TO_COMPARE = Unjudged(
    "the A/B comparison, nothing to compare with (new test or new setup)", fails=False
)
FUNCTIONS_KEPT = 5  # the judged functions kept in the JSON: failing first, then by ratio


def setup_for(config: pytest.Config, ref: str) -> ab_run.Setup:
    """The setup for comparing with `ref`, or a usage error naming what is wrong."""
    where = "--profile-compare-ref"
    try:
        root = git_tree.repository_root(Path(config.rootpath))
        commit = git_tree.resolve(root, ref)
    except git_tree.GitError as exc:
        raise pytest.UsageError(f"{where}={ref}: {exc}") from None
    if not Path(config.rootpath).resolve().is_relative_to(root):
        raise pytest.UsageError(
            f"{where}={ref}: pytest's rootdir {config.rootpath} is outside the git repository "
            f"{root}: run pytest from inside the repository (or pass --rootdir)"
        )
    if (
        runenv.is_xdist_worker(config)
        or config.pluginmanager.has_plugin("xdist")
        and (getattr(config.option, "numprocesses", None))
    ):
        raise pytest.UsageError(f"{where} runs its own workers: run it without -n (pytest-xdist)")
    return ab_run.Setup(
        root=root,
        rootdir=Path(config.rootpath).resolve(),
        commit=commit,
        ref=ref,
        args=kept_arguments(config.invocation_params.args),
        inipath=config.inipath,
    )


def _errors(z: float | None) -> str:
    return "the same in every run" if z is None else f"{z:.1f} standard errors"


def _rounded(ratio: float | None) -> float | None:
    return None if ratio is None else round(ratio, 4)


def result_of(outcome: pairs.Outcome, setup: ab_run.Setup) -> dict[str, Any]:
    found: dict[str, Any] = {"ref": setup.ref, "commit": setup.commit}
    if outcome.verdict is None:
        found["note"] = outcome.note
        return found
    n = len(outcome.ratios)
    found.update(
        {
            "verdict": outcome.verdict,
            "ratio": round(ab_statistic.median_ratio(outcome.ratios), 4),
            "fails_above": ab_statistic.threshold_at(n),
            "pairs": n,
            "ratios": [round(r, 4) for r in outcome.ratios],
            "first_ratio": _rounded(outcome.first_ratio),
            "second_ratio": _rounded(outcome.second_ratio),
            "calls_per_run": outcome.inner,
            "baseline_cpu_s": round(ab_statistic.median_ratio(outcome.baseline_cpu_s), 6),
            "cpu_s": round(ab_statistic.median_ratio(outcome.cpu_s), 6),
        }
    )
    found["test_verdict"] = outcome.test_verdict
    found["functions"] = [
        {
            "file": f.file,
            "function": f.function,
            "line": getattr(outcome.function_lines.get((f.file, f.function)), "line", None),
            "verdict": f.state,
            "inclusive_ratio": None if f.inclusive_ratio is None else round(f.inclusive_ratio, 4),
            "self_ratio": round(f.ratio, 4),
            "ratio": round(f.ratio, 4),  # the self ratio, the key's meaning before both were
            "share_ratio": round(f.share_ratio, 4),
            "z": round(f.z, 2) if math.isfinite(f.z) else None,  # None: the runs had no spread
            "baseline_share": round(f.baseline_share, 4),
            "share": round(f.share, 4),
            "samples": list(f.samples),
        }
        for f in outcome.functions[:FUNCTIONS_KEPT]
    ]
    found["function_fails_above"] = ab_statistic.FUNCTION_FAIL_ABOVE
    found["lines"] = [
        {
            "file": g.file,
            "function": g.function,
            "line": g.line,
            "baseline_cpu_s": g.baseline_cpu_s,
            "cpu_s": g.cpu_s,
        }
        for g in outcome.growth
    ]
    return found


class CompareRef:
    def __init__(self, config: pytest.Config, profiler: Profiler, setup: ab_run.Setup) -> None:
        self.config = config
        self.profiler = profiler
        self.setup = setup
        self.results: dict[str, dict[str, Any]] = {}

    def after_collection(self, session: pytest.Session) -> None:
        """Called by profiling_session.after_collection (trylast: after deselection)."""
        nodeids = [item.nodeid for item in session.items if self.profiler.wants(item)]
        if not nodeids:
            return
        reporter: Any = self.config.pluginmanager.get_plugin("terminalreporter")
        short = self.setup.commit[:12]

        def say(text: str) -> None:
            if reporter is not None:
                reporter.ensure_newline()
                reporter.write_line(f"pytest-scalene: {text}")

        say(
            f"comparing {len(nodeids)} test(s) with {self.setup.ref} ({short}) in alternating "
            "runs of both versions..."
        )
        started = time.perf_counter()
        try:
            found = ab_run.run(self.setup, nodeids)
        except (ab_run.SameCodeError, git_tree.GitError) as exc:
            raise pytest.UsageError(
                f"--profile-compare-ref={self.setup.ref}: {exc}. Both sides must run their own "
                "version of the code: make the code under test importable from each tree (a "
                "flat layout, or `pythonpath = src` in the pytest configuration) rather than "
                "from an installed copy (pip install without -e)"
                if isinstance(exc, ab_run.SameCodeError)
                else f"--profile-compare-ref={self.setup.ref}: {exc}"
            ) from None
        except Exception as exc:  # a bug here must not hide the tests' own results
            found = ab_run.Result(
                problem=f"the comparison crashed ({type(exc).__name__}: {exc}); please report it"
            )
        for nodeid in nodeids:
            outcome = found.outcomes.get(nodeid)
            if outcome is None:
                outcome = pairs.Outcome(nodeid, note=f"not judged: {found.problem}")
            self.results[nodeid] = result_of(outcome, self.setup)
        failed = sum(r.get("verdict") == "fail" for r in self.results.values())
        notes = sum("note" in r for r in self.results.values())
        say(
            f"compared with {self.setup.ref} in {time.perf_counter() - started:.1f} s: "
            f"{failed} slower, {notes} not judged"
            + (f" ({found.problem})" if found.problem else "")
        )

    def attach(self, item: pytest.Item, call: pytest.CallInfo[None]) -> None:
        """Called by profiling_session.py's pytest_runtest_makereport, before the gates judge."""
        if call.when != "call" or item.nodeid not in self.results:
            return
        profile = self.profiler.session.tests.get(item.nodeid)
        if profile is not None:
            profile.extra[extra_keys.AB] = self.results[item.nodeid]

    # -- the judge (gates/pipeline.py) ------------------------------------------------------------
    confirms_cpu = False  # its pairs of runs are its confirmation
    every_test = True

    def verdicts(self, item: pytest.Item, profile: TestProfile) -> list[Verdict]:
        judged = verdict_of(self.results.get(item.nodeid) or {})
        return [] if judged is None else [judged]

    def cpu_suspect(self, item: pytest.Item, profile: TestProfile) -> str | None:
        return None

    def waits_for_machine(self, item: pytest.Item, profile: TestProfile) -> bool:
        return False

    @staticmethod  # it reads the profile alone
    def unjudged(profile: TestProfile) -> Unjudged | None:
        result = profile.extra.get(extra_keys.AB)
        if not isinstance(result, dict) or "note" not in result:
            return None
        return UNJUDGED if ab_run.comparable(str(result["note"])) else NOTHING_TO_COMPARE


def _inclusive(ratio: float | None) -> str:
    """A function's inclusive ratio, first in the message: what timeit would show."""
    return "inclusive not sampled" if ratio is None else f"inclusive {ratio:.3f}x"


def verdict_of(result: dict[str, Any]) -> Verdict | None:
    """The verdict on a test's A/B result (None for a note)."""
    if "verdict" not in result:
        return None
    ratio, limit = result["ratio"], result["fails_above"]
    against = f"{result['ref']} ({result['commit'][:12]})"
    lines = result.get("lines") or []
    where = None
    growth = ""
    if lines:
        shown = [
            f"{g['file']}:{g['line']} {g['function']}: {g['baseline_cpu_s']:.3g} s -> "
            f"{g['cpu_s']:.3g} s"
            for g in lines
        ]
        where = f"{lines[0]['file']}:{lines[0]['line']} {lines[0]['function']}"
        growth = (
            f"; most growth at {shown[0]}"
            + "".join(f", then at {s}" for s in shown[1:])
            + f" (sampled self CPU over {result['pairs']} runs of each side)"
        )
    passed = result["verdict"] == "pass"
    head = "CPU time within" if passed else "CPU time regressed against"
    failing = [f for f in result.get("functions") or [] if f["verdict"] == "fail"]
    slower = ""
    if failing:
        shown = [
            f"{f['file']}:{f['line'] if f['line'] is not None else '?'} {f['function']} "
            f"{_inclusive(f.get('inclusive_ratio'))}, self {f['ratio']:.3f}x (its self share of "
            f"the samples {f['baseline_share']:.1%} -> {f['share']:.1%}, {_errors(f['z'])}, "
            f"{min(f['samples'])}+ samples)"
            for f in failing
        ]
        slower = (
            f"; slower function: {', '.join(shown)} (self fails above "
            f"{result.get('function_fails_above', ab_statistic.FUNCTION_FAIL_ABOVE):.2f}x)"
        )
        if failing[0]["line"] is not None:
            where = f"{failing[0]['file']}:{failing[0]['line']} {failing[0]['function']}"
    message = (
        f"{head} {against}: {result['cpu_s']:.4g} s vs {result['baseline_cpu_s']:.4g} s per "
        f"call, median of {result['pairs']} paired ratios {ratio:.3f}x (fails above "
        f"{limit:.2f}x){slower}{growth}"
    )
    return Verdict(
        REGRESSION,
        "cpu_s",
        limit=result["baseline_cpu_s"] * limit,
        value=result["cpu_s"],
        passed=passed,
        message=message,
        line=where,
        baseline=result["baseline_cpu_s"],
    )
