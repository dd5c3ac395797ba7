"""The JSON profile (schema documented in docs/json-schema.md): what CI and other tools read.
The dicts come from the profile codec (core/codec.py)."""

from __future__ import annotations

import json
import os

from ..core.atomic_write import write_text_atomic
from ..core.codec import session_to_dict
from ..core.model import SessionProfile


def write_json(session: SessionProfile, path: str | os.PathLike[str]) -> None:
    write_text_atomic(path, json.dumps(session_to_dict(session), indent=1) + "\n")
