/* The device registry: one line per device backend. */
#include "tensor/device.h"

#include "config.h"

extern const dt_device dt_cpu_device; /* device_cpu.c */
#ifdef DT_HAVE_CUDA
extern const dt_device dt_cuda_device; /* device_cuda.c */
#endif

static const dt_device *const devices[DT_NDEVICES] = {
    [DT_CPU] = &dt_cpu_device,
#ifdef DT_HAVE_CUDA
    [DT_CUDA] = &dt_cuda_device,
#endif
};
static const char *const names[DT_NDEVICES] = {[DT_CPU] = "cpu", [DT_CUDA] = "cuda"};

const dt_device *dt_device_get(dt_device_type t) { return (unsigned)t < DT_NDEVICES ? devices[t] : NULL; }

const char *dt_device_name(dt_device_type t) { return (unsigned)t < DT_NDEVICES && names[t] ? names[t] : "?"; }
