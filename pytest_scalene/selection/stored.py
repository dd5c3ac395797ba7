"""The stored code map a session starts from: the file beside the baselines, else (with
--profile-history) the history's newest run's. Loaded once, with what went wrong said."""

from __future__ import annotations

from pathlib import Path

from .code_map import CodeMap, CodeMapError, load


class StoredMap:
    def __init__(self, path: Path, history_url: str | None) -> None:
        self.path = path
        self.history_url = history_url
        self.problem: str | None = None  # the file exists but cannot be read
        self.source = ""  # where the map came from, for the notes
        self._loaded = False
        self._map: CodeMap | None = None

    def get(self) -> CodeMap | None:
        if not self._loaded:
            self._loaded = True
            self._map = self._load()
        return self._map

    def _load(self) -> CodeMap | None:
        try:
            found = load(self.path)
        except CodeMapError as exc:
            self.problem = str(exc)
            return None
        if found is not None:
            self.source = str(self.path)
            return found
        if not self.history_url:
            return None
        from ..history.connect import open_store
        from ..history.store import HistoryError

        try:
            with open_store(self.history_url) as store:
                text = store.latest_code_map()
            found = None if text is None else CodeMap.from_json(text, "the history's map")
        except (HistoryError, CodeMapError) as exc:
            self.problem = f"the history's code map could not be read: {exc}"
            return None
        if found is not None:
            self.source = "the history's newest run"
        return found
