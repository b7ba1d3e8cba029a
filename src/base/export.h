/* The public API marker.  The libraries are built with -fvisibility=hidden: only what is
 * marked DT_API is exported from libdtensor.so (and luaopen_dtensor_core from the Lua module). */
#ifndef DT_BASE_EXPORT_H
#define DT_BASE_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define DT_API __attribute__((visibility("default")))
#else
#define DT_API
#endif

#endif
