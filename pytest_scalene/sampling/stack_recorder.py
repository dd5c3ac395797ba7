"""Records the main thread's sampled call stacks per test, for flame-graph exports (speedscope).

A CPU-sampler listener, registered only when an export asks for stacks, so that a normal run pays
nothing. Stacks are collapsed as they come: per test, each distinct stack (a tuple of frame
indexes, outermost first) keeps a sample count and the CPU seconds charged to it.
A stack starts at the outermost frame in profiled code (the test function, usually): pytest's own
frames above it are the same in every sample and would only push the interesting part off screen.
Library frames below it (numpy's Python code, the stdlib) are kept.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any

from ..core.model import LineKey, TestProfile
from .scope import CodeScope

OUTSIDE = "[outside profiled code]"  # the frame charged when no profiled frame is on the stack


@dataclass(frozen=True)
class Frame:
    name: str
    file: str
    line: int  # the function's first line


@dataclass
class StackCounts:
    samples: int = 0
    cpu_s: float = 0.0


@dataclass
class TestStacks:
    stacks: dict[tuple[int, ...], StackCounts] = field(default_factory=dict)


def _display_file(filename: str) -> str:
    """Library paths from the installed package on: `numpy/core/numeric.py`, not the venv."""
    for marker in ("site-packages", "dist-packages"):
        _, found, rest = filename.rpartition(os.sep + marker + os.sep)
        if found:
            return rest
    return filename


class StackRecorder:
    """A `cpu_sampler.SampleListener` that collapses the main thread's stacks per test."""

    def __init__(self, scope: CodeScope) -> None:
        self.scope = scope
        self.frames: list[Frame] = []
        self.tests: dict[str, TestStacks] = {}
        self._frame_index: dict[Frame, int] = {}
        self._by_code: dict[CodeType, int] = {}

    def _index(self, frame: Frame) -> int:
        index = self._frame_index.get(frame)
        if index is None:
            index = self._frame_index[frame] = len(self.frames)
            self.frames.append(frame)
        return index

    def _code_index(self, code: CodeType, name: str | None) -> int:
        index = self._by_code.get(code)
        if index is None:
            file = name if name is not None else _display_file(code.co_filename)
            qualname = getattr(code, "co_qualname", code.co_name)
            index = self._by_code[code] = self._index(Frame(qualname, file, code.co_firstlineno))
        return index

    def stack_of(self, frame: FrameType | None) -> tuple[int, ...]:
        """Frame indexes from the outermost profiled frame down to `frame`, outermost first."""
        walked: list[tuple[CodeType, str | None]] = []
        outermost = -1
        while frame is not None:
            code = frame.f_code
            name = self.scope.relative_name(code.co_filename)
            if name is not None:
                outermost = len(walked)
            walked.append((code, name))
            frame = frame.f_back
        if outermost < 0:
            return (self._index(Frame(OUTSIDE, "", 0)),)
        return tuple(
            self._code_index(code, name) for code, name in reversed(walked[: outermost + 1])
        )

    def on_cpu_sample(
        self, profile: TestProfile, frame: FrameType | None, key: LineKey | None, cpu_s: float
    ) -> None:
        stack = self.stack_of(frame)
        test = self.tests.setdefault(profile.nodeid, TestStacks())
        counts = test.stacks.get(stack)
        if counts is None:
            counts = test.stacks[stack] = StackCounts()
        counts.samples += 1
        counts.cpu_s += cpu_s

    # -- pytest-xdist: workers hand their stacks to the controller, which writes the file ------
    def to_payload(self) -> dict[str, Any]:
        """The recorded stacks as plain JSON-able data."""
        return {
            "frames": [[f.name, f.file, f.line] for f in self.frames],
            "tests": {
                nodeid: [[list(stack), c.samples, c.cpu_s] for stack, c in test.stacks.items()]
                for nodeid, test in self.tests.items()
            },
        }

    def merge_payload(self, payload: dict[str, Any]) -> None:
        """Adds another recorder's `to_payload()`, renumbering its frames into this one's."""
        mapping = [self._index(Frame(str(n), str(f), int(ln))) for n, f, ln in payload["frames"]]
        for nodeid, stacks in payload["tests"].items():
            test = self.tests.setdefault(nodeid, TestStacks())
            for stack, samples, cpu_s in stacks:
                key = tuple(mapping[i] for i in stack)
                counts = test.stacks.setdefault(key, StackCounts())
                counts.samples += int(samples)
                counts.cpu_s += float(cpu_s)
