-- dt.compile against eager execution, in the same run:
--  1. per-node overhead of a replayed graph: a chain of K adds on a 1-element plain tensor and
--     on a 1-element DTensor (replicated on a 1-d mesh of every rank), per op eager (the
--     dispatcher's cache hit for the DTensor) vs per node replayed, in wall time and in the
--     rank thread's CPU time (ranks beyond the cores share them: wall > CPU);
--  2. a small MLP (batch 32, 256 -> 512 -> 256, tensor parallel: the first weight Shard(2),
--     the second Shard(1), the output brought to Replicate): its forward, and a training step
--     (forward, mean-square loss, backward, SGD step) as one graph, eager vs compiled;
--  3. the GPT demo's whole training step (examples/gpt_model.lua: 2 layers of width 64, 4 heads,
--     dropout 0.1, tensor parallel by its partition over every rank; the reversal task's batch
--     32 x 12 of vocab 11): embeddings, cross_entropy, backward, clip_grad_norm_, AdamW with a
--     tensor lr, eager vs compiled (wall, and rank 0's thread CPU time), and the graph's peak bytes with and without releasing each
--     output after its last use (buffer reuse);
--  4. communication hidden by overlap: a data-parallel step (6 Linear layers of width 512,
--     replicated; the batch, 64 rows per rank, sharded; SGD), compiled with one all_reduce per
--     layer's gradient run blocking (overlap = false) vs started async and waited for where first
--     read (the optimizer);
--     saved = sequential - overlapped, beside the all_reduces alone (compiled);
--  5. varying batch sizes: a plain MLP training step (256 -> 512 -> 256, SGD) called with 32
--     distinct batch sizes (17..110), one pass each: eager, compiled static (each new size
--     records its graph: max_graphs = 1000) and compiled with dynamic = true (two recordings,
--     then one graph replayed for every size); fresh compiled functions each pass.
--   dtlua -n 1 bench/compile.lua [iterations]      dtlua -n 4 bench/compile.lua
--   mpirun -np 4 dtlua bench/compile.lua
-- Times on rank 0, best of 5 loops (all ranks start each loop together).
local baseline = dofile(((arg and arg[0] or ""):match("^(.*)/") or "bench") .. "/load_baseline.lua")
local now = baseline.now
local N = tonumber(arg and arg[1]) or 200
local K = 500
local mesh = dt.init_device_mesh("cpu", {dt.world_size()})

local function best(n, f)
  local b = math.huge
  for _ = 1, 5 do
    dt.barrier()
    local t0 = now()
    for _ = 1, n do f() end
    b = math.min(b, (now() - t0) / n)
  end
  return b
end

local function chain(x, a)
  for _ = 1, K do x = x + a end
  return x
end

-- the best of 5 loops of n calls of f in this rank's thread CPU time (seconds per call)
local function best_cpu(n, f) return baseline.best_of_5(n, f, baseline.thread_cpu) end

local function per_node(name, x, a)
  local f = dt.compile(chain)
  f(x, a)
  local eager = best(N, function() chain(x, a) end) / K
  local replay = best(N, function() f(x, a) end) / K
  local cpu = best_cpu(N, function() f(x, a) end) / K
  assert(f:stats().per_graph[1].nodes == K)
  dt.print0(string.format("%-22s eager %.3f us/op, replayed %.3f us/node (%.2fx); replayed, this rank's CPU time %.3f us/node",
                          name, eager * 1e6, replay * 1e6, eager / replay, cpu * 1e6))
end

dt.print0(string.format("chain of %d adds, %d ranks (%s):", K, dt.world_size(), dt.backend()))
per_node("1-element tensor", dt.ones({}), dt.ones({}))
local rep = {dt.Replicate()}
per_node("1-element DTensor", dt.distribute_tensor(dt.ones({}), mesh, rep, {src_rank = false}),
         dt.distribute_tensor(dt.ones({}), mesh, rep, {src_rank = false}))

dt.manual_seed(0)
local x = dt.distribute_tensor(dt.randn(32, 256), mesh, rep, {src_rank = false})
local w1 = dt.distribute_tensor(dt.randn(256, 512) * 0.05, mesh, {dt.Shard(2)}, {src_rank = false})
local w2 = dt.distribute_tensor(dt.randn(512, 256) * 0.05, mesh, {dt.Shard(1)}, {src_rank = false})
local function mlp(x)
  local h = x:matmul(w1):relu()
  return h:matmul(w2):redistribute(mesh, rep):tanh()
end
local f = dt.compile(mlp)
f(x)
assert(dt.equal(f(x):to_local(), mlp(x):to_local()))
local eager = best(N, function() mlp(x) end)
local compiled = best(N, function() f(x) end)
dt.print0(string.format("MLP forward 32x256->512->256, %d ranks: eager %.1f us, compiled %.1f us (%.2fx), %d nodes",
                        dt.world_size(), eager * 1e6, compiled * 1e6, eager / compiled, f:stats().per_graph[1].nodes))

-- the training step: the parameters of each copy start alike; the compiled one must follow eager
local function params()
  dt.manual_seed(0)
  local a = dt.distribute_tensor(dt.randn(256, 512) * 0.05, mesh, {dt.Shard(2)}, {src_rank = false}):requires_grad_()
  local b = dt.distribute_tensor(dt.randn(512, 256) * 0.05, mesh, {dt.Shard(1)}, {src_rank = false}):requires_grad_()
  return {a, b}, dt.optim.SGD({a, b}, {lr = 1e-3})
end
-- a mean-square training step of forward: zero_grad, loss, backward, the optimizer's step
local function mse_step(forward, opt)
  return function(x, y)
    opt:zero_grad()
    local d = forward(x) - y
    local loss = (d * d):mean()
    loss:backward()
    opt:step()
    return loss
  end
end
local function step_of(p, opt)
  return mse_step(function(x) return x:matmul(p[1]):relu():matmul(p[2]):redistribute(mesh, rep) end, opt)
end
local y = dt.distribute_tensor(dt.randn(32, 256), mesh, rep, {src_rank = false})
local p1, o1 = params()
local p2, o2 = params()
local eager_step, step = step_of(p1, o1), dt.compile(step_of(p2, o2))
assert(dt.equal(eager_step(x, y):to_local(), step(x, y):to_local()))
assert(dt.equal(eager_step(x, y):to_local(), step(x, y):to_local()))
local te = best(N, function() eager_step(x, y) end)
local tc = best(N, function() step(x, y) end)
dt.print0(string.format("MLP training step (forward, backward, SGD), %d ranks: eager %.1f us, compiled %.1f us (%.2fx), %d nodes",
                        dt.world_size(), te * 1e6, tc * 1e6, te / tc, step:stats().per_graph[1].nodes))

-- a training step: loss_of(...), backward, the optimizer's step, zero_grad
local function train_step(loss_of, opt)
  return function(...)
    local loss = loss_of(...)
    loss:backward()
    opt:step()
    opt:zero_grad()
    return loss
  end
end

-- 3. the GPT demo's whole training step (examples/train_gpt.lua's: embeddings, dropout,
-- cross_entropy, backward, clip_grad_norm_, AdamW with a tensor lr)
local gpt = dofile(((arg and arg[0] or ""):match("^(.*)/") or "bench") .. "/../examples/gpt_model.lua")
local tp_mesh = dt.init_device_mesh("cpu", {1, dt.world_size()})
local RR = {dt.Replicate(), dt.Replicate()}
local GV, GL, GB = 11, 12, 32 -- the demo's reversal task: vocab 11, context 12, batch 32
local gpos = dt.distribute_tensor(dt.arange(1, GL + 1):reshape(1, GL), tp_mesh, RR)
local function gpt_copy()
  dt.manual_seed(3)
  local model = gpt.GPT(GV, GL, {layers = 2, width = 64, heads = 4, dropout = 0.1})
  dt.distribute_module(model, tp_mesh, gpt.partition)
  local opt = dt.optim.AdamW(model:parameters(), {lr = dt.tensor(3e-3, {dtype = "float64"}), weight_decay = 0.01})
  return gpt.train_step(model, opt, gpos)
end
dt.manual_seed(4)
local on_tp = {device_mesh = tp_mesh, placements = RR}
local gx, gy = dt.randint(1, GV + 1, {GB, GL}, on_tp), dt.randint(1, GV + 1, {GB, GL}, on_tp)
local ge, gc = gpt_copy(), gpt_copy()
dt.manual_seed(5); ge(gx, gy) -- AdamW's state exists before the capture
dt.manual_seed(5); gc(gx, gy)
gc = dt.compile(gc)
for _ = 1, 2 do
  dt.manual_seed(6)
  local a = ge(gx, gy)
  dt.manual_seed(6)
  assert(dt.equal(a:to_local(), gc(gx, gy):to_local()), "the compiled GPT step follows eager")
end
local NG = math.max(N // 10, 5)
local tge = best(NG, function() ge(gx, gy) end)
local tgc = best(NG, function() gc(gx, gy) end)
local cge = best_cpu(NG, function() ge(gx, gy) end)
local cgc = best_cpu(NG, function() gc(gx, gy) end)
local gs = gc:stats().per_graph[1]
dt.print0(string.format("GPT demo whole step (2 layers, width 64, batch 32x12, AdamW), %d ranks: eager %.2f ms, compiled %.2f ms (%.2fx), %d nodes",
                        dt.world_size(), tge * 1e3, tgc * 1e3, tge / tgc, gs.nodes))
dt.print0(string.format("  rank 0's thread CPU time per step: eager %.2f ms, compiled %.2f ms (%.2fx)", cge * 1e3, cgc * 1e3, cge / cgc))
dt.print0(string.format("  its graph's peak bytes: %.2f MiB with release after last use, %.2f MiB without (%.2fx)",
                        gs.peak_bytes / 2 ^ 20, gs.peak_bytes_unreleased / 2 ^ 20, gs.peak_bytes_unreleased / gs.peak_bytes))

-- 4. communication hidden by overlap (data parallel: one all_reduce per layer's gradient)
if dt.world_size() > 1 then
  local W, L = 512, 6
  local function dp_copy(opts)
    dt.manual_seed(7)
    local ps = {}
    for i = 1, L do ps[i] = dt.distribute_tensor(dt.randn(W, W) * (1 / W) ^ 0.5, mesh, rep, {src_rank = false}):requires_grad_() end
    local opt = dt.optim.SGD(ps, {lr = 1e-3})
    return dt.compile(train_step(function(x)
      local h = x
      for i = 1, L do h = h:matmul(ps[i]):tanh() end
      return (h * h):mean()
    end, opt), opts)
  end
  local dx = dt.distribute_tensor(dt.randn(64 * dt.world_size(), W), mesh, {dt.Shard(1)}, {src_rank = false})
  local cap = {bucket_cap_mb = W * W * 4 / 2 ^ 20} -- one layer's gradient per all_reduce
  local seq, ovl = dp_copy({overlap = false, bucket_cap_mb = cap.bucket_cap_mb}), dp_copy(cap)
  seq(dx); ovl(dx)
  assert(dt.equal(seq(dx):to_local(), ovl(dx):to_local()))
  local grads = {}
  for i = 1, L do grads[i] = dt.from_local(dt.randn(W, W), mesh, {dt.Partial()}) end
  local comm = dt.compile(function(...)
    local out = {}
    for i, g in ipairs({...}) do out[i] = g:redistribute(mesh, rep) end
    return table.unpack(out)
  end, cap)
  comm(table.unpack(grads))
  local NS = math.max(N // 10, 5)
  local ts = best(NS, function() seq(dx) end)
  local to = best(NS, function() ovl(dx) end)
  local tcomm = best(NS, function() comm(table.unpack(grads)) end)
  local st = ovl:stats().per_graph[1]
  dt.print0(string.format("data-parallel step (%d x Linear %d, batch %d/rank), %d ranks (%s): all_reduces blocking %.2f ms, "
                          .. "overlapped %.2f ms (%.2fx); the %d all_reduces alone %.2f ms; saved by overlap %.2f ms",
                          L, W, 64, dt.world_size(), dt.backend(), ts * 1e3, to * 1e3, ts / to, st.buckets, tcomm * 1e3,
                          (ts - to) * 1e3))
end

-- 5. varying batch sizes: eager vs static (a recording per size) vs dynamic (one graph)
do
  local sizes = {}
  for i = 1, 32 do sizes[i] = 14 + 3 * i end
  local data = {}
  dt.manual_seed(8)
  for i, B in ipairs(sizes) do data[i] = {dt.randn(B, 256), dt.randn(B, 256)} end
  local function plain_step()
    dt.manual_seed(9)
    local a, b = dt.randn(256, 512) * 0.05, dt.randn(512, 256) * 0.05
    a:requires_grad_(); b:requires_grad_()
    return mse_step(function(x) return x:matmul(a):relu():matmul(b) end, dt.optim.SGD({a, b}, {lr = 1e-3}))
  end
  local function pass(mode)
    local f = plain_step()
    if mode ~= "eager" then f = dt.compile(f, {dynamic = mode == "dynamic", max_graphs = 1000}) end
    local last
    for i = 1, #sizes do last = f(data[i][1], data[i][2]) end
    return last, f
  end
  local le = pass("eager")
  local ld, fd = pass("dynamic")
  local ls, fs = pass("static")
  assert(dt.equal(le, ld) and dt.equal(le, ls), "the compiled passes follow eager")
  local NV = math.max(N // 50, 3)
  local te = best(NV, function() pass("eager") end)
  local ts = best(NV, function() pass("static") end)
  local td = best(NV, function() pass("dynamic") end)
  dt.print0(string.format("MLP step over %d batch sizes (17..110, one call each), %d ranks: eager %.2f ms, "
                          .. "static (%d graphs) %.2f ms (%.2fx eager), dynamic (%d graphs, %d replays) %.2f ms (%.2fx eager, %.2fx static)",
                          #sizes, dt.world_size(), te * 1e3, fs:stats().graphs, ts * 1e3, te / ts, fd:stats().graphs,
                          fd:stats().replays, td * 1e3, te / td, ts / td))
end
