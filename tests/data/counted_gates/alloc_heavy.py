BLOCKS = 4


def allocate(n):
    kept = []
    for _ in range(n):
        kept.append(bytearray(16 * 2**20))  # 16 MB each, kept to the end of the test
    return kept


def test_alloc_heavy():
    total = 0
    for i in range(300_000):
        total += i % 7
    kept = allocate(BLOCKS)
    assert total > 0 and len(kept) == BLOCKS
