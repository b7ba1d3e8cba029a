/* The NCCL watchdog's polling loop and decisions (nccl_watch.h). */
#include "comm/nccl_watch.h"

#include "base/error.h"

dt_watch_verdict dt_watchdog_decide(dt_watch_state s, double elapsed, double timeout) {
  if (s == DT_WATCH_DONE) return DT_WATCH_RETURN_OK;
  if (s == DT_WATCH_FAILED) return DT_WATCH_RETURN_ERROR;
  /* the last query saw it pending: only then is the deadline's verdict a timeout */
  return timeout > 0 && elapsed > timeout ? DT_WATCH_TIMED_OUT : DT_WATCH_KEEP_WAITING;
}

int dt_watchdog_wait(const dt_watchdog *w, int world_rank, const char *op, const char *group, int *timed_out) {
  *timed_out = 0;
  double t0 = w->clock(w->ud);
  for (;;) {
    char why[256] = "";
    dt_watch_state s = w->query(w->ud, why, sizeof why);
    switch (dt_watchdog_decide(s, w->clock(w->ud) - t0, w->timeout)) {
    case DT_WATCH_RETURN_OK:
      return DT_OK;
    case DT_WATCH_RETURN_ERROR:
      return dt_error("%s: NCCL error on rank %d in group %s: %s", op, world_rank, group, why);
    case DT_WATCH_TIMED_OUT:
      *timed_out = 1;
      return dt_error("%s: NCCL watchdog: rank %d found the collective still running after %g s in group %s "
                      "(DTLUA_TIMEOUT); the world is ended", op, world_rank, w->timeout, group);
    case DT_WATCH_KEEP_WAITING:
      if (w->pause) w->pause(w->ud);
      break;
    }
  }
}
