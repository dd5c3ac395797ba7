import pytest

MB = 2**20


@pytest.mark.perf_budget(peak_mb=200)
def test_peak_within_budget():
    block = b"x" * (40 * MB)
    assert len(block) == 40 * MB


@pytest.mark.perf_budget(peak_mb=20)
def test_peak_over_budget():
    block = b"x" * (60 * MB)
    assert len(block) == 60 * MB


@pytest.mark.perf_budget(alloc_mb="100 MB", leaks=False)
def test_alloc_within_budget():
    blocks = [b"y" * MB for _ in range(30)]
    assert len(blocks) == 30


@pytest.mark.perf_budget(cpu_s=5)
def test_cpu_within_budget():
    assert sum(i * i for i in range(20_000)) > 0
