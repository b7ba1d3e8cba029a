-- Checkpoint throughput: dt.checkpoint.save and load of a sharded state (default 1 GiB of
-- float32, 8 tensors Shard(1) over the ranks), as a ratio of the disk's sequential write and
-- read measured in the same run with dd (write: conv=fsync, as each shard file is fsync'ed;
-- read: from the disk, after dropping the file's pages from the page cache, and from the page
-- cache; loads likewise -- see doc/performance.md), and the training time an async save costs.
-- Each load also prints its CPU seconds against dd's (user + system): on a shared machine the
-- wall-clock figures are mostly the wait for a core.
--   dtlua -n 4 bench/checkpoint.lua [MiB = 1024] [dir = a new temporary directory] [read]
-- read: how loads read their boxes, "auto" (what a load does), "preadv" or "mmap" (by default
-- no option is passed, so that builds from before the mmap reads run it too)
local baseline = dofile(((arg and arg[0] or ""):match("^(.*)/") or "bench") .. "/load_baseline.lua")
local now = baseline.now
local D = dt.distributed
local n, rank = dt.world_size(), dt.rank()
local mib = tonumber(arg and arg[1]) or 1024
local read = arg and arg[3]
local load_opts = read and {_read = read} or nil

-- one directory name for every rank (rank 0's)
local function shared_name(name)
  local bytes = {name:byte(1, -1)}
  for i = #bytes + 1, 256 do bytes[i] = 0 end
  local out = {}
  for _, b in ipairs(D.broadcast(dt.tensor(bytes, {dtype = "uint8"}), 0):tolist()) do
    if b ~= 0 then out[#out + 1] = string.char(b) end
  end
  return table.concat(out)
end
local base = arg and arg[2]
if base == "" then base = nil end
if not base then
  base = rank == 0 and os.tmpname() or ""
  if rank == 0 then os.remove(base) end
end
base = shared_name(base)
local dir = base .. "/ckpt"
if rank == 0 then os.execute("mkdir -p '" .. base .. "'") end
dt.barrier()

local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("a")
  p:close()
  return out
end

-- CPU seconds (user + system) this process has used, all its threads: on a machine other
-- programs load, wall-clock time is mostly the wait for a core, CPU time is the work done
local ticks = tonumber(sh("getconf CLK_TCK")) or 100
local function cpu_seconds()
  local f = io.open("/proc/self/stat")
  if not f then return 0 end
  local fields = {}
  for w in f:read("a"):match("%) (.*)"):gmatch("%S+") do fields[#fields + 1] = w end
  f:close()
  return (tonumber(fields[12]) + tonumber(fields[13])) / ticks
end
-- seconds of a collective phase: the slowest rank's (from a barrier to the end), and its CPU
-- seconds (the process's under threads, the processes' sum under MPI)
local function timed(f)
  dt.barrier()
  local t0, c0 = now(), cpu_seconds()
  f()
  local t = dt.tensor({now() - t0}, {dtype = "float64"})
  D.all_reduce(t, "max")
  local c = dt.tensor({cpu_seconds() - c0}, {dtype = "float64"})
  D.all_reduce(c, dt.backend() == "mpi" and "sum" or "max")
  return t:item(), c:item()
end

-- runs a dd command: wall-clock and CPU seconds
local function dd_timed(cmd)
  local t0 = now()
  local out = sh("/usr/bin/time -f 'cpu %U %S' " .. cmd)
  local u, sy = out:match("cpu ([%d.]+) ([%d.]+)")
  return now() - t0, (tonumber(u) or 0) + (tonumber(sy) or 0)
end

local bytes = mib * 1024 * 1024
local mesh = dt.init_device_mesh("cpu", {n})
local TENSORS = 8
local rows = bytes // TENSORS // 4 // 1024
local state = {model = {}}
for i = 1, TENSORS do
  state.model["w" .. i] = dt.distribute_tensor(dt.full({rows, 1024}, i, {dtype = "float32"}), mesh, {dt.Shard(1)},
                                              {src_rank = false})
end
local total = rows * 1024 * 4 * TENSORS

-- drops the page cache of the files under path (posix_fadvise DONTNEED through dd: no
-- privilege needed, other files untouched), so the next read comes from the disk
local function drop_cache(path)
  if rank == 0 then
    sh(string.format("for f in '%s' '%s'/*; do [ -f \"$f\" ] && dd if=\"$f\" iflag=nocache count=0; done", path, path))
  end
  dt.barrier()
end

-- the disk: one sequential dd stream of the same size: write, read cold (from the disk), read
-- warm (from the page cache)
local dd_write, dd_cold, dd_warm, dd_cold_cpu, dd_warm_cpu
if rank == 0 then
  local f = base .. "/dd.bin"
  local t0 = now()
  sh(string.format("dd if=/dev/zero of='%s' bs=4M count=%d conv=fsync", f, total // (4 * 1024 * 1024)))
  dd_write = now() - t0
  sh(string.format("dd if='%s' iflag=nocache count=0", f))
  dd_cold, dd_cold_cpu = dd_timed(string.format("dd if='%s' of=/dev/null bs=4M", f))
  dd_warm, dd_warm_cpu = dd_timed(string.format("dd if='%s' of=/dev/null bs=4M", f))
  os.remove(f)
end
local disk = D.broadcast(dt.tensor({dd_write or 0, dd_cold or 0, dd_warm or 0, dd_cold_cpu or 0, dd_warm_cpu or 0},
                                   {dtype = "float64"}), 0):tolist()

local t_save = timed(function() dt.checkpoint.save(state, dir) end)
local target = {model = {}}
for i = 1, TENSORS do -- loaded into other placements: Shard(2) (reads strided byte ranges)
  target.model["w" .. i] = dt.distribute_tensor(dt.zeros(rows, 1024, {dtype = "float32"}), mesh, {dt.Shard(2)},
                                               {src_rank = false})
end
-- where a load's time goes, per phase (the slowest rank's; absent in builds without phases)
local function phases()
  local p = dt.checkpoint.last_load_phases
  if not p then return "" end
  local out = {}
  for _, k in ipairs({"index", "plan", "read", "agree", "finish"}) do
    local t = dt.tensor({p[k]}, {dtype = "float64"})
    D.all_reduce(t, "max")
    out[#out + 1] = string.format("%s %.3f", k, t:item())
  end
  return "  [" .. table.concat(out, ", ") .. " s]"
end
local t_load, c_load = timed(function() dt.checkpoint.load(target, dir, load_opts) end)
local ph_load = phases()
local t_load_same, c_load_same = timed(function() dt.checkpoint.load(state, dir, load_opts) end)
local ph_same = phases()
drop_cache(dir)
local t_cold, c_cold = timed(function() dt.checkpoint.load(target, dir, load_opts) end)
local ph_cold = phases()
drop_cache(dir)
local t_cold_same, c_cold_same = timed(function() dt.checkpoint.load(state, dir, load_opts) end)
local ph_cold_same = phases()

-- training time lost to an async save: the same compute loop alone, then with a save in flight
local a, b = dt.randn(384, 384), dt.randn(384, 384)
local function train(steps) for _ = 1, steps do a = (a:matmul(b)):tanh() end end
train(2)
local steps = 40
local t_train = timed(function() train(steps) end)
local handle
-- the first async save allocates its copies (page faults); later ones, as in training, copy
-- into those buffers: the one measured is the second
local t_async_first = timed(function() dt.checkpoint.save(state, dir, {async = true}):wait() end)
local t_async_call = timed(function() handle = dt.checkpoint.save(state, dir, {async = true}) end)
local t_train_async = timed(function() train(steps) end)
local t_wait = timed(function() handle:wait() end)

local gib = total / 2 ^ 30
if rank == 0 then
  print(string.format("# bench/checkpoint.lua: %d rank(s), %s backend, %.2f GiB state (%d tensors, Shard(1)), " ..
                      "reads %s", n, dt.backend(), gib, TENSORS, read or "(default)"))
  print(string.format("disk (dd, one stream): write+fsync %.2f GiB/s, read from the disk %.2f GiB/s, from the page " ..
                      "cache %.2f GiB/s", gib / disk[1], gib / disk[2], gib / disk[3]))
  print(string.format("save:                  %.3f s  %.2f GiB/s  ratio to dd write %.2f", t_save, gib / t_save,
                      disk[1] / t_save))
  local function load_line(what, t, dd, ph, c, dd_cpu)
    print(string.format("%-44s %.3f s  %.2f GiB/s  ratio to dd %.2f%s", what, t, gib / t, dd / t, ph))
    print(string.format("%-44s cpu %.2f s, dd's %.2f s: ratio %.2f", "", c, dd_cpu, dd_cpu / math.max(c, 1e-9)))
  end
  load_line("load from the disk, Shard(1)->Shard(2):", t_cold, disk[2], ph_cold, c_cold, disk[4])
  load_line("load from the disk, same placements:", t_cold_same, disk[2], ph_cold_same, c_cold_same, disk[4])
  load_line("load from the page cache, Shard(1)->Shard(2):", t_load, disk[3], ph_load, c_load, disk[5])
  load_line("load from the page cache, same placements:", t_load_same, disk[3], ph_same, c_load_same, disk[5])
  print(string.format("async save: first one (copies allocated) %.3f s in all", t_async_first))
  print(string.format("async save: call %.3f s (the copy), training %d steps %.3f s alone, %.3f s with the save in " ..
                      "flight (%.3f s lost, %.0f%% of the blocking save), wait after %.3f s", t_async_call, steps, t_train,
                      t_train_async, t_async_call + t_train_async - t_train,
                      100 * (t_async_call + t_train_async - t_train) / t_save, t_wait))
end
dt.barrier()
if rank == 0 and not (arg and arg[2] and arg[2] ~= "") then os.execute("rm -rf '" .. base .. "'") end
