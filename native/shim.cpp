// Placeholder shim: exports the API table only. Replaced by the allocator interposer.
#include "shim_api.h"

static ShimApi api = {PYTEST_SCALENE_SHIM_ABI};

extern "C" __attribute__((visibility("default"))) ShimApi* pytest_scalene_shim_api() { return &api; }
