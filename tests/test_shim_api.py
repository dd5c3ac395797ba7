"""The allocator shim on its own: a plain Python process with it preloaded, driven through ctypes
and the extension's controls (no pytest plugin involved)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from shim_support import SHIM, needs_shim

pytestmark = needs_shim

SCRIPT = textwrap.dedent(
    r"""
    import ctypes, errno, os, signal
    from pytest_scalene import _native as n

    assert n.shim_loaded()
    libc = ctypes.CDLL(None, use_errno=True)
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    for name, res, args in [
        ("malloc", vp, [sz]), ("calloc", vp, [sz, sz]), ("realloc", vp, [vp, sz]),
        ("free", None, [vp]), ("malloc_usable_size", sz, [vp]), ("aligned_alloc", vp, [sz, sz]),
        ("memalign", vp, [sz, sz]), ("valloc", vp, [sz]), ("pvalloc", vp, [sz]),
        ("posix_memalign", ctypes.c_int, [ctypes.POINTER(vp), sz, sz]),
        ("reallocarray", vp, [vp, sz, sz]),
    ]:
        getattr(libc, name).restype, getattr(libc, name).argtypes = res, args
    MB = 1 << 20
    usable = libc.malloc_usable_size

    # Footprint: the usable size, symmetric on free (Python's own small objects come and go
    # meanwhile: they go through malloc too, hence the slack).
    def near(a, b):
        return abs(a - b) < 16384

    before = n.footprint()
    p = libc.malloc(3 * MB)
    assert near(n.footprint() - before, usable(p)) and usable(p) >= 3 * MB
    libc.free(p)
    libc.free(None)
    assert near(n.footprint(), before)

    # calloc zeroes; realloc keeps the contents and counts old out, new in.
    p = libc.calloc(1000, 1000)
    assert ctypes.string_at(p, 1000) == bytes(1000)
    ctypes.memset(p, 7, 1000)
    p = libc.realloc(p, 5 * MB)
    assert ctypes.string_at(p, 1000) == b"\x07" * 1000
    assert near(n.footprint() - before, usable(p))
    assert libc.realloc(p, 0) is None  # glibc: frees p
    assert near(n.footprint(), before)
    assert libc.reallocarray(None, 1 << 62, 16) is None and ctypes.get_errno() == errno.ENOMEM

    # The aligned family.
    out = vp()
    assert libc.posix_memalign(ctypes.byref(out), 3, 64) == errno.EINVAL
    assert libc.posix_memalign(ctypes.byref(out), 4096, 100) == 0 and out.value % 4096 == 0
    q = [libc.aligned_alloc(256, 1000), libc.memalign(64, 10), libc.valloc(10), libc.pvalloc(10)]
    assert q[0] % 256 == 0 and q[1] % 64 == 0 and q[2] % 4096 == 0 and q[3] % 4096 == 0
    for block in [out.value, *q]:
        libc.free(block)
    assert near(n.footprint(), before)

    # memcpy/memmove are still right (ctypes.memmove calls the C library's memmove).
    buf = ctypes.create_string_buffer(b"abcdefghij")
    ctypes.memmove(ctypes.addressof(buf) + 2, buf, 6)
    assert buf.value == b"ababcdefij"

    # Python's share: small objects come from pymalloc's arenas, counted once hooked.
    n.install_python_hooks()
    before = n.footprint()
    small = [(i, i) for i in range(300_000)]  # ~20 MB of small tuples, in arenas
    grown = n.footprint() - before
    assert 15 * MB < grown < 40 * MB, grown
    del small
    assert n.footprint() - before < grown / 2
    n.install_python_hooks()  # counted: the second uninstall unhooks
    assert n.uninstall_python_hooks() and n.uninstall_python_hooks()

    # Armed: grow, shrink and copy samples, then leak tracking.
    got = []
    signal.signal(signal.SIGXCPU, lambda s, f: got.extend(n.take_samples()))
    n.arm(MB, MB, 2 * MB, signal.SIGXCPU)
    big = libc.malloc(4 * MB)
    ctypes.memmove(big, big + MB, 3 * MB)  # 3 MB copied: one sample of 2 MB, 1 MB carried
    libc.free(big)
    n.disarm()
    got.extend(n.take_samples())
    kinds = [s[0] for s in got]
    assert kinds.count(n.GROW) == 1 and kinds.count(n.SHRINK) == 1, got
    assert [s[6] for s in got if s[0] == n.COPY] == [2 * MB], got
    grow = next(s for s in got if s[0] == n.GROW)
    assert grow[3] >= 4 * MB and grow[5] < MB and grow[8] == __import__("threading").get_ident()
    assert n.peak() - before >= 4 * MB

    got.clear()
    n.arm(100 * MB, MB, 100 * MB, signal.SIGXCPU)
    kept = [libc.malloc(MB + 4096) for _ in range(10)]
    n.disarm()
    got.extend(n.take_samples())
    ids = [s[1] for s in got if s[1] >= 0]
    assert len(ids) >= 8, got
    assert not any(n.leak_freed(i) for i in ids)
    for block in kept:
        libc.free(block)
    assert all(n.leak_freed(i) for i in ids)
    n.arm(MB, MB, MB, signal.SIGXCPU)
    n.disarm()
    assert n.take_samples() == [] and not n.armed()

    # A forked child starts disarmed, whatever the parent was doing.
    n.arm(MB, MB, MB, signal.SIGXCPU)
    pid = os.fork()
    if pid == 0:
        os._exit(0 if not n.armed() else 3)
    n.disarm()
    assert os.waitpid(pid, 0)[1] == 0
    print("SHIM-OK")
    """
)


# The children run outside the checkout: there, `pytest_scalene` would be the source folder,
# which has no built extension when the package is installed non-editable (as in CI).


def test_shim_semantics_in_a_preloaded_process(tmp_path) -> None:
    env = dict(os.environ, LD_PRELOAD=str(SHIM))
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "SHIM-OK" in done.stdout


def test_shim_is_absent_without_preload(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    code = "from pytest_scalene import _native as n; print(n.shim_loaded())"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.stdout.strip() == "False", done.stderr
