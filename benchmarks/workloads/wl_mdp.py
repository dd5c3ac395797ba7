"""Pure-Python graph search: A* on 8-puzzle positions (heapq, dicts, tuples), the kind of
state-space search pyperformance's mdp benchmark does."""

from __future__ import annotations

import heapq
import random

GOAL = (1, 2, 3, 4, 5, 6, 7, 8, 0)
NEIGHBOURS = {
    i: [
        j
        for j in (i - 3, i + 3, i - 1, i + 1)
        if 0 <= j < 9 and (i // 3 == j // 3 or i % 3 == j % 3)
    ]
    for i in range(9)
}


def manhattan(state: tuple[int, ...]) -> int:
    dist = 0
    for pos, tile in enumerate(state):
        if tile:
            goal = tile - 1
            dist += abs(pos // 3 - goal // 3) + abs(pos % 3 - goal % 3)
    return dist


def solve(start: tuple[int, ...]) -> int:
    frontier = [(manhattan(start), 0, start)]
    best = {start: 0}
    while frontier:
        _, cost, state = heapq.heappop(frontier)
        if state == GOAL:
            return cost
        if cost > best[state]:
            continue
        blank = state.index(0)
        for j in NEIGHBOURS[blank]:
            nxt = list(state)
            nxt[blank], nxt[j] = nxt[j], 0
            nxt_t = tuple(nxt)
            if cost + 1 < best.get(nxt_t, 1 << 30):
                best[nxt_t] = cost + 1
                heapq.heappush(frontier, (cost + 1 + manhattan(nxt_t), cost + 1, nxt_t))
    return -1


def scrambled(rng: random.Random, moves: int) -> tuple[int, ...]:
    state, blank = list(GOAL), 8
    for _ in range(moves):
        j = rng.choice(NEIGHBOURS[blank])
        state[blank], state[j] = state[j], 0
        blank = j
    return tuple(state)


def run(scale: float) -> int:
    rng = random.Random(7)
    puzzles = [scrambled(rng, 200) for _ in range(max(2, int(200 * scale)))]
    return sum(solve(p) for p in puzzles)
