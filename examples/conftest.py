# The failing budget examples are collected only when named: `pytest examples/` must pass, and
# `pytest examples/failing_budgets/` shows each gate failing (docs/budgets.md).
collect_ignore = ["failing_budgets"]
