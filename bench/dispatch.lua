-- Per-op overhead of the sharding dispatcher: `a + a` on a 1-element DTensor (replicated
-- on a 1-d mesh of every rank) with a cache hit and with a cache miss (the cache cleared
-- before each call), next to the same op on a plain 1-element tensor, in the same run.
--   dtlua -n 4 bench/dispatch.lua [iterations]
-- Then an op composed in Lua (its decisions named in the dispatcher's cache): an op of
-- dt.register_op (forward x * 2) on the same DTensor; and dt.cat of two 1-d ones (an op of the
-- table with a list of inputs), hit and miss.
-- Times are per call on rank 0, best of 5 loops (all ranks start each loop together).
local baseline = dofile(((arg and arg[0] or ""):match("^(.*)/") or "bench") .. "/load_baseline.lua")
local now = baseline.now
local N = tonumber(arg and arg[1]) or 20000
local mesh = dt.init_device_mesh("cpu", {dt.world_size()})
local p = dt.ones({})
local a = dt.distribute_tensor(p, mesh, {dt.Replicate()}, {src_rank = false})

local function best(f)
  local b = math.huge
  for _ = 1, 5 do
    dt.barrier() -- every rank in the same phase: the ranks share the cores
    local t0 = now()
    f()
    b = math.min(b, (now() - t0) / N)
  end
  return b
end

local function clear_only() for _ = 1, N do dt.dispatch_cache_clear() end end
for _ = 1, 1000 do local _ = a + a end
collectgarbage()
local plain = best(function() for _ = 1, N do local _ = p + p end end)
local hit = best(function() for _ = 1, N do local _ = a + a end end)
local clear = best(clear_only)
local miss = best(function()
  for _ = 1, N do
    dt.dispatch_cache_clear()
    local _ = a + a
  end
end) - clear
dt.print0(string.format(
  "a + a, 1 element, %d ranks (%s): plain %.2f us, DTensor cache hit %.2f us (+%.2f), cache miss %.2f us (+%.2f)",
  dt.world_size(), dt.backend(), plain * 1e6, hit * 1e6, (hit - plain) * 1e6, miss * 1e6, (miss - plain) * 1e6))
-- the Lua-op path: hit vs miss (the miss pays the Lua rule and its strategies' prices;
-- both pay the key, redistribute (nothing moves here), forward and from_local)
local twice = dt.register_op {
  name = "bench_twice", forward = function(x) return x * 2 end,
  sharding = function(schema) return {{inputs = {schema.inputs[1].placements}, output = schema.inputs[1].placements}} end,
}
local function lua_op(name, call)
  for _ = 1, 1000 do call() end
  local h = best(function() for _ = 1, N do call() end end)
  local m = best(function()
    for _ = 1, N do
      dt.dispatch_cache_clear()
      call()
    end
  end) - clear
  dt.print0(string.format("%s, 1 element, %d ranks: cache hit %.2f us, cache miss %.2f us (+%.2f)", name,
                          dt.world_size(), h * 1e6, m * 1e6, (m - h) * 1e6))
end
lua_op("register_op twice(a)", function() return twice(a) end)
local a1 = dt.distribute_tensor(dt.ones(1), mesh, {dt.Replicate()}, {src_rank = false}) -- cat needs a dim
local list = {a1, a1}
lua_op("dt.cat({a, a}) (1-d)", function() return dt.cat(list) end)
local s = dt.dispatch_stats()
dt.print0(string.format("dispatch_stats on rank 0: %d hits, %d misses", s.hits, s.misses))
