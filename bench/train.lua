-- Training benchmark: tokens/s of the demo's GPT (examples/gpt_model.lua) at a fixed size --
-- 4 layers, width 256, 4 heads, context 128, batch 16, vocab 256, float32, dropout 0.1 -- one
-- training step being forward, cross-entropy, backward, clip_grad_norm_(1.0), AdamW step and
-- zero_grad, on every dp x tp factorisation of the world's ranks (1: 1x1; 2: 1x2, 2x1;
-- 4: 2x2, 1x4, 4x1; placed by dt.distribute_module with the demo's partition, the batch split
-- over dp), next to PyTorch measured in the same run where it is installed.
--
-- Each step's time is split three ways:
--   communication  the collectives one step issues, as dt.comm_debug records them (name,
--                  bytes, group size), replayed alone through dt.distributed on groups of the
--                  same size with float32 buffers of the same bytes (the collectives carry
--                  no timing of their own); on a 2x2 mesh the dp and tp groups have the same
--                  size and the replay uses the tp groups, which time the same by symmetry;
--   compute        the same local math on plain tensors of each rank's shard shapes: the
--                  model with q/k/v, the MLP's first layer and the head narrowed to 1/tp of
--                  their output features, the attention output and the MLP's second layer to
--                  1/tp of their inputs, heads/tp heads, batch/dp rows, the loss on the local
--                  logits, clip and AdamW on the local parameters -- no collectives, no
--                  DTensors (bench/autograd.lua's "bare" baseline, for a whole model);
--   framework      the rest: step - communication - compute (the DTensor layer: dispatch,
--                  redistribution plans, conversions, waiting on the slowest rank).
--
-- PyTorch (rank 0 runs it while the other ranks wait at a barrier; threads backend only --
-- under mpirun the waiting ranks poll and would share the cores, so the mpirun run prints
-- its own figures against the threads run's PyTorch lines):
--   eager          the same model on one process with the world's total BLAS threads;
--   DTensor        torch.distributed.tensor.parallel on the same dp x tp meshes over gloo
--                  (torch.distributed.run, one process per rank, each with one rank's
--                  threads): ColwiseParallel on q/k/v, the MLP's first layer and the head,
--                  RowwiseParallel on the attention output and the MLP's second layer, the
--                  other parameters replicated and every gradient all-reduced (averaged)
--                  over dp, clipping by the global norm, AdamW.
--
-- usage (from the build dir): ./dtlua -n N bench/train.lua [quick]
--   Threads per rank (intra-op and BLAS): DTLUA_NUM_THREADS, else the cores / the ranks.  quick: tiny sizes, no
--   PyTorch (tests/spec/bench_spec.lua).  Times are medians of the timed steps, each step
--   between two barriers.
local here = (arg and arg[0] or ""):match("^(.*)/") or "bench"
local gpt = dofile(here .. "/../examples/gpt_model.lua")
local nn, F, D = dt.nn, dt.F, dt.distributed
local R, S = dt.Replicate(), dt.Shard
local quick = arg and arg[1] == "quick"
local rank, ranks = dt.rank(), dt.world_size()

local CFG = {layers = 4, width = 256, heads = 4, context = 128, batch = 16, vocab = 256, dropout = 0.1}
if quick then CFG = {layers = 1, width = 32, heads = 4, context = 16, batch = 4, vocab = 32, dropout = 0.1} end
local WARMUP, ITERS = quick and 1 or 2, quick and 2 or 5
local LR, WD = 3e-3, 0.01
local TOKENS = CFG.batch * CFG.context

local function say(...) print(string.format(...)) end
local baseline = dofile(here .. "/load_baseline.lua")
local now = baseline.now
local THREADS = baseline.blas_threads() -- BLAS threads of this process

local function meshes()
  if ranks == 1 then return {{1, 1}} end
  local out = {{1, ranks}, {ranks, 1}}
  if ranks == 4 then table.insert(out, 1, {2, 2}) end
  return out
end

-- median of ITERS timed calls after WARMUP untimed ones, each between barriers (ms)
local function time_steps(step)
  for _ = 1, WARMUP do step() end
  local t = {}
  for i = 1, ITERS do
    collectgarbage()
    dt.barrier()
    local t0 = now()
    step()
    dt.barrier()
    t[i] = (now() - t0) * 1e3
  end
  table.sort(t)
  return t[(#t + 1) // 2]
end

-- ---- the DTensor run ----
local function dtensor_setup(dp, tp)
  local mesh = dt.init_device_mesh("cpu", {dp, tp}, {"dp", "tp"})
  dt.manual_seed(1)
  local model = gpt.GPT(CFG.vocab, CFG.context, CFG):to("float32")
  dt.distribute_module(model, mesh, gpt.partition)
  local pos_ids = dt.distribute_tensor(dt.arange(1, CFG.context + 1):reshape(1, CFG.context), mesh, {R, R})
  local opt = dt.optim.AdamW(model:parameters(), {lr = LR, weight_decay = WD})
  local on_mesh = {device_mesh = mesh, placements = {S(1), R}}
  local input = dt.randint(1, CFG.vocab + 1, {CFG.batch, CFG.context}, on_mesh)
  local target = dt.randint(1, CFG.vocab + 1, {CFG.batch, CFG.context}, on_mesh)
  local n = CFG.batch * CFG.context
  local function step()
    local logits = model(input, pos_ids)
    local loss = F.cross_entropy(logits:reshape(n, CFG.vocab), target:reshape(n))
    loss:backward()
    dt.nn.utils.clip_grad_norm_(model:parameters(), 1.0)
    opt:step()
    opt:zero_grad()
  end
  return step, mesh
end

-- ---- the same local math on plain tensors of the shard shapes ----
local LocalAttention = nn.Module:extend("LocalAttention")
function LocalAttention:init(width, heads, tp, p)
  local w = width // tp
  self.heads, self.hd = heads // tp, width // heads
  self.q = nn.Linear(width, w, {bias = false})
  self.k = nn.Linear(width, w, {bias = false})
  self.v = nn.Linear(width, w, {bias = false})
  self.out = nn.Linear(w, width)
  self.drop = nn.Dropout(p)
end
function LocalAttention:forward(x)
  local b, l = x:size(1), x:size(2)
  local h, hd = self.heads, self.hd
  local function split(t) return t:view(b, l, h, hd):transpose(2, 3) end
  local y = F.scaled_dot_product_attention(split(self.q(x)), split(self.k(x)), split(self.v(x)), {is_causal = true})
  return self.drop(self.out(y:transpose(2, 3):reshape(b, l, h * hd)))
end
local LocalBlock = nn.Module:extend("LocalBlock")
function LocalBlock:init(width, heads, tp, p)
  self.norm1 = nn.LayerNorm(width)
  self.attn = LocalAttention(width, heads, tp, p)
  self.norm2 = nn.LayerNorm(width)
  self.mlp = nn.Sequential(nn.Linear(width, 4 * width // tp), nn.GELU(), nn.Linear(4 * width // tp, width), nn.Dropout(p))
end
function LocalBlock:forward(x)
  x = x + self.attn(self.norm1(x))
  return x + self.mlp(self.norm2(x))
end
local LocalGPT = nn.Module:extend("LocalGPT")
function LocalGPT:init(tp)
  self.tokens = nn.Embedding(CFG.vocab, CFG.width)
  self.positions = nn.Embedding(CFG.context, CFG.width)
  self.drop = nn.Dropout(CFG.dropout)
  local blocks = {}
  for i = 1, CFG.layers do blocks[i] = LocalBlock(CFG.width, CFG.heads, tp, CFG.dropout) end
  self.blocks = nn.ModuleList(blocks)
  self.norm = nn.LayerNorm(CFG.width)
  self.head = nn.Linear(CFG.width, CFG.vocab // tp, {bias = false})
end
function LocalGPT:forward(ids, pos_ids)
  local x = self.drop(self.tokens(ids) + self.positions(pos_ids))
  for _, block in ipairs(self.blocks:children()) do x = block(x) end
  return self.head(self.norm(x))
end

local function bare_setup(dp, tp)
  dt.manual_seed(1)
  local model = LocalGPT(tp):to("float32")
  local opt = dt.optim.AdamW(model:parameters(), {lr = LR, weight_decay = WD})
  local b, v = CFG.batch // dp, CFG.vocab // tp
  local pos_ids = dt.arange(1, CFG.context + 1):reshape(1, CFG.context)
  local input = dt.randint(1, CFG.vocab + 1, {b, CFG.context})
  local target = dt.randint(1, v + 1, {b, CFG.context})
  local n = b * CFG.context
  return function()
    local logits = model(input, pos_ids)
    local loss = F.cross_entropy(logits:reshape(n, v), target:reshape(n))
    loss:backward()
    dt.nn.utils.clip_grad_norm_(model:parameters(), 1.0)
    opt:step()
    opt:zero_grad()
  end
end

-- ---- the step's collectives, replayed alone ----
local function replay_setup(ops, mesh, dp, tp)
  local function group_of(size)
    if size == ranks then return nil end
    if size == tp then return mesh:get_group(2) end
    if size == dp then return mesh:get_group(1) end
    error("no mesh group of " .. size .. " ranks")
  end
  local calls, skipped = {}, {}
  for _, op in ipairs(ops) do
    local g, n = op.group_size, math.max(1, (op.bytes + 3) // 4)
    if g > 1 then
      local group = group_of(g)
      n = ((n + g - 1) // g) * g
      local buf = dt.zeros(n)
      local name = op.name
      local f
      if name == "all_reduce" then f = function() D.all_reduce(buf, "sum", group) end
      elseif name == "all_gather" then f = function() D.all_gather(buf, group) end
      elseif name == "reduce_scatter" then f = function() D.reduce_scatter(buf, "sum", group) end
      elseif name == "all_to_all" then f = function() D.all_to_all(buf, group) end
      elseif name == "broadcast" then
        local src = group and group:ranks()[1] or 0
        f = function() D.broadcast(buf, src, group) end
      elseif name == "barrier" then f = function() D.barrier(group) end
      else skipped[#skipped + 1] = name end
      if f then calls[#calls + 1] = f end
    end
  end
  return function() for _, f in ipairs(calls) do f() end end, skipped
end

local function summarize(ops)
  local by = {}
  for _, op in ipairs(ops) do
    local k = op.name
    by[k] = by[k] or {n = 0, bytes = 0}
    by[k].n, by[k].bytes = by[k].n + 1, by[k].bytes + op.bytes
  end
  local names, parts = {}, {}
  for k in pairs(by) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do parts[#parts + 1] = string.format("%s x%d %.1f MiB", k, by[k].n, by[k].bytes / 2^20) end
  return #parts > 0 and table.concat(parts, ", ") or "none"
end

-- ---- PyTorch ----
local TORCH_SCRIPT = [==[
import os, sys, time, math
import torch, torch.nn as nn, torch.nn.functional as F
L_, W, H, CTX, B, V, P, WARMUP, ITERS = sys.argv[1:10]
L_, W, H, CTX, B, V, WARMUP, ITERS = (int(v) for v in (L_, W, H, CTX, B, V, WARMUP, ITERS))
P = float(P)
MODE, THREADS = sys.argv[10], int(sys.argv[11])
MESHES = [tuple(int(v) for v in s.split("x")) for s in sys.argv[12:]]
torch.set_num_threads(THREADS)

class Attention(nn.Module):
    def __init__(s):
        super().__init__()
        s.hd = W // H
        s.q, s.k, s.v = (nn.Linear(W, W, bias=False) for _ in range(3))
        s.out = nn.Linear(W, W)
        s.drop = nn.Dropout(P)
    def forward(s, x):
        b, l, _ = x.shape
        def split(t): return t.view(b, l, t.shape[-1] // s.hd, s.hd).transpose(1, 2)
        y = F.scaled_dot_product_attention(split(s.q(x)), split(s.k(x)), split(s.v(x)), is_causal=True)
        return s.drop(s.out(y.transpose(1, 2).reshape(b, l, -1)))
class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.norm1, s.attn, s.norm2 = nn.LayerNorm(W), Attention(), nn.LayerNorm(W)
        s.mlp = nn.Sequential(nn.Linear(W, 4 * W), nn.GELU(), nn.Linear(4 * W, W), nn.Dropout(P))
    def forward(s, x):
        x = x + s.attn(s.norm1(x))
        return x + s.mlp(s.norm2(x))
class GPT(nn.Module):
    def __init__(s):
        super().__init__()
        s.tokens, s.positions, s.drop = nn.Embedding(V, W), nn.Embedding(CTX, W), nn.Dropout(P)
        s.blocks = nn.ModuleList([Block() for _ in range(L_)])
        s.norm, s.head = nn.LayerNorm(W), nn.Linear(W, V, bias=False)
    def forward(s, ids, pos):
        x = s.drop(s.tokens(ids) + s.positions(pos))
        for b in s.blocks: x = b(x)
        return s.head(s.norm(x))

def median(t):
    t = sorted(t)
    return t[(len(t) - 1) // 2]

if MODE == "eager":
    torch.manual_seed(1)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    ids, tgt = torch.randint(0, V, (B, CTX)), torch.randint(0, V, (B, CTX))
    pos = torch.arange(CTX).reshape(1, CTX)
    def step():
        loss = F.cross_entropy(model(ids, pos).reshape(B * CTX, V), tgt.reshape(B * CTX))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
    for _ in range(WARMUP): step()
    t = []
    for _ in range(ITERS):
        t0 = time.perf_counter(); step(); t.append((time.perf_counter() - t0) * 1e3)
    print("version", torch.__version__)
    print("eager", median(t))
    sys.exit(0)

import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import parallelize_module, ColwiseParallel, RowwiseParallel, loss_parallel
import contextlib
dist.init_process_group("gloo")
r, n = dist.get_rank(), dist.get_world_size()
for (dp, tp) in MESHES:
    mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(1)
    model = GPT()
    if tp > 1:
        plan = {"head": ColwiseParallel(use_local_output=False)} # sharded logits: loss_parallel
        for i in range(L_):
            for nm in ("q", "k", "v"): plan["blocks.%d.attn.%s" % (i, nm)] = ColwiseParallel()
            plan["blocks.%d.attn.out" % i] = RowwiseParallel()
            plan["blocks.%d.mlp.0" % i] = ColwiseParallel()
            plan["blocks.%d.mlp.2" % i] = RowwiseParallel()
        parallelize_module(model, mesh["tp"], plan)
    params = list(model.parameters())
    dparams = [p for p in params if isinstance(p, DTensor)]
    lparams = [p for p in params if not isinstance(p, DTensor)]
    groups = [{"params": g} for g in (dparams, lparams) if g]
    opt = torch.optim.AdamW(groups, lr=3e-3, weight_decay=0.01)
    dp_group = mesh["dp"].get_group() if dp > 1 else None
    tp_group = mesh["tp"].get_group() if tp > 1 else None
    b = B // dp
    ids, tgt = torch.randint(0, V, (b, CTX)), torch.randint(0, V, (b, CTX))
    pos = torch.arange(CTX).reshape(1, CTX)
    def local(g): return g._local_tensor if isinstance(g, DTensor) else g
    def step():
        with (loss_parallel() if tp > 1 else contextlib.nullcontext()):
            loss = F.cross_entropy(model(ids, pos).reshape(b * CTX, V), tgt.reshape(b * CTX))
            loss.backward()
        with torch.no_grad():
            grads = [local(p.grad) for p in params]
            if dp_group is not None:
                for g in grads: dist.all_reduce(g, group=dp_group)
                torch._foreach_div_(grads, float(dp))
            sharded = torch.zeros(())
            for p in dparams: sharded += local(p.grad).pow(2).sum()
            if tp_group is not None: dist.all_reduce(sharded, group=tp_group)
            total = sharded
            for p in lparams: total = total + p.grad.pow(2).sum()
            coef = min(1.0, 1.0 / (math.sqrt(float(total)) + 1e-6))
            torch._foreach_mul_(grads, coef)
        opt.step()
        opt.zero_grad()
    for _ in range(WARMUP): step()
    t = []
    for _ in range(ITERS):
        dist.barrier(); t0 = time.perf_counter(); step(); dist.barrier()
        t.append((time.perf_counter() - t0) * 1e3)
    if r == 0: print("tp_%dx%d" % (dp, tp), median(t), flush=True)
dist.destroy_process_group()
]==]

local function run_torch(mode, threads, mesh_list)
  local args = {CFG.layers, CFG.width, CFG.heads, CFG.context, CFG.batch, CFG.vocab, CFG.dropout, WARMUP, ITERS, mode,
                threads}
  for _, m in ipairs(mesh_list or {}) do args[#args + 1] = m[1] .. "x" .. m[2] end
  local launcher = mode == "eager" and "python3"
    or string.format("timeout 900 python3 -m torch.distributed.run --standalone --nproc_per_node=%d", ranks)
  return baseline.run_python(TORCH_SCRIPT, launcher, args,
                             string.format("OMP_NUM_THREADS=%d OPENBLAS_NUM_THREADS=%d", threads, threads))
end

-- ---- the run ----
local results = {}
for _, m in ipairs(meshes()) do
  local dp, tp = m[1], m[2]
  local res = {dp = dp, tp = tp}
  local ok, err = pcall(function()
    local step, mesh = dtensor_setup(dp, tp)
    res.step = time_steps(step)
    local rec = dt.comm_debug(step)
    res.comm_ops = summarize(rec.ops)
    local replay, skipped = replay_setup(rec.ops, mesh, dp, tp)
    res.skipped = skipped
    res.comm = time_steps(replay)
    res.compute = time_steps(bare_setup(dp, tp))
  end)
  if not ok then res.err = tostring(err) end
  results[#results + 1] = res
  dt.barrier()
end

local torch, why = {}, nil
if rank == 0 then
  if quick then why = "quick run"
  elseif dt.backend() ~= "threads" then
    why = "under mpirun (the waiting ranks would poll and share the cores): see the threads run's lines"
  elseif not baseline.torch_available() then why = "not installed (python3 -c 'import torch' failed)"
  else
    torch = run_torch("eager", ranks * THREADS)
    if not torch.version then why, torch = "python3 with torch failed to run the model", {} end
    if ranks > 1 and torch.version then
      for k, v in pairs(run_torch("tp", THREADS, meshes())) do torch[k] = v end
    end
  end
end
dt.barrier()
if rank ~= 0 then return end

local function f1(v) return v and string.format("%.1f", v) or "n/a" end
local function tps(ms) return ms and string.format("%.0f", TOKENS / (ms / 1e3)) or "n/a" end
say("# bench/train.lua: %d rank(s), %s backend, %d BLAS thread(s) per rank%s; PyTorch %s", ranks, dt.backend(), THREADS,
    quick and ", quick" or "", torch.version and (torch.version .. " (measured in this run)") or ("n/a: " .. why))
say("# GPT %d layers, width %d, %d heads, context %d, batch %d, vocab %d, float32, dropout %.1f: %d tokens per step",
    CFG.layers, CFG.width, CFG.heads, CFG.context, CFG.batch, CFG.vocab, CFG.dropout, TOKENS)
say("# step = forward + cross-entropy + backward + clip_grad_norm_ + AdamW; ms: median of %d steps after %d warm-up",
    ITERS, WARMUP)
say("%-8s %9s %9s | %9s %9s %9s | %9s %9s %9s", "mesh", "step ms", "tokens/s", "comm", "compute", "framework",
    "PT eager", "PT DTen.", "ratio")
local eager_ms = torch.eager
for _, r in ipairs(results) do
  local name = r.dp .. "x" .. r.tp
  if r.err then
    say("%-8s skipped: %s", name, r.err)
  else
    local pt = ranks > 1 and torch["tp_" .. name] or nil
    local best_pt = pt and eager_ms and math.min(pt, eager_ms) or pt or eager_ms
    say("%-8s %9s %9s | %9s %9s %9s | %9s %9s %9s", name, f1(r.step), tps(r.step), f1(r.comm), f1(r.compute),
        f1(r.step - r.comm - r.compute), tps(eager_ms), tps(pt), best_pt and string.format("%.2f", best_pt / r.step) or "n/a")
  end
end
say("# comm/compute/framework: ms per step (see the header of bench/train.lua); PT columns: PyTorch tokens/s, eager on")
say("# one process with %d thread(s), DTensor on %d process(es) x %d over gloo%s; ratio: dtlua tokens/s over the",
    ranks * THREADS, ranks, THREADS, ranks == 1 and " (n/a: one rank)" or "")
say("# better PyTorch (target >= 1)")
for _, r in ipairs(results) do
  if not r.err then
    say("collectives per step, %dx%d: %s%s", r.dp, r.tp, r.comm_ops,
        #r.skipped > 0 and (" (not replayed: " .. table.concat(r.skipped, ", ") .. ")") or "")
  end
end
