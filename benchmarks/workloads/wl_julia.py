"""Pure-Python CPU: escape-time iterations of a Julia set on a grid (complex arithmetic)."""

C = complex(-0.62772, -0.42193)


def run(scale: float) -> int:
    width = height = max(40, int(580 * scale**0.5))
    max_iter = 300
    total = 0
    for row in range(height):
        y = -1.5 + 3.0 * row / height
        for col in range(width):
            z = complex(-1.8 + 3.6 * col / width, y)
            n = 0
            while abs(z) < 2.0 and n < max_iter:
                z = z * z + C
                n += 1
            total += n
    return total
