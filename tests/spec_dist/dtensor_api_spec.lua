-- DTensor API on every world size: the collectives each transition issues (dt.comm_debug),
-- from_local/to_local and run_check, factories on a mesh (random ones equal the
-- single-device draw bitwise), printing, visualize_sharding, explain_redistribute, errors.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local rank, n = dt.rank(), dt.world_size()

local function fails(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok, "expected an error matching: " .. pattern)
  assert.matches(pattern, err, 1, true)
end

local function issued(f) -- name -> count of the collectives f issued, and the total
  local c = dt.comm_debug(f)
  return c, #c.ops
end

describe("comm_debug", function()
  local mesh = dt.init_device_mesh("cpu", {n})
  local x = dt.arange(2 * n + 1):to("float32")

  it("each 1-d transition issues exactly the collective of the table", function()
    local one = n > 1 and 1 or 0
    local s = dt.distribute_tensor(x, mesh, {"S1"})
    local p = dt.distribute_tensor(x, mesh, {"P"})
    local r = dt.distribute_tensor(x, mesh, {"R"})
    local c, total = issued(function() assert(dt.equal(s:redistribute({"R"}):to_local(), x)) end)
    assert.are.equal(one, c.all_gather)
    assert.are.equal(one, total)
    c, total = issued(function() p:redistribute({"R"}) end)
    assert.are.equal(one, c.all_reduce)
    assert.are.equal(one, total)
    c, total = issued(function() p:redistribute({"S1"}) end)
    assert.are.equal(one, c.reduce_scatter)
    assert.are.equal(one, total)
    c, total = issued(function() r:redistribute({"S1"}) end)
    assert.are.equal(0, total)
    local m2 = dt.distribute_tensor(dt.arange(6 * n):reshape(3, 2 * n), mesh, {"S1"})
    c, total = issued(function() m2:redistribute({"S2"}) end)
    assert.are.equal(one, c.all_to_all)
    assert.are.equal(0, c.all_gather)
    assert.are.equal(one, total)
    for _, name in ipairs {"all_gather", "all_reduce", "reduce_scatter", "all_to_all", "broadcast", "scatter", "gather",
                           "send", "recv", "barrier"} do
      assert.are.equal("number", type(c[name]), name)
    end
  end)

  it("distribute_tensor scatters shards and broadcasts replicas from src_rank (after a metadata broadcast)", function()
    local c = issued(function() dt.distribute_tensor(x, mesh, {"S1"}, {src_rank = n - 1}) end)
    assert.are.equal(1, c.scatter)
    assert.are.equal(1, c.broadcast)
    c = issued(function() dt.distribute_tensor(x, mesh, {"R"}) end)
    assert.are.equal(2, c.broadcast)
    assert.are.equal(0, c.scatter)
    local _, total = issued(function() dt.distribute_tensor(x, mesh, {"S1"}, {src_rank = false}) end)
    assert.are.equal(0, total)
  end)

  it("counts dt.distributed.* calls, bytes and group sizes; the <close> form", function()
    local c = dt.comm_debug(function()
      dt.distributed.all_reduce(dt.ones(4))
      dt.distributed.barrier()
    end)
    assert.are.equal(1, c.all_reduce)
    assert.are.equal(1, c.barrier)
    assert.are.equal(16, c.bytes)
    assert.are.same({name = "all_reduce", bytes = 16, group_size = n}, c.ops[1])
    do
      local dbg <close> = dt.comm_debug()
      dt.distributed.all_reduce(dt.ones(2))
      assert.are.equal(1, dbg:counts().all_reduce)
      dt.distributed.all_reduce(dt.ones(2))
      assert.are.equal(2, dbg:counts().all_reduce)
    end
    local nothing = dt.comm_debug(function() end)
    assert.are.equal(0, nothing.bytes)
    assert.are.equal(0, #nothing.ops)
  end)

  it("2-d meshes: all_gathers over both dims merge into one over the 4 ranks, all_to_all for a Shard change", function()
    if n ~= 4 then return end
    local m = dt.init_device_mesh("cpu", {2, 2})
    local y = dt.arange(35):reshape(5, 7)
    for _, pl in ipairs {{"S1", "S1"}, {"S1", "S2"}, {"S2", "S1"}} do
      local d = dt.distribute_tensor(y, m, pl)
      local c, total = issued(function() assert(dt.equal(d:full_tensor(), y)) end)
      assert.are.equal(1, c.all_gather)
      assert.are.equal(1, total)
      assert.are.equal(4, c.ops[1].group_size)
    end
    local d = dt.distribute_tensor(y, m, {"S1", "S1"})
    local c, total = issued(function() d = d:redistribute({"R", "S1"}) end)
    assert.are.equal(1, c.all_gather)
    assert(dt.equal(d:full_tensor(), y))
    d = dt.distribute_tensor(y, m, {"S1", "R"})
    c, total = issued(function() d = d:redistribute({"S2", "R"}) end)
    assert.are.equal(1, c.all_to_all)
    assert.are.equal(1, total)
    assert(dt.equal(d:full_tensor(), y))
    d = dt.distribute_tensor(y, m, {"P", "S2"})
    c, total = issued(function() d = d:redistribute({"S1", "S2"}) end)
    assert.are.equal(1, c.reduce_scatter)
    assert.are.equal(1, total)
    assert(dt.equal(d:full_tensor(), y))
  end)
end)

describe("from_local / to_local", function()
  local mesh = dt.init_device_mesh("cpu", {n})

  it("infers the global shape from even shards, or takes shape; to_local shares storage", function()
    local t = dt.full({2, 3}, rank)
    local d = dt.from_local(t, mesh, {dt.Shard(1)})
    assert.are.same({2 * n, 3}, d:size())
    assert.is_true(d:to_local():shares_storage(t))
    local expect = {}
    for r = 0, n - 1 do expect[#expect + 1] = dt.full({2, 3}, r) end
    assert(dt.equal(d:full_tensor(), dt.cat(expect, 1)))
    local u = dt.from_local(dt.ones(rank == n - 1 and 1 or 2), mesh, {"S1"}, {shape = {2 * n - 1}})
    assert.are.same({2 * n - 1}, u:size())
    assert(dt.equal(u:full_tensor(), dt.ones(2 * n - 1)))
  end)

  it("run_check broadcasts Replicate dims from the first rank of the dim", function()
    local d = dt.from_local(dt.full({3}, rank), mesh, {"R"}, {run_check = true})
    assert(dt.equal(d:to_local(), dt.full({3}, 0)))
  end)

  it("run_check raises on every rank when a local shape disagrees", function()
    fails("from_local: run_check: global shape {" .. (3 * n + 1) .. ",2} with placements (Shard(1)) (from rank 0): " ..
          "rank 0's local tensor is int64 {3,2} (expected int64 {4,2})",
      dt.from_local, dt.full({3, 2}, 1), mesh, {"S1"}, {shape = {3 * n + 1, 2}, run_check = true})
  end)

  it("run_check gives the same message on every rank, naming every rank that disagrees", function()
    if n < 2 then return end
    -- rank 1 alone passes a wrong local shape (no global shape: rank 0's local times n)
    local bad = {}
    for r = 1, n - 1, 2 do bad[#bad + 1] = "rank " .. r .. "'s local tensor is float32 {3,2} (expected float32 {2,2})" end
    fails("from_local: run_check: global shape {" .. (2 * n) .. ",2} with placements (Shard(1)) (from rank 0): " ..
          table.concat(bad, "; ", 1, math.min(#bad, 4)),
      dt.from_local, dt.zeros(rank % 2 == 1 and 3 or 2, 2), mesh, {"S1"}, {run_check = true})
    -- ranks passing different global shapes
    if n >= 2 then
      fails("rank 1 passed another global shape than rank 0",
        dt.from_local, dt.zeros(2), mesh, {"R"}, {shape = {rank == 1 and 3 or 2}, run_check = true})
    end
  end)
end)

describe("factories on a mesh", function()
  local mesh = dt.init_device_mesh("cpu", {n})

  it("zeros/ones/empty/full allocate only the local shard", function()
    local z = dt.zeros({2 * n + 1, 3}, {device_mesh = mesh, placements = {"S1"}})
    assert.is_true(dt.is_dtensor(z))
    assert.are.same({2 * n + 1, 3}, z:size())
    local s, len = H.chunk(2 * n + 1, n, rank)
    assert.are.same({len, 3}, z:to_local():size())
    assert(dt.equal(z:full_tensor(), dt.zeros(2 * n + 1, 3)))
    local o = dt.ones(4, 5, {device_mesh = mesh, placements = {"S2"}, dtype = "float64"})
    assert.are.equal("float64", o.dtype)
    assert(dt.equal(o:full_tensor(), dt.ones(4, 5, {dtype = "float64"})))
    local f = dt.full({3}, 7, {device_mesh = mesh, placements = {"R"}})
    assert(dt.equal(f:to_local(), dt.full({3}, 7)))
    assert.are.same({6}, dt.empty({6}, {device_mesh = mesh, placements = {"S1"}}):size())
    do
      local _ <close> = mesh:use()
      assert.is_true(dt.is_dtensor(dt.zeros({4}, {placements = {"S1"}})))
    end
    fails("factories take Shard and Replicate placements only", dt.zeros, {4}, {device_mesh = mesh, placements = {"P"}})
  end)

  it("rand/randn on a mesh equal the single-device draw bitwise, and advance the generator alike", function()
    for _, case in ipairs {{"rand", {7, 5}, {"S1"}, "float32"}, {"randn", {5, 3}, {"S2"}, "float64"},
                           {"randn", {9}, {"S1"}, "float32"}, {"rand", {3, 4}, {"R"}, "bfloat16"}} do
      local name, shape, pl, dtype = table.unpack(case)
      dt.manual_seed(1234)
      local d = dt[name](shape, {device_mesh = mesh, placements = pl, dtype = dtype})
      local after = dt[name](3)
      dt.manual_seed(1234)
      local ref = dt[name](shape, {dtype = dtype})
      assert(dt.equal(d:full_tensor(), ref), name .. " " .. table.concat(shape, "x"))
      assert(dt.equal(after, dt[name](3)), name .. ": the generator advanced differently")
    end
  end)
end)

describe("printing", function()
  local mesh = dt.init_device_mesh("cpu", {n}, {"dp"})

  it("tostring shows the shape, placements, mesh and local shard", function()
    local d = dt.distribute_tensor(dt.arange(4), mesh, {"S1"})
    local s = tostring(d)
    assert.matches("DTensor(shape={4}, dtype=int64, placements=(Shard(1)), mesh=DeviceMesh('cpu'", s, 1, true)
    assert.matches("local (rank " .. rank .. ")=\ntensor(", s, 1, true)
  end)

  it("visualize_sharding: which ranks hold which ranges", function()
    local d = dt.distribute_tensor(dt.zeros(2 * n, 3), mesh, {"S1"})
    local text = dt.visualize_sharding(d, {print = false})
    assert.matches("rows \\ cols", text, 1, true)
    assert.matches("| 1-2 ", text, 1, true)
    assert.matches("rank " .. (n - 1), text, 1, true)
    local r = dt.visualize_sharding(dt.distribute_tensor(dt.zeros(5), mesh, {"R"}), {print = false})
    assert.matches(n > 1 and "ranks 0," or "rank 0", r, 1, true)
    fails("only 1-d and 2-d", dt.visualize_sharding, dt.distribute_tensor(dt.zeros(1, 1, 1), mesh, {"R"}))
    assert.are.equal(0, select("#", dt.visualize_sharding(d))) -- printed (rank 0): the REPL shows nothing more
  end)

  it("explain_redistribute lists the steps and costs", function()
    local d = dt.distribute_tensor(dt.zeros(4 * n, 2), mesh, {"S1"})
    local text = dt.explain_redistribute(d, {"R"}, {print = false})
    assert.matches("(Shard(1)) -> (Replicate())", text, 1, true)
    if n > 1 then assert.matches("all_gather", text, 1, true) end
    assert.matches("total:", text, 1, true)
  end)
end)

describe("DTensor errors", function()
  local mesh = dt.init_device_mesh("cpu", {n})
  local x = dt.arange(6):reshape(2, 3)

  it("are raised on every rank with the values involved", function()
    fails("distribute_tensor: 2 placements for a 1-d mesh", dt.distribute_tensor, x, mesh, {"R", "R"})
    fails("Shard(3) on mesh dim 1 is out of range for a 2-d tensor", dt.distribute_tensor, x, mesh, {dt.Shard(3)})
    local d = dt.distribute_tensor(x, mesh, {"S1"})
    local other = dt.DeviceMesh("cpu", {0})
    if n > 1 then
      fails("moving between meshes is not supported yet", function() return d:redistribute(other, {"R"}) end)
    end
    fails("a DTensor: this op has no sharding rule for DTensor arguments yet; use x:to_local() or x:full_tensor()",
          function() return d:totable() end)
    fails("indexing: index 3 out of range for dim 1 of size 2", function() return d[3] end)
    fails("cat: element 2 of the list is a plain tensor of 6 elements mixed with DTensors", function() return dt.cat({d, x}) end)
    fails("mm: expected 2-d tensors, got 2-d and 1-d", function() return dt.mm(d, d:sum(1)) end)
    fails("expected a DTensor, got a plain tensor", function() return x:full_tensor() end)
    fails("src_rank " .. n .. " is not a rank of", dt.distribute_tensor, x, mesh, {"R"}, {src_rank = n})
    fails("src_rank 0 passed no tensor", dt.distribute_tensor, rank ~= 0 and x or nil, mesh, {"S1"})
    local only_src = dt.distribute_tensor(rank == 0 and x or nil, mesh, {"S2"})
    assert(dt.equal(only_src:full_tensor(), x))
  end)

  it("Partial(max/avg) placements reduce with their op", function()
    local m = dt.from_local(dt.full({2}, rank + 1.0), mesh, {dt.Partial("max")})
    assert(dt.equal(m:full_tensor(), dt.full({2}, n * 1.0)))
    local a = dt.from_local(dt.full({2}, rank + 1.0), mesh, {dt.Partial("avg")})
    assert(dt.equal(a:full_tensor(), dt.full({2}, (n + 1) / 2)))
  end)
end)

describe("saving a DTensor to a file", function()
  it("says what to do instead (full_tensor or to_local), the same on every rank", function()
    local d = dt.distribute_tensor(dt.ones(4), dt.init_device_mesh("cpu", {n}), {dt.Shard(1)})
    local path = os.tmpname()
    fails("save: " .. path .. ": 'w' is a DTensor: save d:full_tensor()", dt.save, {w = d}, path)
    fails("save: " .. path .. ": the tensor is a DTensor: save d:full_tensor()", dt.save, d, path)
    fails("save_npy: " .. path .. ": the tensor is a DTensor", dt.save_npy, d, path)
    os.remove(path)
  end)
end)

describe("distribute_tensor onto a mesh without world rank 0", function()
  it("takes the tensor of the mesh's first rank by default (as PyTorch)", function()
    if n < 2 then return end
    local ranks = {}
    for r = 1, n - 1 do ranks[#ranks + 1] = r end
    local sub = dt.DeviceMesh("cpu", ranks)
    local x = dt.arange(6):to("float64") * (rank == 1 and 1 or -1) -- only rank 1's is right
    local d = dt.distribute_tensor(x, sub, {dt.Shard(1)})
    if rank ~= 0 then
      assert(dt.equal(d:full_tensor(), dt.arange(6):to("float64")))
    end
  end)
end)
