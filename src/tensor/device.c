/* The device registry: one line per device backend. */
#include "tensor/device.h"

extern const dt_device dt_cpu_device; /* device_cpu.c */

static const dt_device *const devices[DT_NDEVICES] = {[DT_CPU] = &dt_cpu_device};
static const char *const names[DT_NDEVICES] = {[DT_CPU] = "cpu", [DT_CUDA] = "cuda"};

const dt_device *dt_device_get(dt_device_type t) { return (unsigned)t < DT_NDEVICES ? devices[t] : NULL; }

const char *dt_device_name(dt_device_type t) { return (unsigned)t < DT_NDEVICES && names[t] ? names[t] : "?"; }
