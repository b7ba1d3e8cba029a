-- The two ways a checkpoint load reads a strided box (src/io/safetensors_boxes.c), alternating
-- on the same files from the page cache: a state (default 512 MiB of float32, 8 tensors
-- Shard(1)) saved once, then loaded into Shard(2) (each rank keeps 1/N of every row) with
-- `_read = "preadv"` (whole rows read through) and `_read = "mmap"` (the kept bytes copied out
-- of a mapping) in turn; prints each path's median seconds (slowest rank) and mmap's speed-up.
--   dtlua -n 4 bench/checkpoint_read_paths.lua [MiB = 512] [loads per path = 7]
local D = dt.distributed
local n, rank = dt.world_size(), dt.rank()
local mib, reps = tonumber(arg and arg[1]) or 512, tonumber(arg and arg[2]) or 7
local now = require("dtensor.core")._monotonic_time

local name = rank == 0 and os.tmpname() or ""
if rank == 0 then os.remove(name) end
local bytes = {name:byte(1, -1)}
for i = #bytes + 1, 256 do bytes[i] = 0 end
local chars = {}
for _, b in ipairs(D.broadcast(dt.tensor(bytes, {dtype = "uint8"}), 0):tolist()) do
  if b ~= 0 then chars[#chars + 1] = string.char(b) end
end
local dir = table.concat(chars)

local mesh = dt.init_device_mesh("cpu", {n})
local rows = mib * 1024 * 1024 // 8 // 4 // 1024
local state, target = {}, {}
for i = 1, 8 do
  state["w" .. i] = dt.distribute_tensor(dt.full({rows, 1024}, i, {dtype = "float32"}), mesh, {dt.Shard(1)},
                                         {src_rank = false})
  target["w" .. i] = dt.distribute_tensor(dt.zeros(rows, 1024, {dtype = "float32"}), mesh, {dt.Shard(2)},
                                          {src_rank = false})
end
dt.checkpoint.save(state, dir)

local times = {preadv = {}, mmap = {}}
for _ = 1, reps do
  for _, path in ipairs({"preadv", "mmap"}) do
    dt.barrier()
    local t0 = now()
    dt.checkpoint.load(target, dir, {_read = path})
    local t = dt.tensor({now() - t0}, {dtype = "float64"})
    D.all_reduce(t, "max")
    table.insert(times[path], t:item())
  end
end
for i = 1, 8 do assert(dt.equal(target["w" .. i]:to_local(), state["w" .. i]:redistribute(mesh, {dt.Shard(2)}):to_local())) end

local function median(t)
  table.sort(t)
  return t[(#t + 1) // 2]
end
if rank == 0 then
  local p, m = median(times.preadv), median(times.mmap)
  print(string.format("# bench/checkpoint_read_paths.lua: %d rank(s), %d MiB, Shard(1) -> Shard(2), %d loads per path",
                      n, mib, reps))
  print(string.format("preadv (baseline): %.3f s  %.2f GiB/s", p, mib / 1024 / p))
  print(string.format("mmap:              %.3f s  %.2f GiB/s  speed-up %.2f", m, mib / 1024 / m, p / m))
  os.execute("rm -rf '" .. dir .. "'")
end
