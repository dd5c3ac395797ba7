from collections import deque

import pytest


@pytest.mark.parametrize("k", range(10))
def test_queue(size, k):
    q = deque()
    seen = set()
    for i in range(size // 3):
        q.append((i * 31 + k) % 997)
        if len(q) > 50:
            seen.add(q.popleft())
    assert len(seen) <= 997
