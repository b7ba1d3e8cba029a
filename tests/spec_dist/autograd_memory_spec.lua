-- Autograd frees what it records: 1000 forward/backward iterations of a small
-- tensor-parallel model (DTensor weights made with requires_grad, an autograd.Function, a
-- checkpointed block with relu and dropout, an SGD step under no_grad) do not grow the process's resident memory
-- or this rank's Lua heap after warm-up.  Measured here: /proc/self/statm before and after
-- the loop, each after a full collection.  With threads every rank reads the same process
-- (the ranks' growths add up); under mpirun each rank its own.

-- (AddressSanitizer's quarantine: resident memory says nothing there; the loop runs, the Lua
-- heap is checked, and LeakSanitizer reports leaks at exit)
local mem = dofile("tests/spec/support/process_memory.lua")
local rss_bytes, sanitized = mem.rss_bytes, mem.sanitized

local function collect()
  collectgarbage()
  collectgarbage()
end

describe("autograd memory", function()
  it("1000 forward/backward iterations do not grow resident memory or the Lua heap after warm-up", function()
    local measure_rss = rss_bytes() ~= nil and not sanitized() -- /proc, and no quarantine
    local mesh = dt.init_device_mesh("cpu", {dt.world_size()})
    dt.manual_seed(0)
    -- local activations of [64, 64] float32 on every rank: one leaked per iteration would be
    -- 16 MiB per rank
    local hidden = 64 * dt.world_size()
    local w1 = dt.randn({64, hidden}, {device_mesh = mesh, placements = {dt.Shard(2)}, requires_grad = true})
    local w2 = dt.randn({hidden, 64}, {device_mesh = mesh, placements = {dt.Shard(1)}, requires_grad = true})
    local x = dt.randn({64, 64}, {device_mesh = mesh, placements = {dt.Replicate()}})
    local Scale = dt.autograd.Function {
      name = "Scale",
      forward = function(ctx, t) ctx:save_for_backward(t); return t * 0.5 end,
      backward = function(ctx, g) local t = table.unpack(ctx.saved_tensors); return g * 0.5 + t * 0 end,
    }
    local function block(h) return dt.F.dropout(dt.relu(h), 0.1):mm(w2) end
    local losses = 0
    local function step()
      local h = Scale.apply(x:mm(w1))
      local out = dt.utils.checkpoint(block, h)
      local loss = (out * 1e-3):sum()
      loss:backward()
      dt.no_grad(function()
        w1:add_(w1.grad * -1e-6)
        w2:add_(w2.grad * -1e-6)
      end)
      w1.grad, w2.grad = nil, nil
      losses = losses + 1
      -- a full collection each iteration: the resident high-water mark is then one
      -- iteration's temporaries, not wherever the collector's pace left it
      collectgarbage()
    end
    for _ = 1, 100 do step() end -- warm-up: caches, allocator arenas, the dispatcher's decisions
    collect()
    dt.barrier()
    local rss0, heap0 = measure_rss and rss_bytes(), collectgarbage("count")
    for _ = 1, 1000 do step() end
    collect()
    dt.barrier() -- every rank done before anyone reads the (shared) process's memory
    local rss1, heap1 = measure_rss and rss_bytes(), collectgarbage("count")
    dt.barrier()
    assert.are.equal(1100, losses)
    assert(heap1 - heap0 < 256, string.format("the Lua heap grew by %.0f KiB over 1000 iterations", heap1 - heap0))
    if not measure_rss then return end
    local grew = (rss1 - rss0) / 2 ^ 20
    assert(grew < 4, string.format("resident memory grew by %.1f MiB over 1000 iterations (%.1f -> %.1f MiB)", grew,
                                   rss0 / 2 ^ 20, rss1 / 2 ^ 20))
  end)
end)
