/* A stand-in libnvidia-ml.so.1 for tests on machines without a GPU: the real pynvml loads it
 * through ctypes, so the plugin's calls, pynvml's struct layouts and the ctypes cost per read
 * are exercised for real. Figures come from the environment at nvmlInit:
 *   FAKE_NVML_DEVICES (1), FAKE_NVML_UTIL (42), FAKE_NVML_USED_MB (3000),
 *   FAKE_NVML_PROC_MB (512: the calling process's own use), FAKE_NVML_ACCOUNTING (0).
 * The process list holds the calling process and pid 1 (someone else). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MB (1024ULL * 1024ULL)
enum { OK = 0, INVALID_ARGUMENT = 2, INSUFFICIENT_SIZE = 7, NOT_FOUND = 6 };

typedef struct { int index; } device_t;
typedef struct { unsigned int gpu, memory; } utilization_t;
typedef struct { unsigned long long total, free, used; } memory_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} process_t;
typedef struct {
    unsigned int gpuUtilization, memoryUtilization;
    unsigned long long maxMemoryUsage, time, startTime;
    unsigned int isRunning, reserved[5];
} accounting_t;

static device_t devices[8];
static unsigned int count = 1, util = 42, accounting = 0;
static unsigned long long used_mb = 3000, proc_mb = 512;

static unsigned long long env(const char *name, unsigned long long fallback) {
    const char *text = getenv(name);
    return text ? strtoull(text, NULL, 10) : fallback;
}

int nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    count = (unsigned int)env("FAKE_NVML_DEVICES", 1);
    if (count > 8) count = 8;
    util = (unsigned int)env("FAKE_NVML_UTIL", 42);
    used_mb = env("FAKE_NVML_USED_MB", 3000);
    proc_mb = env("FAKE_NVML_PROC_MB", 512);
    accounting = (unsigned int)env("FAKE_NVML_ACCOUNTING", 0);
    for (unsigned int i = 0; i < 8; i++) devices[i].index = (int)i;
    return OK;
}
int nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
int nvmlShutdown(void) { return OK; }
const char *nvmlErrorString(int result) { return result ? "fake NVML error" : "Success"; }

int nvmlDeviceGetCount_v2(unsigned int *out) { *out = count; return OK; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, device_t **out) {
    if (index >= count) return INVALID_ARGUMENT;
    *out = &devices[index];
    return OK;
}
int nvmlDeviceGetName(device_t *device, char *name, unsigned int length) {
    const char *text = "Fake Stub GPU";
    if (length <= strlen(text)) return INSUFFICIENT_SIZE;
    strcpy(name, text);
    (void)device;
    return OK;
}
int nvmlDeviceGetUtilizationRates(device_t *device, utilization_t *out) {
    (void)device;
    out->gpu = util;
    out->memory = util / 2;
    return OK;
}
int nvmlDeviceGetMemoryInfo(device_t *device, memory_t *out) {
    (void)device;
    out->total = 80ULL * 1024ULL * MB;
    out->used = used_mb * MB;
    out->free = out->total - out->used;
    return OK;
}
int nvmlDeviceGetComputeRunningProcesses_v3(device_t *device, unsigned int *n, process_t *out) {
    unsigned int have = device->index == 0 ? 2 : 0;
    if (out == NULL || *n < have) {
        unsigned int asked = *n;
        *n = have;
        return have == 0 || asked >= have ? OK : INSUFFICIENT_SIZE;
    }
    *n = have;
    if (have) {
        memset(out, 0, have * sizeof *out);
        out[0].pid = (unsigned int)getpid();
        out[0].usedGpuMemory = proc_mb * MB;
        out[1].pid = 1;
        out[1].usedGpuMemory = 100 * MB;
    }
    return OK;
}
int nvmlDeviceGetAccountingMode(device_t *device, int *mode) {
    (void)device;
    *mode = (int)accounting;
    return OK;
}
int nvmlDeviceGetAccountingStats(device_t *device, unsigned int pid, accounting_t *out) {
    if (device->index != 0 || pid != (unsigned int)getpid()) return NOT_FOUND;
    memset(out, 0, sizeof *out);
    out->maxMemoryUsage = proc_mb * MB;
    out->isRunning = 1;
    return OK;
}
