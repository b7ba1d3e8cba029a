"""The PyTorch side of the differential cases: the input value formula (run_dtlua.lua has the
same), each rank's local shard, the op table (dims 0-based, as in the cases) and the comparison
with the single-device result."""
import torch
import torch.nn.functional as F


def _flat_values(spec, seed):
    shape, kind = spec["shape"], spec["kind"]
    n = 1
    for s in shape:
        n *= s
    if kind == "float":
        return [((i * 7 + seed * 13) % 23 - 11) / 4 for i in range(n)]
    if kind == "distinct":
        return [((i * 7919 + seed) % n - n // 2) / 4 for i in range(n)] if n else []
    k, bound = kind.split(":")[:2]
    bound = int(bound)
    if k == "index":
        return [(i * 5 + seed) % bound for i in range(n)]
    # perm:<bound>:<dim>: distinct along dim (scatter writes each place once)
    d = int(kind.split(":")[2])
    inner = 1
    for s in shape[d + 1:]:
        inner *= s
    return [((i // inner) % shape[d] + seed + (i // (inner * shape[d])) + i % inner) % bound
            for i in range(n)]


def _tensor(spec, seed):
    dtype = torch.float32 if spec["dtype"] == "float32" else torch.int64
    return torch.tensor(_flat_values(spec, seed), dtype=dtype).reshape(spec["shape"])


def global_input(spec):
    return _tensor(spec, spec["seed"])


def _partial_part(spec, mesh_sizes, coords):
    """this rank's part of a Partial input: parts of mesh dims with P reduce to the global"""
    x = global_input(spec)
    for md, p in enumerate(spec["placements"]):
        if not p.startswith("P"):
            continue
        m, c = mesh_sizes[md], coords[md]
        ys = [_tensor(spec, spec["seed"] + 101 * (md + 1) * k) for k in range(1, m)]
        total = x * m if p == "P(avg)" else x
        x = ys[c - 1] if c > 0 else total - sum(ys, torch.zeros_like(x))
    return x


def local_shard(spec, mesh_sizes, coords):
    x = _partial_part(spec, mesh_sizes, coords)
    for md, p in enumerate(spec["placements"]):
        if p.startswith("S"):
            d = int(p[1:])
            L, n = x.shape[d], mesh_sizes[md]
            cs = -(-L // n)
            start = min(coords[md] * cs, L)
            x = x.narrow(d, start, min(start + cs, L) - start)
    return x.contiguous()


def placement(p):
    from torch.distributed.tensor import Partial, Replicate, Shard
    if p == "R":
        return Replicate()
    if p == "P":
        return Partial()
    if p == "P(avg)":
        return Partial("avg")
    return Shard(int(p[1:]))


def make_dtensor(spec, mesh):
    from torch.distributed.tensor import DTensor
    coords = mesh.get_coordinate()
    loc = local_shard(spec, list(mesh.shape), coords)
    return DTensor.from_local(loc, mesh, [placement(p) for p in spec["placements"]],
                              run_check=False, shape=torch.Size(spec["shape"]),
                              stride=torch.empty(spec["shape"]).stride())


OPS = {
    "neg": lambda t, a: torch.neg(t[0]),
    "exp": lambda t, a: torch.exp(t[0]),
    "relu": lambda t, a: torch.relu(t[0]),
    "tanh": lambda t, a: torch.tanh(t[0]),
    "abs": lambda t, a: torch.abs(t[0]),
    "floor": lambda t, a: torch.floor(t[0]),
    "add": lambda t, a: t[0] + t[1],
    "mul": lambda t, a: t[0] * t[1],
    "sub": lambda t, a: t[0] - t[1],
    "add_bcast": lambda t, a: t[0] + t[1],
    "add_scalar": lambda t, a: t[0] + 2,
    "mul_scalar": lambda t, a: t[0] * 3,
    "sum_all": lambda t, a: t[0].sum(),
    "sum_dim": lambda t, a: t[0].sum(a["dim"], keepdim=a["keepdim"]),
    "mean_dim": lambda t, a: t[0].mean(a["dim"], keepdim=a["keepdim"]),
    "amax_dim": lambda t, a: t[0].amax(a["dim"], keepdim=a["keepdim"]),
    "logsumexp_dim": lambda t, a: t[0].logsumexp(a["dim"], keepdim=a["keepdim"]),
    "mm": lambda t, a: torch.mm(t[0], t[1]),
    "bmm": lambda t, a: torch.bmm(t[0], t[1]),
    "matmul_3d2d": lambda t, a: torch.matmul(t[0], t[1]),
    "dot": lambda t, a: torch.dot(t[0], t[1]),
    "einsum_mm": lambda t, a: torch.einsum("ij,jk->ik", t[0], t[1]),
    "einsum_bmm": lambda t, a: torch.einsum("bij,bjk->bik", t[0], t[1]),
    "transpose": lambda t, a: t[0].transpose(a["dim0"], a["dim1"]),
    "permute": lambda t, a: t[0].permute(*a["dims"]),
    "unsqueeze": lambda t, a: t[0].unsqueeze(a["dim"]),
    "flatten": lambda t, a: t[0].flatten(),
    "view_merge": lambda t, a: t[0].reshape(t[0].shape[0] * t[0].shape[1], t[0].shape[2]),
    "cat": lambda t, a: torch.cat([t[0], t[1]], a["dim"]),
    "stack": lambda t, a: torch.stack([t[0], t[1]], a["dim"]),
    "softmax": lambda t, a: torch.softmax(t[0], a["dim"]),
    "log_softmax": lambda t, a: torch.log_softmax(t[0], a["dim"]),
    "layer_norm": lambda t, a: F.layer_norm(t[0], t[0].shape[-1:]),
    "gather": lambda t, a: torch.gather(t[0], a["dim"], t[1]),
    "scatter": lambda t, a: torch.scatter(t[0], a["dim"], t[1], t[2]),
    "scatter_add": lambda t, a: torch.scatter_add(t[0], a["dim"], t[1], t[2]),
    "sort": lambda t, a: torch.sort(t[0], a["dim"], descending=a["descending"]),
    "topk": lambda t, a: torch.topk(t[0], a["k"], a["dim"]),
    "cumsum": lambda t, a: torch.cumsum(t[0], a["dim"]),
    "index_select": lambda t, a: torch.index_select(t[0], a["dim"], t[1]),
    "flip": lambda t, a: torch.flip(t[0], a["dims"]),
    "roll": lambda t, a: torch.roll(t[0], a["shift"], a["dim"]),
    "tril": lambda t, a: torch.tril(t[0], a["diagonal"]),
    "triu": lambda t, a: torch.triu(t[0], a["diagonal"]),
}


def _as_list(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def compare(fulls, ref):
    """values of the outputs, and how they compare with the single-device result"""
    rec = {"shapes": [list(f.shape) for f in fulls],
           "values": [f.double().reshape(-1).tolist() for f in fulls]}
    if isinstance(ref, Exception):
        rec["single"] = "error"
        return rec
    ref = _as_list(ref)
    if len(ref) != len(fulls) or any(r.shape != f.shape for r, f in zip(ref, fulls)):
        rec["single"] = "shape"
        return rec
    if all(torch.equal(r, f) for r, f in zip(ref, fulls)):
        rec["single"] = "bitwise"
    elif all(torch.allclose(r.double(), f.double(), rtol=1e-5, atol=1e-5, equal_nan=True)
             for r, f in zip(ref, fulls)):
        rec["single"] = "close"
    else:
        rec["single"] = "wrong"
    return rec
