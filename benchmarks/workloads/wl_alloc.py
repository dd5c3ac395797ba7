"""Allocation churn: millions of small, short-lived objects (instances, dicts, tuples, lists),
with a working set that grows and is dropped in waves."""

from __future__ import annotations


class Node:
    __slots__ = ("key", "payload", "next")

    def __init__(self, key: int, payload: dict[str, int], nxt: Node | None) -> None:
        self.key, self.payload, self.next = key, payload, nxt


def wave(n: int) -> int:
    head = None
    for i in range(n):
        head = Node(i, {"a": i, "b": i * 2}, head)
    pairs = [(i, str(i)) for i in range(n // 2)]
    total = 0
    while head is not None:
        total += head.payload["b"] - head.key
        head = head.next
    return total + len(pairs)


def run(scale: float) -> int:
    return sum(wave(200_000) for _ in range(max(1, int(6 * scale))))
