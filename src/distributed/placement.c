/* Placement values, their printing and the shorthand strings. */
#include "distributed/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

int dt_placement_equal(dt_placement a, dt_placement b) {
  if (a.kind != b.kind) return 0;
  if (a.kind == DT_SHARD) return a.dim == b.dim;
  if (a.kind == DT_PARTIAL) return a.op == b.op;
  if (a.kind == DT_STRIDED_SHARD) return a.dim == b.dim && a.split == b.split;
  return 1;
}

int dt_placements_equal(const dt_placement *a, const dt_placement *b, int n) {
  for (int m = 0; m < n; m++)
    if (!dt_placement_equal(a[m], b[m])) return 0;
  return 1;
}

char *dt_placement_format(dt_placement p, char *buf, size_t len) {
  if (p.kind == DT_SHARD) snprintf(buf, len, "Shard(%d)", p.dim >= 0 ? p.dim + 1 : p.dim);
  else if (p.kind == DT_STRIDED_SHARD)
    snprintf(buf, len, "_StridedShard(dim=%d, sf=%d)", p.dim >= 0 ? p.dim + 1 : p.dim, p.split);
  else if (p.kind == DT_PARTIAL) snprintf(buf, len, "Partial(%s)", dt_reduce_op_name(p.op));
  else snprintf(buf, len, "Replicate()");
  return buf;
}

char *dt_placements_format(const dt_placement *p, int n, char *buf, size_t len) {
  size_t pos = 0;
  pos += (size_t)snprintf(buf, len, "(");
  for (int i = 0; i < n && pos < len; i++) {
    char one[48];
    pos += (size_t)snprintf(buf + pos, len - pos, "%s%s", i ? ", " : "", dt_placement_format(p[i], one, sizeof one));
  }
  if (pos < len) snprintf(buf + pos, len - pos, ")");
  return buf;
}

int dt_placement_parse(const char *s, dt_placement *out) {
  out->dim = 0, out->op = DT_REDUCE_SUM, out->split = 0;
  if (strcmp(s, "R") == 0) return out->kind = DT_REPLICATE, DT_OK;
  if (s[0] == 'S' && s[1]) {
    char *end;
    long d = strtol(s + 1, &end, 10);
    if (*end) return dt_error("placement: bad shorthand '%s' (expected e.g. \"S1\", \"R\", \"P\", \"P(max)\")", s);
    if (d == 0) return dt_error("placement: Shard(0) is invalid: tensor dims are 1-based (use \"S1\" for the first dim)");
    out->kind = DT_SHARD, out->dim = d > 0 ? (int)(d - 1) : (int)d;
    return DT_OK;
  }
  if (s[0] == 'P') {
    out->kind = DT_PARTIAL;
    if (!s[1]) return DT_OK;
    size_t n = strlen(s);
    char op[16];
    if (s[1] != '(' || s[n - 1] != ')' || n - 3 >= sizeof op)
      return dt_error("placement: bad shorthand '%s' (expected e.g. \"P\" or \"P(max)\")", s);
    memcpy(op, s + 2, n - 3);
    op[n - 3] = 0;
    return dt_reduce_op_from_name(op, &out->op);
  }
  return dt_error("placement: bad shorthand '%s' (expected e.g. \"S1\", \"R\", \"P\", \"P(max)\")", s);
}
