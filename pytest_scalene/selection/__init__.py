"""Test selection by code map (docs/selection.md): which code each test ran, and whether any of
it changed since, so that the costly gates re-measure only the tests a change touches."""
