#!/usr/bin/env python3
"""Writes the differential cases (one JSON object per line) that run_torch.py and run_dtlua.lua
both run.  Seeded: the same --seed gives the same file.  Dims in the cases are 0-based (the
dtlua runner converts).  Input values are made by a formula both runners share (see
values() there), so no data is stored here.

usage: gen_cases.py --seed 1 --count 2000 > cases.jsonl
"""
import argparse
import json
import random

MESHES = [[2], [4], [2, 2]]

# op -> (family, input kinds); the shape/args makers are below
UNARY = ["neg", "exp", "relu", "tanh", "abs", "floor"]
BINARY = ["add", "mul", "sub", "add_bcast"]
SCALAR = ["add_scalar", "mul_scalar"]
REDUCE = ["sum_all", "sum_dim", "mean_dim", "amax_dim", "logsumexp_dim"]
MATMUL = ["mm", "bmm", "matmul_3d2d", "dot", "einsum_mm", "einsum_bmm"]
VIEWS = ["transpose", "permute", "unsqueeze", "flatten", "view_merge"]
JOIN = ["cat", "stack"]
NORMS = ["softmax", "log_softmax", "layer_norm"]
NEW = ["gather", "scatter", "scatter_add", "sort", "topk", "cumsum", "index_select",
       "flip", "roll", "tril", "triu"]
FAMILY = {}
for fam, ops in [("pointwise", UNARY + BINARY + SCALAR), ("reduce", REDUCE),
                 ("matmul", MATMUL), ("view", VIEWS), ("join", JOIN), ("norm", NORMS),
                 ("new", NEW)]:
    for o in ops:
        FAMILY[o] = fam


def dim_size(rng, n):
    """even (a multiple of the mesh size), uneven, zero or one"""
    r = rng.random()
    if r < 0.45:
        return n * rng.randint(1, 3)
    if r < 0.85:
        return rng.choice([x for x in range(1, 2 * n + 2) if x % n])
    if r < 0.93:
        return 1
    return 0


def shape(rng, ndim, n):
    return [dim_size(rng, n) for _ in range(ndim)]


def placements(rng, mesh, ndim, partial_ok):
    out = []
    for _ in mesh:
        r = rng.random()
        if ndim > 0 and r < 0.55:
            out.append("S%d" % rng.randrange(ndim))
        elif partial_ok and r < 0.75:
            out.append(rng.choice(["P", "P", "P", "P(avg)"]))
        else:
            out.append("R")
    return out


def make_case(rng, op, mesh):
    n = max(mesh)
    inp = []   # (shape, dtype, kind); kind: "float" | "distinct" | "index:<bound>"
    args = {}

    def flt(s, kind="float"):
        inp.append([s, "float32", kind])

    if op in UNARY or op in SCALAR:
        flt(shape(rng, rng.randint(1, 3), n))
    elif op in ("add", "mul", "sub"):
        s = shape(rng, rng.randint(1, 3), n)
        flt(s)
        flt(list(s))
    elif op == "add_bcast":
        s = shape(rng, rng.randint(2, 3), n)
        flt(s)
        flt(s[-1:])
    elif op == "sum_all":
        flt(shape(rng, rng.randint(1, 3), n))
    elif op in REDUCE:
        s = shape(rng, rng.randint(1, 3), n)
        if op == "amax_dim":  # amax of an empty dim has no value
            s = [max(x, 1) for x in s]
        flt(s)
        args["dim"] = rng.randrange(len(s))
        args["keepdim"] = rng.random() < 0.3
    elif op in ("mm", "einsum_mm"):
        m, k, j = shape(rng, 3, n)
        flt([m, k])
        flt([k, j])
    elif op in ("bmm", "einsum_bmm"):
        b, m, k, j = shape(rng, 4, n)
        flt([b, m, k])
        flt([b, k, j])
    elif op == "matmul_3d2d":
        b, m, k, j = shape(rng, 4, n)
        flt([b, m, k])
        flt([k, j])
    elif op == "dot":
        (k,) = shape(rng, 1, n)
        flt([k])
        flt([k])
    elif op == "transpose":
        s = shape(rng, rng.randint(2, 3), n)
        flt(s)
        args["dim0"], args["dim1"] = rng.sample(range(len(s)), 2)
    elif op == "permute":
        s = shape(rng, 3, n)
        flt(s)
        p = list(range(3))
        rng.shuffle(p)
        args["dims"] = p
    elif op == "unsqueeze":
        s = shape(rng, rng.randint(1, 3), n)
        flt(s)
        args["dim"] = rng.randrange(len(s) + 1)
    elif op == "flatten":
        flt(shape(rng, rng.randint(2, 3), n))
    elif op == "view_merge":
        flt(shape(rng, 3, n))
    elif op in JOIN:
        s = shape(rng, rng.randint(1, 3), n)
        d = rng.randrange(len(s))
        s2 = list(s)
        if op == "cat":
            s2[d] = dim_size(rng, n)
            args["dim"] = d
        else:
            args["dim"] = rng.randrange(len(s) + 1)
        flt(s)
        flt(s2)
    elif op in ("softmax", "log_softmax"):
        s = shape(rng, rng.randint(1, 3), n)
        flt(s)
        args["dim"] = rng.randrange(len(s))
    elif op == "layer_norm":
        s = shape(rng, rng.randint(1, 3), n)
        s[-1] = max(s[-1], 1)
        flt(s)
    elif op == "gather":
        s = [max(x, 1) for x in shape(rng, rng.randint(1, 3), n)]
        d = rng.randrange(len(s))
        idx = [rng.randint(0, x) for x in s]
        flt(s)
        inp.append([idx, "int64", "index:%d" % s[d]])
        args["dim"] = d
    elif op in ("scatter", "scatter_add"):
        s = [max(x, 1) for x in shape(rng, rng.randint(1, 3), n)]
        d = rng.randrange(len(s))
        idx = [rng.randint(0, x) for x in s]
        flt(s)
        # scatter (not add) must not write one place twice: distinct indices along d
        inp.append([idx, "int64", "perm:%d:%d" % (s[d], d) if op == "scatter" else "index:%d" % s[d]])
        flt(list(idx))
        args["dim"] = d
    elif op in ("sort", "topk"):
        s = shape(rng, rng.randint(1, 3), n)
        d = rng.randrange(len(s))
        flt(s, "distinct")
        args["dim"] = d
        if op == "topk":
            args["k"] = rng.randint(0, s[d])
        else:
            args["descending"] = rng.random() < 0.5
    elif op == "cumsum":
        s = shape(rng, rng.randint(1, 3), n)
        flt(s)
        args["dim"] = rng.randrange(len(s))
    elif op == "index_select":
        s = [max(x, 1) for x in shape(rng, rng.randint(1, 3), n)]
        d = rng.randrange(len(s))
        flt(s)
        inp.append([[rng.randint(0, 6)], "int64", "index:%d" % s[d]])
        args["dim"] = d
    elif op == "flip":
        s = shape(rng, rng.randint(1, 3), n)
        flt(s)
        args["dims"] = sorted(rng.sample(range(len(s)), rng.randint(1, len(s))))
    elif op == "roll":
        s = shape(rng, rng.randint(1, 3), n)
        flt(s)
        args["shift"] = rng.randint(-3, 3)
        args["dim"] = rng.randrange(len(s))
    elif op in ("tril", "triu"):
        flt(shape(rng, 2, n))
        args["diagonal"] = rng.randint(-1, 1)
    else:
        raise ValueError(op)

    inputs = []
    for s, dtype, kind in inp:
        partial_ok = dtype == "float32" and op not in ("sort", "topk")
        inputs.append({"shape": s, "dtype": dtype, "kind": kind, "seed": rng.randrange(1000),
                       "placements": placements(rng, mesh, len(s), partial_ok)})
    return {"op": op, "family": FAMILY[op], "mesh": mesh, "inputs": inputs, "args": args}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=1000)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    ops = sorted(FAMILY)
    for i in range(a.count):
        c = make_case(rng, ops[i % len(ops)], MESHES[(i // len(ops)) % len(MESHES)])
        c["id"] = i
        print(json.dumps(c, separators=(",", ":")))


if __name__ == "__main__":
    main()
