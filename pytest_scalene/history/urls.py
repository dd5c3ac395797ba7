"""History URLs: a plain path or sqlite:///PATH for SQLite, postgresql://... for PostgreSQL."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from .store import HistoryError

POSTGRES_SCHEMES = ("postgresql", "postgres")


def sqlite_path(url: str) -> str | None:
    """The file of an SQLite URL, or None when `url` is not one."""
    if "://" not in url:
        return url  # a plain path
    parts = urlsplit(url)
    if parts.scheme != "sqlite":
        return None
    if parts.netloc:
        raise HistoryError(
            f"{url}: an SQLite URL has no host: write sqlite:///relative/path or "
            "sqlite:////absolute/path"
        )
    return unquote(parts.path[1:] if parts.path.startswith("/") else parts.path)


def describe(url: str) -> str:
    """The URL without its password, for messages and reports."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()
