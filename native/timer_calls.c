// The CPU sampler's per-test system calls, one Python call at each end of a test
// (pytest_scalene/sampling/cpu_sampler.py). In Python the same work was about twenty calls a test
// (signal and timer checks, arming, three clocks), run cold between pytest's own work; and the
// kernel's handler was read through ctypes, whose import a CPU-only session paid for this alone.
// Readings are converted exactly as the signal and resource modules convert theirs, so that a
// test's start read here and a sample read there subtract without a rounding step.
#include <Python.h>

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/time.h>

// signalmodule.c and resource.c: seconds from a timeval.
static double timer_seconds(struct timeval tv) { return tv.tv_sec + (tv.tv_usec / 1000000.0); }
static double usage_seconds(struct timeval tv) {
  return (double)tv.tv_sec + (double)tv.tv_usec * 0.000001;
}

// signal.setitimer's rounding: seconds to nanoseconds, then to microseconds, both up.
static struct timeval timeval_up(double seconds) {
  long long ns = (long long)ceil(seconds * 1e9);
  long long us = (ns + 999) / 1000;
  struct timeval tv = {(time_t)(us / 1000000), (suseconds_t)(us % 1000000)};
  return tv;
}

// The kernel's handler for a signal: its address (0 default, 1 ignore), None if unknown. A
// handler set in C (faulthandler.register, a preloaded library) is invisible to getsignal.
static PyObject* kernel_handler(PyObject* module, PyObject* arg) {
  int signum = (int)PyLong_AsLong(arg);
  if (signum == -1 && PyErr_Occurred()) return NULL;
  struct sigaction action;
  if (sigaction(signum, NULL, &action) != 0) Py_RETURN_NONE;
  return PyLong_FromVoidPtr((void*)action.sa_handler);
}

static int parse(PyObject* const* args, Py_ssize_t nargs, Py_ssize_t want, const char* name) {
  if (nargs == want) return 1;
  PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", name, want, nargs);
  return 0;
}

// begin(signum, handler, itimer, interval_s) -> (user_s, system_s, until_expiry_s) or None.
// None, with nothing changed, where the signal's kernel handler is no longer `handler` or the
// timer is running: code that bypassed the signal guard took them (the caller then looks why).
// Else the timer is armed with `interval_s` and the clocks are read after arming. Arming returns
// the timer as it was, so no getitimer first: a running one (rare) is put back as it was.
static PyObject* begin(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  if (!parse(args, nargs, 4, "begin")) return NULL;
  int signum = (int)PyLong_AsLong(args[0]);
  void* handler = PyLong_AsVoidPtr(args[1]);
  int which = (int)PyLong_AsLong(args[2]);
  double interval = PyFloat_AsDouble(args[3]);
  if (PyErr_Occurred()) return NULL;
  struct sigaction action;
  struct itimerval timer, was;
  if (sigaction(signum, NULL, &action) != 0 || (void*)action.sa_handler != handler) Py_RETURN_NONE;
  timer.it_interval = timer.it_value = timeval_up(interval);
  if (setitimer(which, &timer, &was) != 0) return PyErr_SetFromErrno(PyExc_OSError);
  if (was.it_value.tv_sec != 0 || was.it_value.tv_usec != 0) {
    if (setitimer(which, &was, NULL) != 0) return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
  }
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) != 0 || getitimer(which, &timer) != 0)
    return PyErr_SetFromErrno(PyExc_OSError);
  return Py_BuildValue("(ddd)", usage_seconds(usage.ru_utime), usage_seconds(usage.ru_stime),
                       timer_seconds(timer.it_value));
}

// end(itimer, interval_s) -> (user_s, system_s): the timer disarmed where it is still the
// sampler's (its interval `interval_s` as getitimer reads it, or expired), then the clocks read.
// Disarming returns the timer as it was: another's (rare) is put back.
static PyObject* end(PyObject* module, PyObject* const* args, Py_ssize_t nargs) {
  if (!parse(args, nargs, 2, "end")) return NULL;
  int which = (int)PyLong_AsLong(args[0]);
  double interval = PyFloat_AsDouble(args[1]);
  if (PyErr_Occurred()) return NULL;
  struct itimerval off = {{0, 0}, {0, 0}}, was;
  if (setitimer(which, &off, &was) != 0) return PyErr_SetFromErrno(PyExc_OSError);
  double running = timer_seconds(was.it_interval);
  if (running != 0.0 && running != interval && setitimer(which, &was, NULL) != 0)
    return PyErr_SetFromErrno(PyExc_OSError);
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) != 0) return PyErr_SetFromErrno(PyExc_OSError);
  return Py_BuildValue("(dd)", usage_seconds(usage.ru_utime), usage_seconds(usage.ru_stime));
}

static PyMethodDef methods[] = {
    {"kernel_handler", kernel_handler, METH_O,
     "kernel_handler(signum): the kernel's handler address (0 default, 1 ignore), or None."},
    {"begin", (PyCFunction)(void (*)(void))begin, METH_FASTCALL,
     "begin(signum, handler, itimer, interval_s): (user_s, system_s, until_expiry_s), or None "
     "where the signal's handler is not `handler` or the timer runs."},
    {"end", (PyCFunction)(void (*)(void))end, METH_FASTCALL,
     "end(itimer, interval_s): disarm the sampler's timer, then (user_s, system_s)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_timer_calls",
                                    "The CPU sampler's per-test system calls.", -1, methods};

PyMODINIT_FUNC PyInit__timer_calls(void) { return PyModule_Create(&module); }
