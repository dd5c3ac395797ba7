import pytest


@pytest.mark.parametrize("k", range(10))
def test_words(size, k):
    text = " ".join(f"word{(i * 7 + k) % 101}" for i in range(size // 4))
    counts = {}
    for w in text.split():
        counts[w] = counts.get(w, 0) + 1
    assert sum(counts.values()) == size // 4
