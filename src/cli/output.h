/* Per-rank output: replaces `print` so that each call writes whole lines in one write
 * (ranks' lines do not interleave mid-line), optionally tagged "[rank] " (--tag-output)
 * or dropped on ranks other than 0 (--quiet-others). */
#ifndef DTLUA_OUTPUT_H
#define DTLUA_OUTPUT_H

#include <lua.h>

void dtlua_output_install(lua_State *L, int rank, int quiet_others, int tag_output);

#endif
