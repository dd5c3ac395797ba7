"""Pure-Python CPU with many small objects and method calls: a ray tracer with spheres,
diffuse shading and one reflection bounce (in the spirit of pyperformance's raytrace)."""

from __future__ import annotations

import math


class Vec:
    __slots__ = ("x", "y", "z")

    def __init__(self, x: float, y: float, z: float) -> None:
        self.x, self.y, self.z = x, y, z

    def __add__(self, o: Vec) -> Vec:
        return Vec(self.x + o.x, self.y + o.y, self.z + o.z)

    def __sub__(self, o: Vec) -> Vec:
        return Vec(self.x - o.x, self.y - o.y, self.z - o.z)

    def scale(self, k: float) -> Vec:
        return Vec(self.x * k, self.y * k, self.z * k)

    def dot(self, o: Vec) -> float:
        return self.x * o.x + self.y * o.y + self.z * o.z

    def norm(self) -> Vec:
        return self.scale(1.0 / math.sqrt(self.dot(self)))


class Sphere:
    def __init__(self, center: Vec, radius: float, colour: Vec, reflect: float) -> None:
        self.center, self.radius, self.colour, self.reflect = center, radius, colour, reflect

    def hit(self, origin: Vec, direction: Vec) -> float | None:
        oc = origin - self.center
        b = oc.dot(direction)
        c = oc.dot(oc) - self.radius * self.radius
        disc = b * b - c
        if disc < 0:
            return None
        t = -b - math.sqrt(disc)
        return t if t > 1e-6 else None


SCENE = [
    Sphere(Vec(0, -1000, 0), 999.0, Vec(0.8, 0.8, 0.8), 0.2),
    Sphere(Vec(-1.2, 0, 4), 1.0, Vec(0.9, 0.2, 0.2), 0.3),
    Sphere(Vec(1.2, 0, 5), 1.0, Vec(0.2, 0.9, 0.2), 0.5),
    Sphere(Vec(0, 1.5, 6), 0.8, Vec(0.2, 0.2, 0.9), 0.1),
]
LIGHT = Vec(-3, 5, -2).norm()


def trace(origin: Vec, direction: Vec, depth: int) -> Vec:
    nearest, hit_sphere = math.inf, None
    for sphere in SCENE:
        t = sphere.hit(origin, direction)
        if t is not None and t < nearest:
            nearest, hit_sphere = t, sphere
    if hit_sphere is None:
        return Vec(0.1, 0.1, 0.15)
    point = origin + direction.scale(nearest)
    normal = (point - hit_sphere.center).norm()
    shade = max(0.0, normal.dot(LIGHT))
    colour = hit_sphere.colour.scale(0.1 + 0.9 * shade)
    if depth > 0 and hit_sphere.reflect > 0:
        reflected = direction - normal.scale(2 * direction.dot(normal))
        colour = colour + trace(point, reflected.norm(), depth - 1).scale(hit_sphere.reflect)
    return colour


def run(scale: float) -> float:
    size = max(20, int(380 * scale**0.5))
    eye = Vec(0, 0.3, -1)
    total = 0.0
    for j in range(size):
        for i in range(size):
            d = Vec((i - size / 2) / size, (size / 2 - j) / size, 1.0).norm()
            c = trace(eye, d, 2)
            total += c.x + c.y + c.z
    return round(total, 6)
