"""The `pytest-scalene` command: merge CI shards' profiles and baselines, show the history.

    pytest-scalene merge shard-*.json -o merged.json [--html H] [--markdown M]
    pytest-scalene merge-baselines shard1/baselines shard2/baselines -o baselines [--base B]
    pytest-scalene history URL [--last N] [--metric M] [--test TEXT] [--lines] [--html H]

Bad input is a one-line error and exit status 2; nothing is written then.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .core.atomic_write import write_text_atomic

EXIT_USAGE = 2


def _merge(args: argparse.Namespace) -> int:
    from .reports import markdown_report
    from .reports.html_report import write_html
    from .reports.json_report import write_json
    from .reports.shards import merge_profiles

    session = merge_profiles(args.profiles)
    rootdir = os.fspath(args.rootdir)
    write_json(session, args.output)
    if args.html:
        write_html(session, args.html, rootdir)
    if args.markdown:
        write_text_atomic(args.markdown, markdown_report.render(session, rootdir))
    print(f"merged {len(args.profiles)} profiles, {len(session.tests)} tests -> {args.output}")
    return 0


def _merge_baselines(args: argparse.Namespace) -> int:
    from .gates.baseline_merge import merge_dirs

    written = merge_dirs(args.directories, args.output, args.base)
    print(
        f"merged {len(args.directories)} baseline directories: {len(written)} module files "
        f"-> {args.output}"
    )
    return 0


def _history(args: argparse.Namespace) -> int:
    from .history.connect import open_store
    from .history.history_html import write_page
    from .history.store import describe
    from .history.trends import render

    with open_store(args.url, create=False) as store:
        runs = store.runs(last=args.last, machine=args.machine)
        if not runs:
            print(f"{describe(args.url)}: no run recorded yet", file=sys.stderr)
            return 0
        print(render(store, runs, args.metric, args.test, args.lines))
        if args.html:
            write_page(store, runs, args.metric, args.test, args.html)
            print(f"history page written to {args.html}")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="pytest-scalene", description=__doc__.split("\n")[0])
    sub = top.add_subparsers(dest="command", required=True)

    merge = sub.add_parser("merge", help="merge the JSON profiles of CI shards into one")
    merge.add_argument("profiles", nargs="+", help="the shards' --profile-json files")
    merge.add_argument("-o", "--output", required=True, help="the merged JSON profile")
    merge.add_argument("--html", help="also write the merged HTML report")
    merge.add_argument("--markdown", help="also write the merged Markdown summary")
    merge.add_argument(
        "--rootdir",
        default=".",
        help="the checkout the profiles' paths are relative to "
        "(source lines for the reports; default: the current directory)",
    )
    merge.set_defaults(run=_merge)

    baselines = sub.add_parser("merge-baselines", help="merge the baselines saved by CI shards")
    baselines.add_argument("directories", nargs="+", help="the shards' baseline directories")
    baselines.add_argument("-o", "--output", required=True, help="the merged baseline directory")
    baselines.add_argument(
        "--base",
        help="the baselines the shards started from: a test changed by one shard "
        "takes that shard's entry",
    )
    baselines.set_defaults(run=_merge_baselines)

    from .history.trends import add_arguments

    history = sub.add_parser("history", help="trends and change points from a history store")
    add_arguments(history)
    history.set_defaults(run=_history)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    from .gates.baseline_merge import BaselineMergeError
    from .history.store import HistoryError
    from .reports.shards import MergeError

    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except (MergeError, BaselineMergeError, HistoryError) as exc:
        print(f"pytest-scalene {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(
            f"pytest-scalene {args.command}: error: cannot write "
            f"{exc.filename or Path()}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
