"""One A/B comparison of a set of tests against a git ref: the ref checked out in a worktree
(git_tree.py), a worker session in each tree (workers.py), the check that each side imports the
code under test from its own tree, then each test compared in turn.

A test that reads slower is measured again in fresh worker processes and fails only if it
reads slower there too. After a worker error the next tests go on in fresh workers. Tests that
exist on one side only, whose setup (the source of their fixtures) differs between the trees,
or that fail or skip on either side are notes, never verdicts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import ab_statistic, git_tree, pairs
from .worker_sampler import NOT_PROJECT_PARTS
from .workers import (
    STARTUP_TIMEOUT_S,
    WORKERS_PER_SIDE,
    Side,
    WorkerError,
    WorkerProcess,
    close_all,
)

# Notes on tests that have nothing to be compared with (a new test, a changed setup): counted,
# but they do not fail the run as the other notes (the comparison failed to judge) do.
NOT_COMPARABLE = (
    "not judged: the test exists on the",
    "not judged: its setup (the source of its fixtures) differs",
)


def comparable(note: str) -> bool:
    """Whether a test with this note could have been judged (its note is a failure to): a
    test missing on a side that had collection errors could."""
    return not note.startswith(NOT_COMPARABLE) or "collection errors" in note


MAX_RESTARTS = 3  # fresh workers after a worker error, per set of tests measured


class SameCodeError(Exception):
    """Both sides would import the code under test from the same place."""


@dataclass
class Setup:
    root: Path  # the repository's top
    rootdir: Path  # pytest's rootdir, inside root
    commit: str
    ref: str
    args: Sequence[str] = ()  # options kept for the workers (collection, plugins, ini)
    inipath: Path | None = None


@dataclass
class Result:
    outcomes: dict[str, pairs.Outcome] = field(default_factory=dict)
    problem: str = ""  # why nothing could be compared


def _inside(path: str, tree: Path) -> bool:
    try:
        rel = Path(os.path.realpath(path)).relative_to(tree.resolve())
    except ValueError:
        return False
    return not any(part in NOT_PROJECT_PARTS for part in rel.parts)


def _defined_in(tree: Path, name: str) -> bool:
    """The tree holds the source of top-level module `name` (flat or src layout)."""
    for base in (tree, tree / "src"):
        if (base / name / "__init__.py").is_file() or (base / f"{name}.py").is_file():
            return True
    return False


def same_code(sides: Sequence[Side]) -> list[str]:
    """Modules of a tree that a side imported from elsewhere (an installed copy): that side
    would not run its own version of the code."""
    problems = []
    for side in sides:
        for name, path in sorted(side.modules.items()):
            if _defined_in(side.tree, name) and not _inside(path, side.tree):
                problems.append(
                    f"the {side.name} side imports {name} from {path}, not from its tree "
                    f"{side.tree}"
                )
    return problems


def ini_args_for(setup: Setup, tree: Path) -> list[str]:
    """The -c argument naming the user's ini file as it lies in `tree` (a worktree)."""
    if setup.inipath is None:
        return []
    try:
        mapped = tree / Path(setup.inipath).resolve().relative_to(setup.root)
    except ValueError:
        return ["-c", str(setup.inipath)]
    return ["-c", str(mapped if mapped.exists() else setup.inipath)]


def _start(sides: Sequence[Side], nodeids: Sequence[str], setup: Setup) -> list[WorkerProcess]:
    """WORKERS_PER_SIDE workers for each side that has test files of this run, all started at
    once."""
    started = []
    for side in sides:
        files = sorted({n.split("::", 1)[0] for n in nodeids})
        files = [f for f in files if (side.rootdir / f).exists()]
        if files:
            args = [*ini_args_for(setup, side.tree), *setup.args]
            for _ in range(WORKERS_PER_SIDE):
                started.append(WorkerProcess(side, files, nodeids, args))
    for process in started:
        hello = process.receive(STARTUP_TIMEOUT_S)
        process.side.tests = dict(hello.get("tests", {}))
        process.side.modules = dict(hello.get("modules", {}))
        process.side.collection_errors = int(hello.get("collection_errors", 0))
    return started


def _both_sides(workers: Sequence[WorkerProcess]) -> bool:
    return {w.side.name for w in workers} == {"baseline", "current"}


def _by_side(
    workers: Sequence[WorkerProcess],
) -> tuple[list[WorkerProcess], list[WorkerProcess]]:
    return (
        [w for w in workers if w.side.name == "baseline"],
        [w for w in workers if w.side.name == "current"],
    )


def run(
    setup: Setup, nodeids: Sequence[str], progress: Callable[[str], None] = lambda _: None
) -> Result:
    """Compare `nodeids` (in this order) between the ref's tree and the working tree.
    Raises SameCodeError, git_tree.GitError."""
    result = Result()
    rel = setup.rootdir.resolve().relative_to(setup.root)
    with git_tree.Worktree(setup.root, setup.commit) as base_tree:
        base = Side("baseline", base_tree, base_tree / rel)
        cur = Side("current", setup.root, setup.rootdir)
        workers: list[WorkerProcess] = []
        try:
            workers += _start((base, cur), nodeids, setup)
            if problems := same_code((base, cur)):
                raise SameCodeError("; ".join(problems))
            if not _both_sides(workers):
                result.problem = f"no test file of this run exists at {setup.ref}"
                return result

            def restart() -> list[WorkerProcess]:
                close_all(workers)
                workers[:] = _start((base, cur), nodeids, setup)
                if not _both_sides(workers):
                    raise WorkerError("a worker did not start again")
                return workers

            _compare_all(nodeids, base, cur, workers, result, progress, restart)
        except WorkerError as exc:
            result.problem = str(exc)
        finally:
            close_all(workers)
    return result


def _compare_all(
    nodeids: Sequence[str],
    base: Side,
    cur: Side,
    workers: list[WorkerProcess],
    result: Result,
    progress: Callable[[str], None],
    restart: Callable[[], list[WorkerProcess]],
) -> None:
    both = [n for n in nodeids if n in base.tests and n in cur.tests]
    for nodeid in nodeids:
        if nodeid not in base.tests or nodeid not in cur.tests:
            where, other = (cur, base) if nodeid in cur.tests else (base, cur)
            note = f"{NOT_COMPARABLE[0]} {where.name} side only"
            if other.collection_errors:
                note += f" (the {other.name} side had {other.collection_errors} collection errors)"
            result.outcomes[nodeid] = pairs.Outcome(nodeid, note=note)
        elif base.tests[nodeid] != cur.tests[nodeid]:
            result.outcomes[nodeid] = pairs.Outcome(nodeid, note=NOT_COMPARABLE[1])
    judged = [n for n in both if n not in result.outcomes]
    again = _measure(judged, workers, result, restart)
    for nodeid in judged:
        progress(nodeid)
    # A slower verdict is confirmed in fresh processes: a process can run the same code
    # persistently slower than another (its memory layout). So is a pass where a function's
    # share clearly grew but its ratio stayed under the limit: a process can also run the same
    # code faster (a 1.2x function read 1.04x when all of the current side's code ran 12%
    # faster). The tests to confirm are measured after all the others, in one fresh set of
    # workers, and that reading decides; for a suspect pass, only where a suspected function's
    # share clearly grew again (verdict.confirms).
    firsts = {nodeid: result.outcomes[nodeid] for nodeid in again}
    if not _measure_again(again, restart, result):
        return
    overturned = []
    for nodeid, first in firsts.items():
        second = result.outcomes[nodeid]
        if second.verdict is None:
            continue
        suspected = ab_statistic.suspects(first.functions) if first.verdict == "pass" else set()
        if (
            suspected
            and second.verdict == "fail"
            and not ab_statistic.confirms(second.functions, suspected)
        ):
            result.outcomes[nodeid] = first  # the pass stands: not borne out
            continue
        second.first_ratio = ab_statistic.median_ratio(first.ratios)
        if first.verdict == "fail" and second.verdict == "pass":
            overturned.append(nodeid)
    # A slower first reading that fresh workers overturned: one of the two readings drew unlike
    # processes, and either can be the one. A third set of workers decides, two readings of
    # three. The second alone let a real 1.3x slowdown pass silently (1 run in 12 of
    # test_compare_ref.py's, read slower, then not), as it can let unchanged code read 1.39x.
    seconds = {nodeid: result.outcomes[nodeid] for nodeid in overturned}
    if not _measure_again(overturned, restart, result):
        return
    for nodeid, second in seconds.items():
        third = result.outcomes[nodeid]
        third.first_ratio = second.first_ratio
        if third.verdict is not None:
            third.second_ratio = ab_statistic.median_ratio(second.ratios)


def _measure_again(
    nodeids: Sequence[str], restart: Callable[[], list[WorkerProcess]], result: Result
) -> bool:
    """`nodeids` measured again, from the start, in a fresh set of workers: False where there
    was nothing to measure, or no fresh workers (each test then says why it is not judged)."""
    if not nodeids:
        return False
    try:
        workers = restart()
    except WorkerError as exc:
        for nodeid in nodeids:
            result.outcomes[nodeid] = pairs.Outcome(nodeid, note=f"not judged: {exc}")
        return False
    _measure(nodeids, workers, result)
    return True


def _measure(
    nodeids: Sequence[str],
    workers: Sequence[WorkerProcess],
    result: Result,
    restart: Callable[[], list[WorkerProcess]] | None = None,
) -> list[str]:
    """Compare each test in turn into `result`; the tests whose reading must be confirmed.
    After a worker error the next tests go on in fresh workers (`restart`), MAX_RESTARTS times:
    one test that kills its worker leaves the others judged."""
    again = []
    restarts = 0
    for i, nodeid in enumerate(nodeids):
        following = nodeids[i + 1] if i + 1 < len(nodeids) else None
        try:
            outcome = pairs.compare_test(nodeid, following, *_by_side(workers))
        except WorkerError as exc:
            result.outcomes[nodeid] = pairs.Outcome(nodeid, note=f"not judged: {exc}")
            cause = exc
            if following is not None and restart is not None and restarts < MAX_RESTARTS:
                restarts += 1
                try:
                    workers = restart()
                    continue
                except WorkerError as failed:
                    cause = failed
            for rest in nodeids[i + 1 :]:
                result.outcomes[rest] = pairs.Outcome(
                    rest, note=f"not judged: a worker ended before its turn ({cause})"
                )
            break
        result.outcomes[nodeid] = outcome
        if outcome.verdict == "fail" or ab_statistic.suspects(outcome.functions):
            again.append(nodeid)
    return again
