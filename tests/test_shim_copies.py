"""Copy volume through every interposed copy function (issue 14): known byte counts copied
through memcpy, memmove, mempcpy, wmemcpy and the FORTIFY variants (__memcpy_chk,
__memmove_chk, __mempcpy_chk, __wmemcpy_chk) are counted within 10%, once each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from shim_support import SHIM, needs_shim

pytestmark = needs_shim

SCRIPT = textwrap.dedent(
    r"""
    import ctypes, json, signal
    from pytest_scalene import _native as n

    MB = 1 << 20
    CHUNK, TOTAL = 4 * MB, 64 * MB
    libc = ctypes.CDLL(None)  # the global scope: the shim's definitions come first
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    src = ctypes.create_string_buffer(b"x" * CHUNK, CHUNK)
    dst = ctypes.create_string_buffer(CHUNK)
    WIDE = sz(CHUNK // ctypes.sizeof(ctypes.c_wchar))
    calls = {
        "memcpy": lambda: libc.memcpy(dst, src, sz(CHUNK)),
        "memmove": lambda: libc.memmove(dst, src, sz(CHUNK)),
        "mempcpy": lambda: libc.mempcpy(dst, src, sz(CHUNK)),
        "wmemcpy": lambda: libc.wmemcpy(dst, src, WIDE),
        "__memcpy_chk": lambda: libc.__memcpy_chk(dst, src, sz(CHUNK), sz(CHUNK)),
        "__memmove_chk": lambda: libc.__memmove_chk(dst, src, sz(CHUNK), sz(CHUNK)),
        "__mempcpy_chk": lambda: libc.__mempcpy_chk(dst, src, sz(CHUNK), sz(CHUNK)),
        "__wmemcpy_chk": lambda: libc.__wmemcpy_chk(dst, src, WIDE, WIDE),
    }
    for name in calls:
        getattr(libc, name).restype = vp
    signal.signal(signal.SIGXCPU, lambda s, f: None)
    counted = {}
    for name, call in calls.items():
        ctypes.memset(dst, 0, CHUNK)
        n.arm(1 << 40, 1 << 40, MB, signal.SIGXCPU)  # one copy sample per MB copied
        for _ in range(TOTAL // CHUNK):
            call()
        n.disarm()
        counted[name] = sum(s[6] for s in n.take_samples() if s[0] == n.COPY)
        assert dst.raw == src.raw, name  # and the copy was made
    print(json.dumps({"total": TOTAL, "counted": counted}))
    """
)


def test_every_copy_function_is_counted(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=dict(os.environ, LD_PRELOAD=str(SHIM)),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    total = result["total"]
    for name, counted in result["counted"].items():
        assert abs(counted - total) <= 0.1 * total, (name, counted, total)
