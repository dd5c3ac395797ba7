"""--profile-compare-ref=REF: each profiled test run alternately at REF and here, judged on paired
CPU-time ratios (docs/baselines.md, "A/B against a git ref")."""
