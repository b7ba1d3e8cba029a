-- dt.checkpoint on DTensors (dtlua -n 1..4, mpirun): a state saved with random placements on
-- one mesh loads into random placements on any other mesh (uneven, zero-size and 0-d tensors,
-- Partial saved and Partial targets, targets of another dtype, a mesh without rank 0), bit for
-- bit; plain values and plain tensors come back; strict = false reports missing and unexpected
-- keys; an async save (also through reused buffers) holds the values of the moment it was
-- called; a failed save leaves the previous checkpoint; bad input raises on every rank, names
-- the file and the tensor, and changes nothing.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local D = dt.distributed
local rank, n = dt.rank(), dt.world_size()

-- one temporary directory name for every rank (rank 0's, sent to the others)
local function shared_tmp()
  local name = rank == 0 and os.tmpname() or ""
  if rank == 0 then os.remove(name) end
  local bytes = {name:byte(1, -1)}
  for i = #bytes + 1, 128 do bytes[i] = 0 end
  local t = D.broadcast(dt.tensor(bytes, {dtype = "uint8"}), 0)
  local out = {}
  for _, b in ipairs(t:tolist()) do if b ~= 0 then out[#out + 1] = string.char(b) end end
  return table.concat(out)
end

local function rm(dir) -- a checkpoint directory holds files only
  dt.barrier()
  if rank == 0 then
    local p = io.popen('ls -A "' .. dir .. '" 2>/dev/null')
    for f in p:lines() do os.remove(dir .. "/" .. f) end
    p:close()
    os.remove(dir)
  end
  dt.barrier()
end

local function on_rank0(f) -- a file change every rank sees after it
  dt.barrier()
  if rank == 0 then f() end
  dt.barrier()
end

local function rewrite(path, edit)
  local f = assert(io.open(path, "rb"))
  local text = f:read("a")
  f:close()
  f = assert(io.open(path, "wb"))
  f:write(edit(text))
  f:close()
end

local DTYPES = {"float64", "float32", "bfloat16", "int64", "int32", "uint8", "bool"}
-- casts a load makes (torch.can_cast's: within a kind or up the kinds bool -> int -> float)
local CASTS = {bool = {"uint8", "int64", "float32"}, uint8 = {"int32", "int64", "float64"}, int32 = {"int64", "float64"},
               int64 = {"int32", "float64"}, float32 = {"float64", "bfloat16"}, float64 = {"float32", "float16"},
               bfloat16 = {"float32", "float64"}}

-- reshards on load: random shapes, dtypes and placements, saved on one mesh, loaded on another;
-- read = "auto" as a load reads, or "mmap": every box copied out of a mapping of its file
local function reshard_cases(read)
    local rng = H.prng(4242 + n)
    local meshes = H.meshes()
    local dir = shared_tmp()
    for case = 1, 12 do
      local ndim = rng.int(0, 3)
      local shape = H.shape_of(rng, ndim, case % 4 == 0 and 0 or 1, 6)
      local dtype = DTYPES[rng.int(1, #DTYPES)]
      local g1 = H.global(shape, dtype)
      local g2 = H.global(shape, dtype):to("float64"):add(1):to(dtype)
      local ma, mb = meshes[rng.int(1, #meshes)], meshes[rng.int(1, #meshes)]
      local pa, pb = H.placements(rng, ma[2], ndim, dtype ~= "bool" and "sum" and true), H.placements(rng, mb[2], ndim)
      local pc = H.placements(rng, mb[2], ndim)
      local what = string.format("case %d: %s %s %s on %s -> %s on %s", case, dtype, H.placement_string(pa),
                                 table.concat(shape, "x"), ma[1], H.placement_string(pb), mb[1])
      local a = H.dist(g1, ma[2], pa)
      if dtype == "bool" then a = H.dist(g1, ma[2], H.placements(rng, ma[2], ndim)) end
      local state = {model = {w = a, v = H.dist(g2, ma[2], H.placements(rng, ma[2], ndim))}, step = case}
      state.model.u, state.model.c = state.model.v, state.model.v -- the same tensor under other names
      dt.checkpoint.save(state, dir)
      -- w, v: other placements; u: Partial ones (its parts must reduce to the value); c: another dtype
      local cast = CASTS[dtype][rng.int(1, #CASTS[dtype])]
      local pu = H.placements(rng, mb[2], ndim, dtype ~= "bool" and (dtype:match("float") and dtype or true) or nil)
      local pd = H.placements(rng, mb[2], ndim)
      what = what .. string.format(", u %s, c %s %s", H.placement_string(pu), cast, H.placement_string(pd))
      local target = {model = {w = H.dist(dt.zeros(shape, {dtype = dtype}), mb[2], pb),
                               v = H.dist(dt.zeros(shape, {dtype = dtype}), mb[2], pc),
                               u = H.dist(dt.ones(shape, {dtype = dtype}), mb[2], pu),
                               c = H.dist(dt.zeros(shape, {dtype = cast}), mb[2], pd)}, step = 0}
      local w_before, w_local = target.model.w, target.model.w:to_local()
      dt.checkpoint.load(target, dir, {_read = read})
      assert.are.equal(w_before, target.model.w, what) -- filled in place
      local fw, fv = target.model.w:full_tensor(), target.model.v:full_tensor()
      local fu, fc = target.model.u:full_tensor(), target.model.c:full_tensor()
      if target.model.w.device_mesh:get_coordinate() then
        assert(H.same(target.model.w:to_local(), w_local), what) -- the view taken before sees the load
        assert(H.same(fw, g1), what)
        assert(H.same(fv, g2), what)
        assert(H.same(fu, g2), what)
        assert(H.same(fc, g2:to(cast)), what)
      end
      assert.are.equal(case, target.step)
      assert.are.equal("integer", math.type(target.step))
    end
    rm(dir)
end

describe("dt.checkpoint save and load", function()
  it("reshards on load: random shapes, dtypes and placements, saved on one mesh, loaded on another", function()
    reshard_cases("auto")
  end)

  it("reshards on load with every box read through a mapping of its file", function()
    reshard_cases("mmap")
  end)

  it("a strided reshard (Shard(1) saved, Shard(2) loaded) of uneven, zero-size and cast tensors", function()
    local dir = shared_tmp()
    local mesh = dt.init_device_mesh("cpu", {n})
    local shapes = {{301, 517}, {64, 1000 + n}, {0, 700}, {300, 0}, {2 * n + 1, 3}}
    local state, target, want = {}, {}, {}
    for i, shape in ipairs(shapes) do
      local g = H.values(shape, "float32")
      state["t" .. i] = H.dist(g, mesh, {dt.Shard(1)})
      local cast = i % 2 == 0 and "float64" or "float32"
      target["t" .. i] = H.dist(dt.zeros(shape, {dtype = cast}), mesh, {dt.Shard(2)})
      want["t" .. i] = g:to(cast)
    end
    dt.checkpoint.save(state, dir)
    dt.checkpoint.load(target, dir)
    for i = 1, #shapes do assert(H.same(target["t" .. i]:full_tensor(), want["t" .. i]), "t" .. i) end
    rm(dir)
  end)

  it("a load writes in place: a value saved for backward and loaded over is caught in backward", function()
    local dir = shared_tmp()
    local mesh = dt.init_device_mesh("cpu", {n})
    dt.checkpoint.save({w = H.dist(H.values({2 * n, 3}, "float64"), mesh, {dt.Shard(1)})}, dir)
    local p = H.dist(dt.ones(2 * n, 3, {dtype = "float64"}), mesh, {dt.Shard(1)}):requires_grad_()
    local loss = (p * p):sum()
    dt.checkpoint.load({w = p}, dir)
    H.fails("checkpoint read", function() loss:backward() end)
    rm(dir)
  end)

  it("saves each block once: a replicated tensor is in one file, a sharded one in one file per shard", function()
    local dir = shared_tmp()
    local mesh = dt.init_device_mesh("cpu", {n})
    local w = H.dist(H.values({4 * n, 3}, "float64"), mesh, {dt.Shard(1)})
    local b = H.dist(H.values({5}, "float64"), mesh, {dt.Replicate()})
    dt.checkpoint.save({w = w, b = b}, dir)
    local files = 0
    for r = 1, n do
      local f = io.open(string.format("%s/model-%05d-of-%05d.safetensors", dir, r, n), "rb")
      if f then
        files = files + 1
        f:close()
        local tensors = dt.load(string.format("%s/model-%05d-of-%05d.safetensors", dir, r, n))
        assert(H.same(tensors.w, w:full_tensor():narrow(1, 4 * (r - 1) + 1, 4)))
        assert.are.equal(r == 1, tensors.b ~= nil)
      end
    end
    assert.are.equal(n, files)
    rm(dir)
  end)

  it("restores plain values exactly, plain tensors, and creates entries the state lacks", function()
    local dir = shared_tmp()
    local mesh = dt.init_device_mesh("cpu", {n})
    local p = H.dist(H.values({3, 2}, "float64"), mesh, {dt.Shard(1)})
    local opt = dt.optim.Adam({p}, {lr = 0.01})
    p.grad = H.dist(H.values({3, 2}, "float64") * 0.5, mesh, {dt.Shard(1)})
    opt:step()
    local rng_state = dt.get_rng_state()
    dt.checkpoint.save({optim = opt:state_dict(), lr = 1 / 3, name = "run \"a\"\n", flag = true,
                        rng = rng_state, table_ = dt.arange(5)}, dir)
    local fresh = dt.optim.Adam({H.dist(dt.zeros(3, 2, {dtype = "float64"}), mesh, {dt.Replicate()})}, {lr = 0.5})
    local target = {optim = fresh:state_dict(), lr = 0, table_ = dt.zeros(5, {dtype = "int64"})}
    dt.checkpoint.load(target, dir)
    assert.are.equal(1 / 3, target.lr)
    assert.are.equal("run \"a\"\n", target.name)
    assert.are.equal(true, target.flag)
    assert.are.same(rng_state, target.rng)
    assert(dt.equal(target.table_, dt.arange(5)))
    fresh:load_state_dict(target.optim)
    assert.are.equal(0.01, fresh.param_groups[1].lr)
    local saved = opt:state_dict().state[1]
    local got = fresh:state_dict().state[1]
    assert(H.same(got.exp_avg:full_tensor(), saved.exp_avg:full_tensor()))
    assert(H.same(got.exp_avg_sq:full_tensor(), saved.exp_avg_sq:full_tensor()))
    rm(dir)
  end)

  it("async: the values of the moment of the call, written while the program goes on", function()
    local dir = shared_tmp()
    local mesh = dt.init_device_mesh("cpu", {n})
    local g = H.values({6, 5}, "float64")
    local w = H.dist(g:clone(), mesh, {dt.Shard(2)}) -- (on one rank the local tensor may be g itself)
    local h = dt.checkpoint.save({w = w}, dir, {async = true})
    w:to_local():fill_(-1) -- training goes on
    h:wait()
    h:wait() -- idempotent
    local t = {w = H.dist(dt.zeros(6, 5, {dtype = "float64"}), mesh, {dt.Shard(1)})}
    dt.checkpoint.load(t, dir)
    assert(H.same(t.w:full_tensor(), g))
    -- the next save waits for a pending one; so does a load
    dt.checkpoint.save({w = H.dist(g * 2, mesh, {dt.Replicate()})}, dir, {async = true})
    dt.checkpoint.load(t, dir)
    assert(H.same(t.w:full_tensor(), g * 2))
    -- async saves of the same layout reuse the previous copy's buffers: each holds its own moment
    local r = H.dist(g * 3, mesh, {dt.Replicate()})
    for step = 3, 5 do
      r:to_local():copy_(g * step)
      dt.checkpoint.save({w = r}, dir, {async = true})
      r:to_local():fill_(-step)
      dt.checkpoint.load(t, dir)
      assert(H.same(t.w:full_tensor(), g * step), "step " .. step)
    end
    rm(dir)
  end)

  it("a failed or interrupted save leaves the previous checkpoint intact", function()
    local dir = shared_tmp()
    local mesh = dt.init_device_mesh("cpu", {n})
    local g = H.values({4, 4}, "float64")
    dt.checkpoint.save({w = H.dist(g, mesh, {dt.Shard(1)})}, dir)
    -- an interrupted save: a stale temporary directory with some ranks' files and markers
    on_rank0(function()
      os.execute('mkdir -p "' .. dir .. '.dtlua-tmp" && echo junk > "' .. dir .. '.dtlua-tmp/model-00001-of-00009.safetensors"' ..
                 ' && touch "' .. dir .. '.dtlua-tmp/.done.0"')
    end)
    local t = {w = H.dist(dt.zeros(4, 4, {dtype = "float64"}), mesh, {dt.Replicate()})}
    dt.checkpoint.load(t, dir)
    assert(H.same(t.w:full_tensor(), g))
    -- a save that cannot create its temporary directory fails on every rank
    on_rank0(function()
      os.execute('rm -rf "' .. dir .. '.dtlua-tmp" && echo x > "' .. dir .. '.dtlua-tmp"')
    end)
    H.fails(dir .. ".dtlua-tmp", dt.checkpoint.save, {w = H.dist(g * 3, mesh, {dt.Shard(1)})}, dir)
    t.w:to_local():zero_()
    dt.checkpoint.load(t, dir)
    assert(H.same(t.w:full_tensor(), g))
    on_rank0(function() os.remove(dir .. ".dtlua-tmp") end)
    -- and the next save replaces the checkpoint (the stale temporary is cleaned up)
    dt.checkpoint.save({w = H.dist(g * 3, mesh, {dt.Shard(1)})}, dir)
    dt.checkpoint.load(t, dir)
    assert(H.same(t.w:full_tensor(), g * 3))
    rm(dir)
  end)
end)

describe("dt.checkpoint bad input", function()
  local mesh = dt.init_device_mesh("cpu", {n})
  local g = H.values({2 * n, 3}, "float64")

  local function fresh_checkpoint()
    local dir = shared_tmp()
    dt.checkpoint.save({w = H.dist(g, mesh, {dt.Shard(1)}), b = H.dist(g[1], mesh, {dt.Replicate()})}, dir)
    return dir
  end

  local function target()
    return {w = H.dist(dt.full({2 * n, 3}, 7, {dtype = "float64"}), mesh, {dt.Shard(2)}),
            b = H.dist(dt.full({3}, 7, {dtype = "float64"}), mesh, {dt.Replicate()})}
  end

  local function untouched(t) -- nothing half-loaded
    assert(H.same(t.w:full_tensor(), dt.full({2 * n, 3}, 7, {dtype = "float64"})))
    assert(H.same(t.b:full_tensor(), dt.full({3}, 7, {dtype = "float64"})))
  end

  it("a missing shard file", function()
    local dir = fresh_checkpoint()
    local file = string.format("%s/model-%05d-of-%05d.safetensors", dir, n, n)
    on_rank0(function() os.remove(file) end)
    local t = target()
    H.fails(file, dt.checkpoint.load, t, dir)
    H.fails("(it holds tensor '", dt.checkpoint.load, t, dir)
    untouched(t)
    rm(dir)
  end)

  it("a truncated file", function()
    local dir = fresh_checkpoint()
    local file = string.format("%s/model-%05d-of-%05d.safetensors", dir, 1, n)
    on_rank0(function() rewrite(file, function(s) return s:sub(1, #s - 5) end) end)
    local t = target()
    H.fails(file .. ": tensor '", dt.checkpoint.load, t, dir)
    H.fails("truncated", dt.checkpoint.load, t, dir)
    untouched(t)
    rm(dir)
  end)

  it("a file shortened during the load (after the checks, while it is mapped): every rank raises", function()
    local dir = shared_tmp()
    local big = H.values({64, 256 * n}, "float32")
    dt.checkpoint.save({w = H.dist(big, mesh, {dt.Shard(1)})}, dir)
    local file = string.format("%s/model-%05d-of-%05d.safetensors", dir, 1, n)
    local t = {w = H.dist(dt.zeros(64, 256 * n, {dtype = "float32"}), mesh, {dt.Shard(2)})}
    -- every rank reads from every file; the first is shortened once every rank has mapped it,
    -- so every rank's copy faults (SIGBUS) and every rank raises
    local function shorten()
      on_rank0(function() assert(os.execute(string.format("truncate -s 64 '%s'", file))) end)
    end
    H.fails(file .. ": tensor 'w': file is truncated or unreadable (SIGBUS", dt.checkpoint.load, t, dir,
            {_read = "mmap", _after_map = shorten})
    rm(dir)
  end)

  it("a file shortened between two ranks' header checks: every rank raises (no rank left waiting)", function()
    local dir = shared_tmp()
    dt.checkpoint.save({w = H.dist(H.values({8, 4 * n}, "float32"), mesh, {dt.Shard(1)})}, dir)
    local file = string.format("%s/model-%05d-of-%05d.safetensors", dir, n, n)
    -- the last rank's header checks see the shortened file, the others' do not
    if rank == n - 1 then assert(os.execute(string.format("truncate -s -5 '%s'", file))) end
    local t = {w = H.dist(dt.zeros(8, 4 * n, {dtype = "float32"}), mesh, {dt.Shard(2)})}
    H.fails(file, dt.checkpoint.load, t, dir)
    H.fails("truncated", dt.checkpoint.load, t, dir)
    rm(dir)
  end)

  it("an index naming a tensor its file does not hold", function()
    local dir = fresh_checkpoint()
    on_rank0(function()
      rewrite(dir .. "/model.safetensors.index.json", function(s) return (s:gsub('"b"', '"ghost"')) end)
    end)
    local t = target()
    H.fails("tensor 'ghost' is not in the file", dt.checkpoint.load, t, dir)
    H.fails("model-00001-of-", dt.checkpoint.load, t, dir)
    untouched(t)
    rm(dir)
  end)

  it("a state tensor the checkpoint lacks, a shape or a dtype that does not match", function()
    local dir = fresh_checkpoint()
    local index = dir .. "/model.safetensors.index.json"
    local t = target()
    t.extra = H.dist(dt.zeros(2), mesh, {dt.Replicate()})
    H.fails(index .. ": tensor 'extra' is not in the checkpoint", dt.checkpoint.load, t, dir)
    t.extra = nil
    untouched(t)
    local bad = target()
    bad.w = H.dist(dt.zeros(2 * n, 4, {dtype = "float64"}), mesh, {dt.Shard(1)})
    H.fails(index .. ": tensor 'w' has shape {" .. 2 * n .. ",3} in the checkpoint, {" .. 2 * n .. ",4} in the state",
            dt.checkpoint.load, bad, dir)
    assert(H.same(bad.b:full_tensor(), dt.full({3}, 7, {dtype = "float64"})))
    bad = target()
    bad.b = H.dist(dt.zeros(3, {dtype = "int64"}), mesh, {dt.Replicate()})
    H.fails(index .. ": tensor 'b' is float64 in the checkpoint, int64 in the state (a load casts only where " ..
            "torch.can_cast does", dt.checkpoint.load, bad, dir)
    assert(H.same(bad.w:full_tensor(), dt.full({2 * n, 3}, 7, {dtype = "float64"})))
    H.fails("checkpoint.load: unknown option 'strickt' (options: strict)", dt.checkpoint.load, target(), dir,
            {strickt = false})
    rm(dir)
  end)

  it("strict = false: a state tensor or value the checkpoint lacks is reported, not an error", function()
    local dir = shared_tmp()
    dt.checkpoint.save({w = H.dist(g, mesh, {dt.Shard(1)}), step = 3, old = H.dist(g[1], mesh, {dt.Replicate()}),
                        opt = {lr = 0.5}}, dir)
    local t = target()
    local keep_b = t.b
    t.step, t.tag = 0, "mine"
    t.b = nil
    t.new = keep_b -- in the state, not in the checkpoint
    local state, keys = dt.checkpoint.load(t, dir, {strict = false})
    assert.are.equal(t, state)
    assert.are.same({"new", "tag"}, keys.missing_keys)
    assert.are.same({"old", "opt.lr"}, keys.unexpected_keys)
    assert(H.same(t.w:full_tensor(), g))
    assert(H.same(t.new:full_tensor(), dt.full({3}, 7, {dtype = "float64"}))) -- left as it was
    assert.are.equal("mine", t.tag)
    assert.are.equal(3, t.step)
    assert(H.same(t.old, g[1])) -- added whole, as a fresh optimizer's entries are
    assert.are.equal(0.5, t.opt.lr)
    -- strict (the default) refuses the same state, on every rank, before anything is read
    local t2 = target()
    t2.w:to_local():fill_(7)
    t2.new = t2.b
    t2.b = nil
    H.fails("tensor 'new' is not in the checkpoint (strict = false reports it instead)", dt.checkpoint.load, t2, dir)
    assert(H.same(t2.w:full_tensor(), dt.full({2 * n, 3}, 7, {dtype = "float64"})))
    t2.new = nil
    t2.tag = "x"
    H.fails("value 'tag' is not in the checkpoint", dt.checkpoint.load, t2, dir)
    -- a complete state: nothing missing; the checkpoint's extra entries are still listed
    local _, k2 = dt.checkpoint.load({w = t2.w, step = 0}, dir)
    assert.are.same({}, k2.missing_keys)
    assert.are.same({"old", "opt.lr"}, k2.unexpected_keys)
    rm(dir)
  end)

  it("a state that is not a table of tensors and values", function()
    H.fails("checkpoint.save: state must be a table", dt.checkpoint.save, dt.ones(2), "/tmp/x")
    H.fails("checkpoint.save: state.f is a function", dt.checkpoint.save, {f = print}, "/tmp/x")
    H.fails("checkpoint.save: unknown option 'asynch'", dt.checkpoint.save, {}, "/tmp/x", {asynch = true})
    H.fails("checkpoint.load: /nonexistent/dir/model.safetensors.index.json: cannot open the index",
            dt.checkpoint.load, {}, "/nonexistent/dir")
  end)
end)
