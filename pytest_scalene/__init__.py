"""pytest-scalene: per-line CPU, memory, leak, copy and GPU budgets for pytest."""

__version__ = "0.1.0"
