// The memory sampler's per-test reads of the resident set (pytest_scalene/sampling/resident.py),
// one Python call each: the peak reset and the first reading at a test's start, the kernel's
// high-water mark at its end. In Python each was a write or read of a /proc file, a parse and a
// getrusage struct built field by field: 22 k instructions a test of full mode's per-test cost.
// The files are opened (and reopened after a fork) by the Python side, which passes their
// descriptors; -1 stands for one that could not be opened.
#include <Python.h>

#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

// The resident pages in /proc/self/statm (its second field), or -1 where it cannot be read.
static long long resident_pages(int statm_fd) {
  if (statm_fd < 0) return -1;
  char text[128];
  ssize_t got = pread(statm_fd, text, sizeof text - 1, 0);
  if (got <= 0) return -1;
  text[got] = '\0';
  char* end;
  strtoll(text, &end, 10);  // the size, skipped
  if (end == text) return -1;
  char* field = end;
  errno = 0;
  long long pages = strtoll(field, &end, 10);
  if (end == field || errno != 0 || pages < 0) return -1;
  return pages;
}

// getrusage's ru_maxrss in bytes (the kernel keeps kilobytes).
static long long maxrss_bytes(void) {
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) != 0) return -1;
  return (long long)usage.ru_maxrss * 1024;
}

static int fds(PyObject* const* args, Py_ssize_t nargs, Py_ssize_t want, const char* name) {
  if (nargs == want) return 1;
  PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", name, want, nargs);
  return 0;
}

static PyObject* bytes_or_none(long long pages, long page_size) {
  if (pages < 0) Py_RETURN_NONE;
  return PyLong_FromLongLong(pages * page_size);
}

// start(clear_refs_fd, statm_fd, page_size) -> (peak_reset, resident_bytes | None, maxrss_bytes):
// "5" written to /proc/self/clear_refs resets the kernel's high-water mark to the resident size
// (Linux >= 4.0; peak_reset False where it failed), then the resident size and ru_maxrss read.
static PyObject* start(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  if (!fds(args, nargs, 3, "start")) return NULL;
  int clear_refs_fd = (int)PyLong_AsLong(args[0]);
  int statm_fd = (int)PyLong_AsLong(args[1]);
  long page_size = PyLong_AsLong(args[2]);
  if (PyErr_Occurred()) return NULL;
  int reset = clear_refs_fd >= 0 && pwrite(clear_refs_fd, "5", 1, 0) == 1;
  long long pages = resident_pages(statm_fd);
  long long maxrss = maxrss_bytes();
  if (maxrss < 0) return PyErr_SetFromErrno(PyExc_OSError);
  PyObject* resident = bytes_or_none(pages, page_size);
  if (resident == NULL) return NULL;
  return Py_BuildValue("(ONL)", reset ? Py_True : Py_False, resident, maxrss);
}

// resident(statm_fd, page_size) -> bytes | None: the resident size now.
static PyObject* resident(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  if (!fds(args, nargs, 2, "resident")) return NULL;
  int statm_fd = (int)PyLong_AsLong(args[0]);
  long page_size = PyLong_AsLong(args[1]);
  if (PyErr_Occurred()) return NULL;
  return bytes_or_none(resident_pages(statm_fd), page_size);
}

// maxrss() -> bytes: getrusage's ru_maxrss, the kernel's high-water mark (or the one at exec).
static PyObject* maxrss(PyObject* module, PyObject* unused) {
  long long bytes = maxrss_bytes();
  if (bytes < 0) return PyErr_SetFromErrno(PyExc_OSError);
  return PyLong_FromLongLong(bytes);
}

static PyMethodDef methods[] = {
    {"start", (PyCFunction)(void (*)(void))start, METH_FASTCALL,
     "start(clear_refs_fd, statm_fd, page_size): (peak_reset, resident_bytes or None, "
     "maxrss_bytes)."},
    {"resident", (PyCFunction)(void (*)(void))resident, METH_FASTCALL,
     "resident(statm_fd, page_size): the resident bytes now, or None."},
    {"maxrss", maxrss, METH_NOARGS, "maxrss(): getrusage's ru_maxrss in bytes."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_resident_calls",
                                    "The memory sampler's per-test reads of the resident set.",
                                    -1, methods};

PyMODINIT_FUNC PyInit__resident_calls(void) { return PyModule_Create(&module); }
