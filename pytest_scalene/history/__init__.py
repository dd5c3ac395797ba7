"""Run history: every profiled run recorded in a store (SQLite or PostgreSQL), trends with
change points, and judging a run against the recent runs of the same machine (docs/history.md)."""
