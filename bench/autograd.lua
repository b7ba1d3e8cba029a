-- Autograd benchmark, next to PyTorch measured in the same run where it is installed
-- (`python3 -c "import torch"`; without it the PyTorch column says n/a):
--   * the recording overhead per op on 1-element float32 tensors: `a * b` with an input that
--     requires grad minus the same op with none (target <= 0.3 us), the same for a chain
--     y = y * b (every node kept), and backward through a 1000-op chain, per op;
--   * forward + backward of an MLP (batch 64, 1024 -> 4096 -> 1024, float32, bias, the
--     activation relu or gelu when it has a backward rule, loss = sum of the output) on one
--     rank, and with tensor-parallel weights (W1 column-wise, W2 row-wise) on every rank of
--     the world, as a ratio to PyTorch's time on the same shapes and thread count (one rank:
--     the BLAS's threads T, OPENBLAS_NUM_THREADS or every core; N ranks: N x T threads).
--     `OPENBLAS_NUM_THREADS=1 ./dtlua -n 4 bench/autograd.lua` compares 4 ranks with
--     PyTorch on 4 threads;
--   * the DTensor overhead of that tensor-parallel step: its time minus the same local math
--     on plain tensors (each rank's shards, one raw all_reduce of the output) -- what the
--     DTensor layer costs, apart from the kernels -- next to PyTorch DTensor's on the same
--     ranks and threads (torch.distributed.run, gloo), measured the same way.
-- usage (from the build dir): ./dtlua -n 4 bench/autograd.lua [quick]
--   quick: small sizes and no PyTorch (tests/spec/bench_spec.lua).  Rank 0 measures the
--   one-rank figures and runs PyTorch while the other ranks wait (threads backend: they
--   sleep; under mpirun they would poll and share the cores).  Every figure is the best of
--   several rounds; a part that cannot run says why and is skipped.
local baseline = dofile(((arg and arg[0] or ""):match("^(.*)/") or "bench") .. "/load_baseline.lua")
local now = baseline.now
local quick = arg and arg[1] == "quick"
local rank, ranks = dt.rank(), dt.world_size()

local N = quick and 2000 or 20000 -- ops per timed loop
local ROUNDS = quick and 3 or 25
local CHAIN = 1000
local B, D, H = 64, 1024, 4096
if quick then B, D, H = 8, 64, 256 end
local ITERS = quick and 2 or 6

local function say(...) print(string.format(...)) end

local THREADS = baseline.blas_threads() -- BLAS threads of this process

-- ---- recording overhead (rank 0) ----
local function best_rounds(fns, order)
  local best = {}
  for _, k in ipairs(order) do best[k] = math.huge end
  for r = 1, ROUNDS do
    for i = 1, #order do -- rotated, so no case always runs right after another's garbage
      local k = order[(i + r) % #order + 1]
      collectgarbage()
      local t0 = now()
      fns[k]()
      best[k] = math.min(best[k], now() - t0)
    end
  end
  return best
end

local function recording()
  local a, b = dt.ones(1), dt.ones(1)
  local ga = dt.ones(1, {requires_grad = true})
  local keep = ga * b -- ga's accumulate node lives, as a parameter's does in a model
  local per = best_rounds({
    off = function() for _ = 1, N do local _ = a * b end end,
    on = function() for _ = 1, N do local _ = ga * b end end,
    chain = function()
      local y = ga
      for _ = 1, N do y = y * b end
    end,
  }, {"off", "on", "chain"})
  local bwd = math.huge
  for _ = 1, ROUNDS do
    local y = ga
    for _ = 1, CHAIN do y = y * b end
    local loss = y:sum()
    collectgarbage()
    local t0 = now()
    loss:backward()
    bwd = math.min(bwd, now() - t0)
    ga.grad = nil
  end
  local _ = keep
  return {off = per.off / N * 1e6, on = per.on / N * 1e6, chain = per.chain / N * 1e6, backward = bwd / CHAIN * 1e6}
end

-- ---- the MLP ----
-- an activation with a backward rule, else none (the same on the PyTorch side)
local function activation()
  for _, name in ipairs {"relu", "gelu"} do
    local f = dt[name] or dt.F[name]
    local ok, y = pcall(function() return f(dt.ones(2, {requires_grad = true})) end)
    if ok and y.grad_fn then return name, f end
  end
  return "none", nil
end
local ACT, act = activation()

local function mlp_step(x, w1, b1, w2, b2)
  local h = x:mm(w1) + b1
  if act then h = act(h) end
  local out = h:mm(w2) + b2
  out:sum():backward()
  w1.grad, b1.grad, w2.grad, b2.grad = nil, nil, nil, nil
end

local function time_steps(step, sync, iters)
  for _ = 1, 2 do step() end -- warm-up: BLAS threads, pages, the dispatcher's decisions
  local best = math.huge
  for _ = 1, iters or ITERS do
    collectgarbage()
    if sync then sync() end
    local t0 = now()
    step()
    if sync then sync() end
    best = math.min(best, now() - t0)
  end
  return best * 1e3
end

local function mlp_one_rank()
  dt.manual_seed(0)
  local x = dt.randn(B, D)
  local w1, b1 = dt.randn({D, H}, {requires_grad = true}), dt.zeros({H}, {requires_grad = true})
  local w2, b2 = dt.randn({H, D}, {requires_grad = true}), dt.zeros({D}, {requires_grad = true})
  return time_steps(function() mlp_step(x, w1, b1, w2, b2) end)
end

local function mlp_tensor_parallel(B, D, H, iters)
  local mesh = dt.init_device_mesh("cpu", {ranks})
  dt.manual_seed(0)
  local function param(shape, p, zero)
    local o = {device_mesh = mesh, placements = p, requires_grad = true}
    return zero and dt.zeros(shape, o) or dt.randn(shape, o)
  end
  local x = dt.randn({B, D}, {device_mesh = mesh, placements = {dt.Replicate()}})
  local w1, b1 = param({D, H}, {dt.Shard(2)}), param({H}, {dt.Shard(1)}, true) -- column-wise
  local w2, b2 = param({H, D}, {dt.Shard(1)}), param({D}, {dt.Replicate()}, true) -- row-wise
  return time_steps(function() mlp_step(x, w1, b1, w2, b2) end, dt.barrier, iters)
end

-- The same step as mlp_tensor_parallel's on each rank's shards as plain tensors: the DTensor
-- layer's work (dispatch, redistribution plans, conversions, gradient conforming) taken away,
-- the math and the one all_reduce of the output kept.
local function mlp_bare_local(B, D, H, iters)
  local h_local = H // ranks -- even shards (H divisible by the rank count in these runs)
  dt.manual_seed(0)
  local x = dt.randn(B, D)
  local w1, b1 = dt.randn({D, h_local}, {requires_grad = true}), dt.zeros({h_local}, {requires_grad = true})
  local w2, b2 = dt.randn({h_local, D}, {requires_grad = true}), dt.zeros({D}, {requires_grad = true})
  local function step()
    local h = x:mm(w1) + b1
    if act then h = act(h) end
    local partial = h:mm(w2)
    dt.no_grad(function() dt.distributed.all_reduce(partial:detach():clone(), "sum") end)
    local out = partial + b2
    out:sum():backward()
    w1.grad, b1.grad, w2.grad, b2.grad = nil, nil, nil, nil
  end
  return time_steps(step, dt.barrier, iters)
end

-- ---- PyTorch, in a subprocess of rank 0 ----
local TORCH_SCRIPT = [==[
import sys, time
import torch
N, ROUNDS, CHAIN, B, D, H, ITERS = (int(v) for v in sys.argv[1:8])
ACT = sys.argv[8]
threads = [int(v) for v in sys.argv[9:]]
print("version", torch.__version__)
torch.set_num_threads(1)
a, b = torch.ones(1), torch.ones(1)
ga = torch.ones(1, requires_grad=True)
keep = ga * b
def off():
    for _ in range(N): _x = a * b
def on():
    for _ in range(N): _x = ga * b
def chain():
    y = ga
    for _ in range(N): y = y * b
order = ["off", "on", "chain"]
fns = {"off": off, "on": on, "chain": chain}
best = {k: float("inf") for k in order}
for r in range(ROUNDS):
    for i in range(len(order)):
        k = order[(i + r + 1) % len(order)]
        t0 = time.perf_counter(); fns[k](); best[k] = min(best[k], time.perf_counter() - t0)
for k in order: print("rec_" + k, best[k] / N * 1e6)
bwd = float("inf")
for _ in range(ROUNDS):
    y = ga
    for _ in range(CHAIN): y = y * b
    loss = y.sum()
    t0 = time.perf_counter(); loss.backward(); bwd = min(bwd, time.perf_counter() - t0)
    ga.grad = None
print("rec_backward", bwd / CHAIN * 1e6)
act = {"relu": torch.relu, "gelu": torch.nn.functional.gelu}.get(ACT)
for t in threads:
    torch.set_num_threads(t)
    torch.manual_seed(0)
    x = torch.randn(B, D)
    w1, b1 = torch.randn(D, H, requires_grad=True), torch.zeros(H, requires_grad=True)
    w2, b2 = torch.randn(H, D, requires_grad=True), torch.zeros(D, requires_grad=True)
    def step():
        h = x @ w1 + b1
        if act is not None: h = act(h)
        out = h @ w2 + b2
        out.sum().backward()
        for p in (w1, b1, w2, b2): p.grad = None
    for _ in range(2): step()
    best = float("inf")
    for _ in range(ITERS):
        t0 = time.perf_counter(); step(); best = min(best, time.perf_counter() - t0)
    print("mlp_%d" % t, best * 1e3)
]==]

-- PyTorch DTensor's tensor-parallel step and the same bare local step, on `ranks` processes
-- (torch.distributed.run, gloo), each with the BLAS threads of one dtlua rank.
local TORCH_TP_SCRIPT = [==[
import sys, time, torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import distribute_tensor, Shard, Replicate
THREADS = int(sys.argv[2])
ACT = sys.argv[3]
SIZES = [tuple(int(v) for v in s.split(",")) for s in sys.argv[4:]]
dist.init_process_group("gloo")
r, n = dist.get_rank(), dist.get_world_size()
torch.set_num_threads(THREADS)
act = {"relu": torch.relu, "gelu": torch.nn.functional.gelu}.get(ACT)
mesh = init_device_mesh("cpu", (n,))
def measure(B, D, H, ITERS):
    torch.manual_seed(0)
    def timed(step):
        for _ in range(2): step()
        best = float("inf")
        for _ in range(ITERS):
            dist.barrier(); t0 = time.perf_counter(); step(); dist.barrier()
            best = min(best, time.perf_counter() - t0)
        return best * 1e3
    x = distribute_tensor(torch.randn(B, D), mesh, [Replicate()])
    w1 = distribute_tensor(torch.randn(D, H), mesh, [Shard(1)]).requires_grad_()
    b1 = distribute_tensor(torch.zeros(H), mesh, [Shard(0)]).requires_grad_()
    w2 = distribute_tensor(torch.randn(H, D), mesh, [Shard(0)]).requires_grad_()
    b2 = distribute_tensor(torch.zeros(D), mesh, [Replicate()]).requires_grad_()
    def tp_step():
        h = x @ w1 + b1
        if act is not None: h = act(h)
        out = h @ w2 + b2
        out.sum().backward()
        for p in (w1, b1, w2, b2): p.grad = None
    tp = timed(tp_step)
    lx = torch.randn(B, D)
    lw1, lb1 = torch.randn(D, H // n, requires_grad=True), torch.zeros(H // n, requires_grad=True)
    lw2, lb2 = torch.randn(H // n, D, requires_grad=True), torch.zeros(D, requires_grad=True)
    def bare_step():
        h = lx @ lw1 + lb1
        if act is not None: h = act(h)
        partial = h @ lw2
        with torch.no_grad(): dist.all_reduce(partial.detach().clone())
        out = partial + lb2
        out.sum().backward()
        for p in (lw1, lb1, lw2, lb2): p.grad = None
    bare = timed(bare_step)
    return tp, bare
for (B, D, H, IT) in SIZES:
    tp, bare = measure(B, D, H, IT)
    if r == 0:
        print("dtensor_tp_%d_%d_%d" % (B, D, H), tp)
        print("dtensor_bare_%d_%d_%d" % (B, D, H), bare)
dist.destroy_process_group()
]==]

local function run_torch_tp(sizes)
  local res = baseline.run_python(TORCH_TP_SCRIPT,
    string.format("timeout 600 python3 -m torch.distributed.run --standalone --nproc_per_node=%d", ranks),
    {ITERS, THREADS, ACT, table.concat(sizes, " ")}, "OMP_NUM_THREADS=" .. THREADS)
  for k in pairs(res) do if not k:match("^dtensor_") then res[k] = nil end end
  return res
end

local function run_torch(threads)
  local args = {N, ROUNDS, CHAIN, B, D, H, ITERS, ACT}
  for _, t in ipairs(threads) do args[#args + 1] = t end
  return baseline.run_python(TORCH_SCRIPT, "python3", args)
end

-- ---- the run ----
-- the DTensor-overhead sizes: the MLP's, and a small one where the framework's work dominates
local OVERHEAD_SIZES = {{B, D, H, ITERS}}
if not quick then OVERHEAD_SIZES[2] = {8, 64, 256, 60} end
local function size_key(sz) return string.format("%d_%d_%d", sz[1], sz[2], sz[3]) end
local rec, one, tp, bare, torch, why = nil, nil, nil, {}, nil, {}
if rank == 0 then
  rec = recording()
  local ok, t = pcall(mlp_one_rank)
  if ok then one = t else why.one = tostring(t) end
end
dt.barrier()
if ranks > 1 then
  local ok, t = pcall(mlp_tensor_parallel, B, D, H)
  if ok then tp = t else why.tp = tostring(t) end
  for _, sz in ipairs(OVERHEAD_SIZES) do
    local ok1, t1 = pcall(mlp_tensor_parallel, table.unpack(sz))
    local ok2, t2 = pcall(mlp_bare_local, table.unpack(sz))
    if ok1 and ok2 then bare[size_key(sz)] = {tp = t1, bare = t2} else why.bare = tostring(ok1 and t2 or t1) end
  end
else
  why.tp = "one rank in this run (run with dtlua -n 4)"
end
dt.barrier()
if rank == 0 then
  if quick then
    why.torch = "quick run"
  elseif not baseline.torch_available() then
    why.torch = "not installed (python3 -c 'import torch' failed)"
  else
    torch = run_torch(ranks > 1 and {THREADS, ranks * THREADS} or {THREADS})
    if not torch.version then why.torch, torch = "python3 with torch failed to run the comparison", nil end
    if torch and ranks > 1 then
      local args = {}
      for _, sz in ipairs(OVERHEAD_SIZES) do args[#args + 1] = table.concat(sz, ",") end
      local tt = run_torch_tp(args)
      if next(tt) then for k, v in pairs(tt) do torch[k] = v end
      else why.torch_tp = "torch.distributed.run with gloo failed" end
    end
  end
end
dt.barrier()

if rank ~= 0 then return end -- rank 0 prints
local function f2(v, fmt) return v and string.format(fmt or "%.3f", v) or "n/a" end
local function ratio(a, b) return (a and b) and string.format("%.2f", a / b) or "n/a" end
local T = torch or {}
say("# bench/autograd.lua: %d rank(s), %s backend%s; PyTorch %s", ranks, dt.backend(), quick and ", quick" or "",
    torch and (T.version .. " (measured in this run)") or ("n/a: " .. why.torch))
say("# recording, 1-element float32 tensors: us per op, best of %d rounds of %d ops", ROUNDS, N)
say("%-44s %10s %10s", "", "dtlua", "PyTorch")
say("%-44s %10s %10s", "a * b, no input requires grad", f2(rec.off), f2(T.rec_off))
say("%-44s %10s %10s", "a * b, recorded (node freed with its output)", f2(rec.on), f2(T.rec_on))
say("%-44s %10s %10s   (target <= 0.3)", "  recording overhead", f2(rec.on - rec.off, "%+.3f"),
    torch and f2(T.rec_on - T.rec_off, "%+.3f") or "n/a")
say("%-44s %10s %10s", "y = y * b, recorded (chain: every node kept)", f2(rec.chain), f2(T.rec_chain))
say("%-44s %10s %10s", "  recording overhead", f2(rec.chain - rec.off, "%+.3f"),
    torch and f2(T.rec_chain - T.rec_off, "%+.3f") or "n/a")
say("%-44s %10s %10s", string.format("backward through a %d-op chain, per op", CHAIN), f2(rec.backward),
    f2(T.rec_backward))
say("# MLP forward+backward: batch %d, %d -> %d -> %d, float32, bias, activation %s%s; ms per step, best of %d",
    B, D, H, D, ACT, ACT == "none" and " (relu and gelu have no backward rule yet)" or "", ITERS)
say("%-44s %10s %10s %8s", "", "dtlua", "PyTorch", "ratio")
if one then
  say("%-44s %10s %10s %8s", string.format("1 rank, %d BLAS threads (PyTorch: %d)", THREADS, THREADS), f2(one, "%.2f"),
      f2(T["mlp_" .. THREADS], "%.2f"), ratio(one, T["mlp_" .. THREADS]))
else
  say("1 rank: skipped: %s", why.one)
end
if tp then
  local t = ranks * THREADS
  say("%-44s %10s %10s %8s", string.format("%d ranks x %d, tensor-parallel (PyTorch: %d)", ranks, THREADS, t),
      f2(tp, "%.2f"), f2(T["mlp_" .. t], "%.2f"), ratio(tp, T["mlp_" .. t]))
else
  say("tensor-parallel: skipped: %s", why.tp)
end
if next(bare) then
  say("# the DTensor layer's cost in a tensor-parallel step: its time minus the same local math on plain shards and")
  say("# one raw all_reduce; PyTorch DTensor (%s) measured the same way on %d processes x %d threads",
      (torch and not why.torch_tp) and "torch.distributed.run, gloo" or ("n/a: " .. (why.torch_tp or why.torch or "?")), ranks, THREADS)
  say("%-44s %10s %10s", "ms per step", "dtlua", "PyTorch")
  for _, sz in ipairs(OVERHEAD_SIZES) do
    local k, m = size_key(sz), bare[size_key(sz)]
    if m then
      local pt, pb = T["dtensor_tp_" .. k], T["dtensor_bare_" .. k]
      say("batch %d, %d -> %d -> %d:", sz[1], sz[2], sz[3], sz[2])
      say("%-44s %10s %10s", "  tensor-parallel step, DTensors", f2(m.tp, "%.3f"), f2(pt, "%.3f"))
      say("%-44s %10s %10s", "  same local math, plain tensors + all_reduce", f2(m.bare, "%.3f"), f2(pb, "%.3f"))
      say("%-44s %10s %10s", "  DTensor overhead per step", f2(m.tp - m.bare, "%+.3f"), pt and f2(pt - pb, "%+.3f") or "n/a")
    end
  end
elseif ranks > 1 then
  say("DTensor overhead: skipped: %s", why.bare or why.tp)
end
