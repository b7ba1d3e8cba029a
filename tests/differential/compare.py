#!/usr/bin/env python3
"""Compares the results of run_torch.py and run_dtlua.lua on the same cases: per library the
cases, errors (refusals), hangs and wrong values against its own single-device result; across
the two the values of the cases both ran; the collectives and bytes (rank 0, the op alone and
the op + full_tensor) over the cases both ran, per op family; and the cases where dtlua
communicates more than PyTorch.

usage: compare.py torch.jsonl[,more] dtlua.jsonl[,more] [--list N]
"""
import argparse
import json
import math
from collections import Counter, defaultdict


def load(paths):
    out = {}
    for p in paths.split(","):
        for line in open(p):
            r = json.loads(line)
            out[r["id"]] = r
    return out


def values_equal(a, b):
    if a.get("shapes") != b.get("shapes"):
        return False
    for va, vb in zip(a["values"], b["values"]):
        if len(va) != len(vb):
            return False
        for x, y in zip(va, vb):
            if not (x == y or (math.isnan(x) and math.isnan(y))
                    or abs(x - y) <= 1e-5 * (1 + abs(y))):
                return False
    return True


def comm(r, key="comm"):
    c = r.get(key) or {}
    return c.get("n", 0), c.get("bytes", 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("torch")
    ap.add_argument("dtlua")
    ap.add_argument("--list", type=int, default=40, help="how many 'more' cases to print")
    a = ap.parse_args()
    T, D = load(a.torch), load(a.dtlua)
    ids = sorted(set(T) & set(D))
    print("cases: torch %d, dtlua %d, in both %d" % (len(T), len(D), len(ids)))
    for name, R in (("torch", T), ("dtlua", D)):
        st = Counter(r["status"] for r in R.values())
        single = Counter(r.get("single") for r in R.values() if r["status"] == "ok")
        print("%-6s ok %d (bitwise %d, close %d, wrong %d, shape %d, single-device error %d), "
              "errors %d, hangs %d" % (
                  name, st["ok"], single["bitwise"], single["close"], single["wrong"],
                  single["shape"], single["error"], st["error"], st["hang"]))
        errs = Counter(r["op"] for r in R.values() if r["status"] == "error")
        if errs:
            print("       errors by op: " + ", ".join("%s %d" % kv for kv in sorted(errs.items())))
    both = [i for i in ids if T[i]["status"] == "ok" and D[i]["status"] == "ok"]
    differ = [i for i in both if not values_equal(T[i], D[i])]
    print("both ok: %d; values differ between the two: %d%s" % (
        len(both), len(differ), (" (ids %s)" % differ[:20]) if differ else ""))
    wrong = [(n, i) for n, R in (("torch", T), ("dtlua", D)) for i in ids
             if R[i]["status"] == "ok" and R[i].get("single") in ("wrong", "shape")]
    for n, i in wrong[:20]:
        print("  wrong vs one device: %s case %d (%s)" % (n, i, T[i].get("op")))

    fam = defaultdict(lambda: [0, 0, 0, 0, 0, 0, 0, 0, 0])
    more = []
    for i in both:
        t, d = T[i], D[i]
        (tn, tb), (dn, db) = comm(t), comm(d)
        (tfn, tfb), (dfn, dfb) = comm(t, "full_comm"), comm(d, "full_comm")
        f = fam[t["family"]]
        for k, v in enumerate((1, tn, tb, dn, db, tn + tfn, tb + tfb, dn + dfn, db + dfb)):
            f[k] += v
        if dn > tn or db > tb:
            more.append(i)
    print("\ncollectives and bytes on rank 0 over the cases both ran (op alone | op + full_tensor)")
    print("%-10s %6s %8s %10s %8s %10s | %8s %10s %8s %10s" % (
        "family", "cases", "torch n", "bytes", "dtlua n", "bytes", "torch n", "bytes",
        "dtlua n", "bytes"))
    tot = [0] * 9
    for name in sorted(fam):
        f = fam[name]
        tot = [x + y for x, y in zip(tot, f)]
        print("%-10s %6d %8d %10d %8d %10d | %8d %10d %8d %10d" % ((name,) + tuple(f)))
    print("%-10s %6d %8d %10d %8d %10d | %8d %10d %8d %10d" % (("all",) + tuple(tot)))

    print("\ndtlua communicates more than torch (op alone, count or bytes): %d cases" % len(more))
    by_op = Counter(T[i]["op"] for i in more)
    if by_op:
        print("  by op: " + ", ".join("%s %d" % kv for kv in sorted(by_op.items())))
    cases = {}
    for i in more[:a.list]:
        t, d = T[i], D[i]
        print("  case %d %s mesh %s: torch %s %dB -> %s, dtlua %s %dB -> %s" % (
            i, t["op"], t["mesh"], t["comm"]["by"] or "{}", t["comm"]["bytes"],
            t.get("out_placements"), d["comm"]["by"] or "{}", d["comm"]["bytes"],
            d.get("out_placements")))
    less = sum(1 for i in both if comm(D[i]) < comm(T[i]))
    print("dtlua communicates less than torch: %d cases" % less)


if __name__ == "__main__":
    main()
