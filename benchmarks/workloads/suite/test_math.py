import pytest


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


@pytest.mark.parametrize("k", range(10))
def test_primes(size, k):
    n = size // 3 + k
    sieve = bytearray([1]) * n
    for i in range(2, int(n**0.5) + 1):
        if sieve[i]:
            sieve[i * i :: i] = bytearray(len(range(i * i, n, i)))
    assert sum(sieve) > 0
    assert fib(12 + k % 3) > 0
