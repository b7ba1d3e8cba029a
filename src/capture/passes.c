/* The passes run when recording ends: dead-code elimination (nodes whose outputs nothing
 * live reads, without side effects, are skipped at replay -- a random one still advances the
 * generator), each slot's last use (replay releases a node's output right after its last
 * reader, so its storage goes back to the block cache for the next allocation), and the peak
 * bytes the outputs hold with and without those releases.  A released plain output is kept
 * by its node for the next replay (buffer reuse: replay.c), so a replay in a loop allocates
 * only what it returns. */
#include <stdlib.h>

#include "base/error.h"
#include "capture/graph_impl.h"
#include "ops/ops.h"

int dt_graph_passes(dt_graph *g) {
  int first_own = g->nargs + g->next, ns = g->nslots;
  int *used = calloc((size_t)ns + 1, sizeof *used), *last = malloc(sizeof *last * ((size_t)ns + 1));
  if (!used || !last) return free(used), free(last), dt_error("compile: out of memory");
  for (int i = 0; i < g->nret; i++)
    if (g->ret_slot[i] >= 0) used[g->ret_slot[i]] = 1;
  g->stats.dead = 0;
  for (int k = g->nnodes - 1; k >= 0; k--) { /* backwards: a node lives if a live node reads it */
    gnode *n = &g->nodes[k];
    int live = n->inplace || n->moves || n->kind == NODE_CONV || n->kind == NODE_SET_GRAD ||
               (n->kind == NODE_OP && (dt_op_get(n->op)->flags & DT_OPF_CHECK)) ||
               (g->dyn && n->random); /* a dynamic graph's generator words come from the op's run */
    for (int o = 0; o < n->nout && !live; o++) live = used[n->out[o]];
    n->dead = !live;
    g->stats.dead += n->dead;
    for (int i = 0; live && i < n->nin; i++)
      if (n->in[i] >= 0) used[n->in[i]] = 1;
  }
  for (int s = 0; s < ns; s++) last[s] = -1, g->prod[s] = -1;
  for (int k = 0; k < g->nnodes; k++)
    for (int o = 0; o < g->nodes[k].nout; o++) g->prod[g->nodes[k].out[o]] = k * DT_OP_MAX_OUT + o;
  for (int k = 0; k < g->nnodes; k++) {
    gnode *n = &g->nodes[k];
    if (n->dead) continue;
    for (int i = 0; i < n->nin; i++)
      if (n->in[i] >= 0) last[n->in[i]] = k;
    for (int o = 0; o < n->nout; o++)
      if (last[n->out[o]] < k) last[n->out[o]] = k; /* never read: released right away */
  }
  for (int i = 0; i < g->nret; i++)
    if (g->ret_slot[i] >= 0) last[g->ret_slot[i]] = g->nnodes; /* kept for the caller */
  int64_t live_bytes = 0, peak = 0, all = 0;
  int st = DT_OK;
  for (int k = 0; k < g->nnodes && st == DT_OK; k++) {
    gnode *n = &g->nodes[k];
    free(n->release);
    n->release = NULL, n->nrelease = 0;
    if (n->dead) continue;
    live_bytes += n->out_bytes, all += n->out_bytes;
    if (live_bytes > peak) peak = live_bytes;
    int cnt = 0;
    for (int s = first_own; s < ns; s++) cnt += last[s] == k;
    if (!cnt) continue;
    if (!(n->release = malloc(sizeof *n->release * (size_t)cnt))) {
      st = dt_error("compile: out of memory");
      break;
    }
    for (int s = first_own; s < ns; s++)
      if (last[s] == k) {
        n->release[n->nrelease++] = s;
        const gnode *p = g->prod[s] >= 0 ? &g->nodes[g->prod[s] / DT_OP_MAX_OUT] : NULL; /* its bytes leave */
        if (p && p->nout == 1) live_bytes -= p->out_bytes;
      }
  }
  g->stats.nodes = g->nnodes, g->stats.args = g->nargs, g->stats.externals = g->next, g->stats.returns = g->nret;
  g->stats.peak_bytes = peak, g->stats.peak_bytes_unreleased = all;
  g->stats.collective_nodes = 0;
  for (int k = 0; k < g->nnodes; k++) g->stats.collective_nodes += g->nodes[k].moves && !g->nodes[k].dead;
  free(used), free(last);
  return st == DT_OK ? dt_graph_plan_comm(g) : st;
}
