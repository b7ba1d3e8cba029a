#!/usr/bin/env python3
"""Runs the differential cases on PyTorch DTensor: N processes (torch.multiprocessing, gloo on
loopback, no torchrun), one process group for all cases of that world size.  Per case: the
inputs are built as each rank's local shard (the shared value formula, Partial parts, torch.chunk
geometry) and wrapped with from_local; the op runs under a dispatch mode that counts the
_c10d_functional collectives and their input bytes on rank 0; full_tensor of every output is
compared with the op on one device.  Writes one JSON line per case (rank 0).

usage: run_torch.py --world 4 cases.jsonl results.jsonl [--timeout 60]
Cases whose mesh does not use exactly --world ranks are skipped.  A case that hangs (gloo
timeout) or kills the group is recorded as "hang" and the run resumes after it.
"""
import argparse
import datetime
import json
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ops  # noqa: E402  (the op table, the value formula)

COLLECTIVES = {
    "all_gather_into_tensor": "all_gather", "all_gather_into_tensor_coalesced": "all_gather",
    "all_reduce": "all_reduce", "all_reduce_coalesced": "all_reduce",
    "reduce_scatter_tensor": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "all_to_all_single": "all_to_all", "broadcast": "broadcast",
}


class CountCollectives:
    """CommDebugMode without numpy: while open, counts the functional collectives that
    DTensor issues (torch.ops._c10d_functional.*, patched for the region; a dispatch mode does
    not see those issued inside DTensor's own dispatch) with their input bytes"""

    def __init__(self):
        self.ops = []
        self.saved = {}

    def __enter__(self):
        ns = torch.ops._c10d_functional
        for name, kind in COLLECTIVES.items():
            try:
                packet = getattr(ns, name)
            except (AttributeError, RuntimeError):
                continue
            self.saved[name] = packet

            def counted(*args, _packet=packet, _kind=kind, **kwargs):
                t = args[0]
                ts = t if isinstance(t, (list, tuple)) else [t]
                self.ops.append((_kind, sum(x.numel() * x.element_size() for x in ts)))
                return _packet(*args, **kwargs)
            setattr(ns, name, counted)
        return self

    def __exit__(self, *exc):
        for name, packet in self.saved.items():
            setattr(torch.ops._c10d_functional, name, packet)
        return False


def summarize(ops):
    out = {"n": len(ops), "bytes": sum(b for _, b in ops), "by": {}}
    for name, _ in ops:
        out["by"][name] = out["by"].get(name, 0) + 1
    return out


def run_case(case, mesh, rank):
    from torch.distributed.tensor import DTensor
    op = torch_ops.OPS[case["op"]]
    args = case["args"]
    globals_ = [torch_ops.global_input(spec) for spec in case["inputs"]]
    dts = [torch_ops.make_dtensor(spec, mesh) for spec in case["inputs"]]
    rec = {"id": case["id"], "op": case["op"], "family": case["family"], "mesh": case["mesh"]}
    try:
        ref = op(globals_, args)
    except Exception as e:  # the op refuses these inputs on one device too
        ref = e
    counter = CountCollectives()
    try:
        with counter:
            outs = op(dts, args)
    except Exception as e:
        rec.update(status="error", error=(type(e).__name__ + ": " + str(e))[:300])
        rec["single_error"] = isinstance(ref, Exception)
        return rec
    rec["comm"] = summarize(counter.ops)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    rec["out_placements"] = [[str(p) for p in o.placements] if isinstance(o, DTensor) else None
                             for o in outs]
    fcount = CountCollectives()
    with fcount:
        fulls = [o.full_tensor() if isinstance(o, DTensor) else o for o in outs]
    rec["full_comm"] = summarize(fcount.ops)
    rec.update(torch_ops.compare(fulls, ref))
    rec["status"] = "ok"
    return rec


def worker(rank, world, cases_path, out_path, start, port, timeout):
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=timeout))
    from torch.distributed.device_mesh import init_device_mesh
    meshes = {}
    cases = [json.loads(l) for l in open(cases_path)]
    cases = [c for c in cases if _ranks(c["mesh"]) == world]
    out = open(out_path, "a") if rank == 0 else None
    progress = out_path + ".current"
    for i in range(start, len(cases)):
        c = cases[i]
        if rank == 0:
            with open(progress, "w") as f:
                f.write("%d %d\n" % (i, c["id"]))
        key = tuple(c["mesh"])
        if key not in meshes:
            meshes[key] = init_device_mesh("cpu", key)
        t0 = time.time()
        try:
            rec = run_case(c, meshes[key], rank)
        except Exception as e:
            rec = {"id": c["id"], "op": c["op"], "family": c["family"], "mesh": c["mesh"],
                   "status": "error", "error": "runner: " + "".join(
                       traceback.format_exception_only(type(e), e))[:300]}
        rec["secs"] = round(time.time() - t0, 4)
        if out:
            out.write(json.dumps(rec) + "\n")
            out.flush()
    if rank == 0:
        with open(progress, "w") as f:
            f.write("done\n")
    dist.destroy_process_group()


def _read(progress):
    try:
        return open(progress).read().split()
    except OSError:
        return []


def _ranks(mesh):
    n = 1
    for m in mesh:
        n *= m
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--timeout", type=int, default=60, help="gloo's timeout (s)")
    ap.add_argument("--case-timeout", type=int, default=40,
                    help="a case running longer is taken as hung (s)")
    ap.add_argument("--port", type=int, default=29611)
    ap.add_argument("cases")
    ap.add_argument("out")
    a = ap.parse_args()
    open(a.out, "w").close()
    progress = a.out + ".current"
    start, port = 0, a.port
    while True:
        if os.path.exists(progress):
            os.remove(progress)
        ctx = mp.spawn(worker, args=(a.world, a.cases, a.out, start, port, a.timeout),
                       nprocs=a.world, join=False)
        ok, seen, since = True, None, time.time()
        try:
            while not ctx.join(timeout=2):
                state = _read(progress)
                if state != seen:
                    seen, since = state, time.time()
                elif state and time.time() - since > a.case_timeout:
                    ok = False
                    break
        except Exception:
            ok = False
        state = _read(progress)
        if ok or state == ["done"]:
            break
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
        if len(state) != 2:
            print("run_torch: the group failed before any case", file=sys.stderr)
            sys.exit(1)
        i, cid = int(state[0]), int(state[1])
        with open(a.out, "a") as f:  # the case in progress hung or killed the group
            f.write(json.dumps({"id": cid, "status": "hang"}) + "\n")
        start, port = i + 1, port + 1


if __name__ == "__main__":
    main()
