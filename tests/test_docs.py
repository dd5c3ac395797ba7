"""The docs stay accurate: every option, JSON key and perf_budget keyword the code defines is
documented, the documented defaults, units and noise-rule constants are the code's, the examples
parse, and every relative link in docs/*.md and README.md resolves (docs/README.md)."""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_scalene.compare_ref import ab_run as ab_session
from pytest_scalene.compare_ref import ab_statistic as ab_verdict
from pytest_scalene.compare_ref import pairs as ab_pairs
from pytest_scalene.compare_ref import ref_judge as ab_plugin
from pytest_scalene.config import options
from pytest_scalene.config.option_errors import REMOVED
from pytest_scalene.core import extra_keys, natural_values
from pytest_scalene.core.model import SCHEMA_VERSION, LineKey
from pytest_scalene.gates import budgets, machine_speed, noise_rule, repeat
from pytest_scalene.gates.baseline_store import BASELINE_SCHEMA
from pytest_scalene.gates.metrics import COMPARED, METRICS
from pytest_scalene.sampling import leaks

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PACKAGE = ROOT / "pytest_scalene"
FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)


def read(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def prose(text: str) -> str:
    """Markdown without its fenced code blocks."""
    return FENCE.sub("", text)


def code_blocks(text: str, language: str) -> list[str]:
    pattern = re.compile(rf"^```{language}[ \t]*\n(.*?)^```", re.M | re.S)
    return pattern.findall(text)


def section(text: str, needle: str) -> str:
    """The part of `text` under the first heading that contains `needle`, up to the next heading
    of the same or a higher level."""
    lines = prose(text).splitlines()
    for i, line in enumerate(lines):
        level = len(line) - len(line.lstrip("#"))
        if level and needle in line:
            end = next(
                (
                    j
                    for j in range(i + 1, len(lines))
                    if 0 < len(lines[j]) - len(lines[j].lstrip("#")) <= level
                ),
                len(lines),
            )
            return "\n".join(lines[i:end])
    raise AssertionError(f"no heading containing {needle!r}")


def table_row(text: str, first_cell: str) -> str:
    for line in prose(text).splitlines():
        if line.startswith(f"| {first_cell} |"):
            return line
    raise AssertionError(f"no table row starting with {first_cell!r}")


# -- options ---------------------------------------------------------------------------------
class _Recorder:
    """Stands in for pytest's Parser and OptionGroup: records what options.add_options adds."""

    def __init__(self) -> None:
        self.options: dict[str, dict[str, Any]] = {}

    def getgroup(self, *args: Any, **kwargs: Any) -> _Recorder:
        return self

    def addoption(self, *names: str, **attrs: Any) -> None:
        for name in names:
            self.options[name] = attrs

    def addini(self, *args: Any, **kwargs: Any) -> None:
        pass  # the removed options' keys (the others go through ini_options, not this double)


def declared_options() -> dict[str, dict[str, Any]]:
    recorder = _Recorder()
    options.add_options(recorder)  # type: ignore[arg-type]
    return {name: attrs for name, attrs in recorder.options.items() if name not in REMOVED}


def test_the_recorder_sees_the_options():
    found = declared_options()
    assert len(found) >= 20 and "--profile" in found and "--profile-budget" in found
    assert found["--profile-interval"]["default"] == options.DEFAULT_INTERVAL_S


@pytest.mark.parametrize("name", sorted(declared_options()))
def test_every_option_has_a_section_with_its_default_choices_and_errors(name):
    attrs = declared_options()[name]
    doc = read("options.md")
    anchor = _anchor_of(doc, name)
    assert anchor[1:] in anchors(DOCS / "options.md"), f"{name}: the table links {anchor}"
    text = section(doc, f"`{name}`")
    assert "`" + name in text.splitlines()[0], f"{name}: no heading of its own"
    default = attrs.get("default")
    if default not in (None, False, []):
        assert f"default `{default}`" in text, f"{name}: the default {default!r} is not documented"
    for choice in attrs.get("choices") or ():
        assert f"`{choice}`" in text, f"{name}: choice {choice!r} is not documented"
    convert = attrs.get("type")
    if convert is not None:
        for message in _error_messages(convert):
            assert message in text, f"{name}: the error {message!r} is not documented"


def _anchor_of(doc: str, name: str) -> str:
    """The link target the summary table uses for `name` (checked to resolve by the link test)."""
    found = re.search(rf"^\| \[`{re.escape(name)}`\]\((#[^)]+)\)", doc, re.M)
    assert found, f"{name} is missing from the table at the top of docs/options.md"
    return found.group(1)


def _error_messages(convert: Any) -> set[str]:
    """What the option's type function says about bad values, up to the quoted value."""
    messages = set()
    for bad in ("abc", "0", "-1", "1.5", "nan", "."):
        try:
            convert(bad)
        except argparse.ArgumentTypeError as exc:
            messages.add(str(exc).split(", got")[0])
    return messages


PROFILE_FLAG = re.compile(r"(?<![\w-])--profile(?:-[a-z0-9]+)*")


def test_every_flag_the_docs_mention_exists():
    for path in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        if path.name == "options.md":  # its last table lists the removed ones, and only it
            text = text.replace(section(text, "## Removed and renamed options"), "")
        for flag in set(PROFILE_FLAG.findall(text)):
            assert flag in declared_options(), (
                f"{path.name} mentions {flag}, which options.py does not declare"
            )


# -- the JSON profile --------------------------------------------------------------------------
SUITE = """
import pytest


def work(n):
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


@pytest.mark.perf_budget(cpu_s=60, python_fraction=1.0, regression=0.5)
def test_budgeted():
    assert work(300_000)


def test_plain():
    assert work(200_000)
"""


def _keys(value: Any, found: set[str]) -> set[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            found.add(key)
            _keys(item, found)
    elif isinstance(value, list):
        for item in value:
            _keys(item, found)
    return found


def _extra_keys() -> set[str]:
    """Every key the plugin's modules write into a LineStats/TestProfile `extra` dict: the
    registry's (tests/test_architecture.py keeps every other spelling out of the package)."""
    return {value for name, value in vars(extra_keys).items() if name.isupper()}


def _ab_keys() -> set[str]:
    """The keys of the `ab` object, judged and not judged, as the A/B plugin writes them."""
    setup = ab_session.Setup(root=ROOT, rootdir=ROOT, commit="0" * 40, ref="main")
    growth = ab_verdict.LineGrowth("lib.py", "slowed", 8, 1.0, 1.4)
    judged = ab_pairs.Outcome("t.py::t", "fail", "", [1.3] * 10, [1.0] * 10, [1.3] * 10, 1)
    judged.growth, judged.first_ratio = [growth], 1.31
    judged.functions = [
        ab_verdict.FunctionVerdict("lib.py", "slowed", 1.2, 1.1, 6.0, 0.4, 0.44, (900, 990), "fail")
    ]
    judged.function_lines[("lib.py", "slowed")] = growth
    noted = ab_pairs.Outcome("t.py::u", note="not judged: the test exists on one side only")
    results = [ab_plugin.result_of(o, setup) for o in (judged, noted)]
    assert ab_plugin.verdict_of(results[0]) is not None
    return _keys(results, set())


def _leak_entry_keys() -> set[str]:
    evidence = leaks.LineEvidence(LineKey("a.py", 3, "f"), mallocs=40, frees=0, grown_mb=50.0)
    entries = leaks.report([evidence], grew=True, elapsed_s=1.0)
    assert entries, "a line with 40 tracked allocations and no free must be reported"
    return set(entries[0])


def _documented_keys(doc: str) -> set[str]:
    """The keys in the first column of the tables of docs/json-schema.md."""
    return set(re.findall(r"^\| `(\w+)` \|", prose(doc), re.M))


def test_extra_keys_are_found_in_the_code():
    keys = _extra_keys()
    # those the samplers and gates write today: if one is missing, the scan is broken
    # (the verdicts are a TestProfile field, written by core/codec.py under VERDICTS)
    assert {"peak_mb", "leaks", "gpu_util_percent", "baseline", "wait_s"} <= keys


def test_every_key_the_code_writes_is_documented():
    doc = read("json-schema.md")
    written = _extra_keys() | _leak_entry_keys()  # the registry holds the codec's verdicts too
    missing = sorted(written - _documented_keys(doc))
    assert not missing, f"keys written by the plugin but not in docs/json-schema.md: {missing}"


@pytest.mark.slow
def test_every_key_of_a_real_profile_is_documented_and_every_documented_key_exists(pytester):
    pytester.makepyfile(test_docs_suite=SUITE)
    common = ("-p", "no:cacheprovider", "--profile", "--profile-memory=no", "--profile-gpu=no")
    saved = pytester.runpytest_subprocess(*common, "--profile-save-baseline")
    saved.assert_outcomes(passed=2)
    out = pytester.path / "profile.json"
    result = pytester.runpytest_subprocess(
        *common,
        "--profile-compare",
        "--profile-allow-ungated-cpu",
        "--profile-repeat=2",
        "--profile-clock=wall",
        f"--profile-json={out}",
    )
    assert result.ret in (0, 1), result.stdout.str()[-2000:]
    profile = json.loads(out.read_text())
    assert profile["schema"] == SCHEMA_VERSION
    budgeted = profile["tests"]["test_docs_suite.py::test_budgeted"]
    assert budgeted["verdicts"] and budgeted["baseline"] and budgeted["repeat"] == 2
    assert any("wait_s" in line for line in budgeted["lines"])

    tests = profile.pop("tests")
    written = _keys(profile, {"tests"}) | _keys(list(tests.values()), set())
    doc = read("json-schema.md")
    missing = sorted(written - _documented_keys(doc))
    assert not missing, f"keys in a real profile but not in docs/json-schema.md: {missing}"

    ab = _ab_keys()  # --profile-compare-ref needs a git repository: its keys from the code
    assert not sorted(ab - _documented_keys(doc)), "A/B keys missing in docs/json-schema.md"
    selection = {"selection"}  # written only by the costly gates: tests/test_selection.py
    known = written | _extra_keys() | _leak_entry_keys() | ab | selection
    stale = sorted(_documented_keys(doc) - known)
    assert not stale, f"docs/json-schema.md documents keys the plugin never writes: {stale}"


def test_the_json_example_is_a_profile_of_this_schema():
    doc = read("json-schema.md")
    (example,) = code_blocks(doc, "json")
    profile = json.loads(example)
    assert profile["schema"] == SCHEMA_VERSION
    assert f"currently `{SCHEMA_VERSION}`" in doc
    documented = _documented_keys(doc)
    tests = profile.pop("tests")
    unknown = sorted((_keys(profile, set()) | _keys(list(tests.values()), set())) - documented)
    assert not unknown, f"the example has keys the tables do not document: {unknown}"


def test_leak_reporting_thresholds_are_the_codes():
    doc = prose(read("json-schema.md"))
    assert f"above {leaks.REPORT_PROBABILITY:g}" in doc
    assert f"at least {leaks.MIN_GROWTH:.0%}" in doc


# -- the terminal report's columns -------------------------------------------------------------
def test_every_terminal_report_column_is_documented():
    from pytest_scalene.core.model import TestProfile
    from pytest_scalene.reports import terminal_report

    profile = TestProfile("t.py::test", cpu_python_s=1.0)
    stats = profile.line(LineKey("t.py", 3, "test"), 1)
    stats.cpu_python_s = 1.0
    stats.extra.update(  # every figure a line can have, so that every column appears
        wait_s=0.5,
        peak_mb=10.0,
        alloc_mb=10.0,
        python_alloc_fraction=0.5,
        copy_mb_s=1.0,
        gpu_util_percent=50.0,
        gpu_peak_mb=100.0,
    )
    profile.extra["leaks"] = [{"file": "t.py", "line": 3, "probability": 0.99, "rate_mb_s": 1.0}]
    titles = {"".join(c.title.split()) for c in terminal_report._columns(profile)}
    assert len(titles) >= 11
    documented = {"".join(t.split()) for t in re.findall(r"`([^`\n]+)`", read("reports.md"))}
    missing = sorted(titles - documented)
    assert not missing, f"terminal report columns not described in docs/reports.md: {missing}"


# -- budgets -----------------------------------------------------------------------------------
UNIT_WORDS = {
    "s": "seconds",
    "": "fraction",
    "MB": "MB",
    "MB/s": "MB/s",
    "leaks": "`True`",
    "instructions": "count",
}


@pytest.mark.parametrize("keyword", budgets.KEYWORDS)
def test_every_marker_keyword_is_documented_with_its_unit(keyword):
    doc = read("budgets.md")
    row = table_row(doc, f"`{keyword}`")
    metric = METRICS.get(keyword)
    if metric is not None:
        assert UNIT_WORDS[metric.unit] in row, f"{keyword}: unit {metric.unit!r} not in {row!r}"
        if metric.unit not in ("leaks",):
            assert f"{metric.label} " in doc, f"the message label {metric.label!r} is not shown"


def test_size_units_are_the_codes():
    text = section(read("budgets.md"), "Values")
    for unit in natural_values._SIZE_UNITS:
        assert re.search(rf"\b{unit}\b", text, re.I), f"size unit {unit!r} is not documented"


def test_marker_examples_in_the_docs_are_valid():
    calls = 0
    for path in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for block in code_blocks(path.read_text(encoding="utf-8"), "python"):
            for node in ast.walk(ast.parse(block)):
                if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "perf_budget":
                    mark = pytest.mark.perf_budget(
                        *[ast.literal_eval(a) for a in node.args],
                        **{k.arg: ast.literal_eval(k.value) for k in node.keywords},
                    ).mark
                    budgets.parse_marks([(path.name, mark)])  # raises BudgetError if invalid
                    calls += 1
    assert calls >= 8


# -- baselines and the noise rule ----------------------------------------------------------------
def test_noise_rule_constants_are_the_codes():
    doc = read("baselines.md")
    for metric in COMPARED:
        row = table_row(doc, f"`{metric.name}`")
        assert f"+{metric.tolerance * 100:.0f}%" in row, f"{metric.name}: default tolerance"
    listed = re.findall(r"^\| `(\w+)` \|", section(doc, "What is compared"), re.M)
    assert listed == [m.name for m in COMPARED], "the table lists the compared metrics, in order"
    rule = " ".join(section(doc, "The noise rule").split())
    table = " ".join(section(doc, "What is compared").split())
    assert f"max({noise_rule.MIN_CPU_FLOOR_S:g} s, {noise_rule.CPU_FLOOR_INTERVALS} intervals)" in (
        table
    )
    assert f"{noise_rule.GPU_FLOOR_MB:g} MB" in table
    assert f"{options.DEFAULT_MEMORY_THRESHOLD / 2**20:.1f} MB" in table
    assert f"at least {noise_rule.LINE_SHARE:.0%} of the test's total" in rule
    for pause in repeat.CONFIRM_PAUSES_S:
        assert f"{pause:g} s" in rule, f"confirmation pause {pause} s"
    waits = repeat.MACHINE_PAUSES_S
    waiting = f"up to {len(waits)} more rounds ({sum(waits):g} s"
    assert waiting in rule, "the rounds that wait for the machine"
    assert f"more than {machine_speed.SAME_SPEED:g}x the saved one" in rule, "the probe's spread"
    assert f"`schema` | `{BASELINE_SCHEMA}`" in doc


# -- links -------------------------------------------------------------------------------------
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in prose(path.read_text(encoding="utf-8")).splitlines():
        if re.match(r"#{1,6} ", line):
            slug = _slug(line.lstrip("#").strip())
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def links(path: Path) -> list[str]:
    text = re.sub(r"`[^`\n]*`", "", prose(path.read_text(encoding="utf-8")))
    return LINK.findall(text)


def test_slugs_are_githubs():
    assert _slug("Per line (`tests[NODEID].lines[]`)") == "per-line-testsnodeidlines"
    assert (
        _slug("`--profile-include`, `--profile-exclude`") == "--profile-include---profile-exclude"
    )


@pytest.mark.parametrize(
    "path",
    [ROOT / "README.md", *sorted(DOCS.glob("*.md"))],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_relative_links_resolve(path):
    broken = []
    for target in links(path):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        if not resolved.exists():
            broken.append(f"{target} (no file {resolved})")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target} (no heading with anchor #{anchor})")
    assert not broken, f"broken links in {path.name}: {broken}"


def test_the_index_links_every_page():
    index = set(links(DOCS / "README.md"))
    pages = {p.name for p in DOCS.glob("*.md") if p.name != "README.md"}
    assert pages - index == set(), f"docs/README.md does not link {sorted(pages - index)}"
    assert "docs/README.md" in links(ROOT / "README.md")


def test_every_module_the_architecture_page_names_exists():
    text = read("architecture.md")
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_]+(?:\.py|/))`", text))
    named = {n for n in named if not n.startswith("tests/")}  # the package's modules
    assert {"core/model.py", "plugin.py", "gates/", "subprocesses/site/"} <= named  # the scan works
    missing = sorted(n for n in named if not (PACKAGE / n).exists())
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_every_removed_option_is_listed_with_its_replacement():
    removed = section(read("options.md"), "## Removed and renamed options")
    for flag, use in REMOVED.items():
        first = use.split(" (")[0]  # "-v (the per-test report)": the table names the option
        assert f"| `{flag}` | `{first}` |" in removed, f"{flag}: not listed, or not with {use}"


def test_the_option_count_in_the_docs_is_the_codes():
    stated = re.search(r"The options went from (\d+) to (\d+)", read("options.md"))
    assert stated, "options.md no longer states the option count"
    assert int(stated.group(2)) == len(declared_options())  # a new option: say so there
