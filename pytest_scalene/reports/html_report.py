"""The HTML profile: one self-contained file that opens without network access.

The page embeds the same JSON that --profile-json writes (core/codec.py), the source text of the
profiled files, the per-line diffs against the stored baselines (each failed test's, the suite's
sum) and the sampled stacks (reports/html_data.py), each in a <script type="application/json">
block, and draws
itself from them with the inline script of report_template.html: no external script, style, font
or image. Its Content-Security-Policy allows only that script (by hash), inline styles and data:
images, so even a bug in the page cannot make it fetch anything.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
from functools import cache
from importlib import resources
from typing import Any

from ..core.atomic_write import write_text_atomic
from ..core.codec import session_to_dict
from ..core.model import SessionProfile
from ..sampling.stack_recorder import StackRecorder
from .html_data import baseline_diffs, source_files, stack_data

TEMPLATE = "report_template.html"
DEFAULT_TITLE = "pytest-scalene profile"
# JSON is safe inside <script> once "<" cannot start "</script>" or "<!--"; ">" and "&" are
# escaped too so the text reads the same to an HTML parser and a JSON parser. "\u003c" is valid
# JSON for "<", so JSON.parse gives back exactly the original data.
_SCRIPT_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}
_SCRIPT_RE = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def embed_json(data: Any) -> str:
    """`data` as JSON text that can sit inside a <script> element unchanged."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return re.sub("[<>&]", lambda m: _SCRIPT_ESCAPES[m.group()], text)


@cache
def _template() -> tuple[str, str]:
    """The template and its Content-Security-Policy (the inline script allowed by its hash)."""
    text = resources.files(__package__).joinpath(TEMPLATE).read_text(encoding="utf-8")
    scripts = _SCRIPT_RE.findall(text)
    if len(scripts) != 1:
        raise RuntimeError(f"{TEMPLATE} must hold exactly one executable <script>")
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode("utf-8")).digest()).decode()
    csp = (
        "default-src 'none'; "
        f"script-src 'sha256-{digest}'; "
        "style-src 'unsafe-inline'; "
        "img-src data:; "
        "base-uri 'none'; form-action 'none'"
    )
    return text, csp


def render_html(
    session: SessionProfile,
    rootdir: str,
    title: str = DEFAULT_TITLE,
    stacks: StackRecorder | None = None,
) -> str:
    """The page; `stacks`: the sampled call stacks, when recorded, for the flame graphs (without
    them the page draws its flame graphs from the lines: test, file, function, line)."""
    template, csp = _template()
    data = session_to_dict(session)
    # One pass over the template, so that a placeholder-like string inside the data (a test id,
    # a source line) is never substituted again.
    values = {
        "{{CSP}}": html.escape(csp, quote=False),  # the CSP has no '"'; keep its quotes readable
        "{{TITLE}}": html.escape(title),
        "{{PROFILE_JSON}}": embed_json(data),
        "{{SOURCES_JSON}}": embed_json(source_files(session, rootdir)),
        "{{COMPARE_JSON}}": embed_json(baseline_diffs(session, rootdir)),
        "{{STACKS_JSON}}": embed_json(stack_data(session, stacks)),
    }
    return re.sub("|".join(map(re.escape, values)), lambda m: values[m.group()], template)


def write_html(
    session: SessionProfile,
    path: str | os.PathLike[str],
    rootdir: str,
    title: str = DEFAULT_TITLE,
    stacks: StackRecorder | None = None,
) -> None:
    write_text_atomic(path, render_html(session, rootdir, title, stacks))
