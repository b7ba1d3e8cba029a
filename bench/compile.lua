-- dt.compile against eager execution, in the same run:
--  1. per-node overhead of a replayed graph: a chain of K adds on a 1-element plain tensor and
--     on a 1-element DTensor (replicated on a 1-d mesh of every rank), per op eager (the
--     dispatcher's cache hit for the DTensor) vs per node replayed;
--  2. a small MLP (batch 32, 256 -> 512 -> 256, tensor parallel: the first weight Shard(2),
--     the second Shard(1), the output brought to Replicate): its forward, and a training step
--     (forward, mean-square loss, backward, SGD step) as one graph, eager vs compiled.
--   dtlua -n 1 bench/compile.lua [iterations]      dtlua -n 2 bench/compile.lua
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

local function per_node(name, x, a)
  local f = dt.compile(chain)
  f(x, a)
  local eager = best(N, function() chain(x, a) end) / K
  local replay = best(N, function() f(x, a) end) / K
  assert(f:stats().per_graph[1].nodes == K)
  dt.print0(string.format("%-22s eager %.3f us/op, replayed %.3f us/node (%.2fx)", name, eager * 1e6, replay * 1e6,
                          eager / replay))
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
local function step_of(p, opt)
  return function(x, y)
    opt:zero_grad()
    local d = x:matmul(p[1]):relu():matmul(p[2]):redistribute(mesh, rep) - y
    local loss = (d * d):mean()
    loss:backward()
    opt:step()
    return loss
  end
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
