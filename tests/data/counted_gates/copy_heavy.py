COPIES = 4


def copies(src, n):
    kept = []
    for _ in range(n):
        kept.append(bytes(src))  # one memcpy of 16 MB into fresh pages
    return kept


def test_copy_heavy():
    src = bytearray(16 * 2**20)  # fresh pages, faulted in by the first copy
    total = 0
    for i in range(300_000):
        total += i % 7
    kept = copies(src, COPIES)
    assert total > 0 and len(kept) == COPIES
