-- A Megatron-style tensor-parallel MLP on a 4-rank mesh, checked against one device.
-- Run: dtlua -n 4 examples/tensor_parallel_mlp.lua   (or: mpirun -np 4 dtlua ...)
local n = dt.world_size()
local mesh = dt.init_device_mesh("cpu", {n}, {"tp"})

-- The same seed on every rank: the global weights are identical everywhere.
dt.manual_seed(1234)
local x = dt.randn(8, 16)                 -- a batch, replicated
local w1 = dt.randn(16, 32) * 0.25        -- first layer: split by columns
local w2 = dt.randn(32, 16) * 0.25        -- second layer: split by rows

local X = dt.distribute_tensor(x, mesh, {"R"})
local W1 = dt.distribute_tensor(w1, mesh, {"S2"})   -- Shard(2): columns
local W2 = dt.distribute_tensor(w2, mesh, {"S1"})   -- Shard(1): rows

local Y
local comms = dt.comm_debug(function()
  local H = X:matmul(W1):relu()       -- R x S(2) -> S(2): no communication
  Y = H:matmul(W2)                    -- S(2) x S(1) -> Partial(sum): no communication yet
  Y = Y:redistribute(mesh, {"R"})     -- one all_reduce
end)

dt.print0("mesh:", tostring(mesh))
dt.print0("W1 placements:", tostring(W1.placements[1]), " local shard:", table.concat(W1:to_local():size(), "x"))
dt.print0(string.format("collectives: all_reduce=%d all_gather=%d, bytes=%d",
  comms.all_reduce, comms.all_gather, comms.bytes))

local reference = x:matmul(w1):relu():matmul(w2)      -- the same program on one device
local ok = Y:full_tensor():allclose(reference, 1e-5, 1e-5)
dt.print0("matches the single-device result:", ok)
dt.print0("output rows 1-2:")
dt.print0(Y:to_local()[{{1, 2}}])
assert(ok, "tensor-parallel result differs from the single-device one")
