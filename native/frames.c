// Reads a thread's own Python stack without allocating and without calling into the
// interpreter: the shim's sample path runs inside malloc, where creating frame objects (what
// PyThreadState_GetFrame does on 3.11+) could run the garbage collector or re-enter the
// allocator. Only the calling thread's own frames are read: they cannot change under it, with
// or without the GIL, and each frame holds a strong reference to its code object.
// C, not C++: CPython's internal headers (needed for the frame layout on 3.11+) are C.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX >= 0x030B0000
#define Py_BUILD_CORE 1
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#else
#include <frameobject.h>
#endif

#include <stdint.h>

int pytest_scalene_walk_frames(PyThreadState* tstate, uint64_t* codes, int32_t* lines,
                               int max) {
  int depth = 0;
#if PY_VERSION_HEX >= 0x030D0000
  _PyInterpreterFrame* frame = tstate->current_frame;
#elif PY_VERSION_HEX >= 0x030B0000
  _PyInterpreterFrame* frame = tstate->cframe ? tstate->cframe->current_frame : NULL;
#else
  PyFrameObject* frame = tstate->frame;
#endif
  while (frame != NULL && depth < max) {
#if PY_VERSION_HEX >= 0x030B0000
#if PY_VERSION_HEX >= 0x030C0000
    if (frame->owner == FRAME_OWNED_BY_CSTACK) {  // the C stack's entry shim: no user code
      frame = frame->previous;
      continue;
    }
#endif
#if PY_VERSION_HEX >= 0x030D0000
    if (!PyCode_Check(frame->f_executable)) {
      frame = frame->previous;
      continue;
    }
#endif
    if (_PyFrame_IsIncomplete(frame)) {  // being set up: its instruction pointer is not valid
      frame = frame->previous;
      continue;
    }
#if PY_VERSION_HEX >= 0x030D0000
    PyCodeObject* code = _PyFrame_GetCode(frame);
#else
    PyCodeObject* code = frame->f_code;
#endif
    int lasti = _PyInterpreterFrame_LASTI(frame);
    codes[depth] = (uint64_t)(uintptr_t)code;
    lines[depth] = PyCode_Addr2Line(code, lasti * (int)sizeof(_Py_CODEUNIT));
    depth++;
    frame = frame->previous;
#else
    codes[depth] = (uint64_t)(uintptr_t)frame->f_code;
    lines[depth] = PyFrame_GetLineNumber(frame);
    depth++;
    frame = frame->f_back;
#endif
  }
  return depth;
}
