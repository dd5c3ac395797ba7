"""Is a thread's frame sitting on a call? Then it is running native code (or blocked in it);
otherwise it is running Python bytecode. Decided with `dis` and cached per (code, offset)."""

from __future__ import annotations

import dis
from types import CodeType, FrameType

_CALL_OPCODES = frozenset(
    dis.opmap[name]
    for name in (
        "CALL",
        "CALL_FUNCTION",
        "CALL_FUNCTION_KW",
        "CALL_FUNCTION_EX",
        "CALL_METHOD",
        "CALL_KW",
        "PRECALL",
    )
    if name in dis.opmap
)

_cache: dict[tuple[CodeType, int], bool] = {}


def on_call(frame: FrameType) -> bool:
    """True when `frame`'s current instruction is one of the CALL family."""
    key = (frame.f_code, frame.f_lasti)
    try:
        return _cache[key]
    except KeyError:
        code = frame.f_code.co_code
        lasti = frame.f_lasti
        result = 0 <= lasti < len(code) and code[lasti] in _CALL_OPCODES
        if len(_cache) > 100_000:
            _cache.clear()
        _cache[key] = result
        return result
