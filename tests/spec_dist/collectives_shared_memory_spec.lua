-- SPMD specs of the collectives at random sizes (0, uneven, across the MPI backend's thresholds
-- of the shared-memory path, up to a few hundred KiB) in every dtype and reduce op, against a
-- reference each rank computes from every rank's inputs.  Under mpirun on one host they run on
-- the shared-memory data path from its thresholds up (scripts/run-tests also runs them with
-- DTLUA_MPI_SHM=always, every size on that path, and with DTLUA_MPI_SHM=0, none).
local D = dt.distributed
local rank, n = dt.rank(), dt.world_size()
local ALL = {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"}
local FLOATS = {float32 = true, float64 = true, bfloat16 = true, float16 = true}
local OPS = {"sum", "avg", "max", "min", "product"}

-- Element counts: 0, small uneven ones and ones from 4 KiB to 128 KiB of float32.  The same on
-- every rank whatever it ran before: a fixed generator started afresh (salt: which test).
local function sizes(salt)
  local seed = 12345 + salt
  local function rnd(k) -- 0 .. k-1
    seed = (seed * 1103515245 + 12345) % 2147483648
    return (seed >> 8) % k
  end
  local s = {0, 1, 3}
  for _ = 1, 2 do s[#s + 1] = 1024 * (1 << rnd(6)) + rnd(97) end
  return s
end

-- rank r's i-th element (i from 0): exact in every dtype, and so are their sums, maxima and
-- products over 4 ranks (product inputs are 1 or 2)
local function val(r, i, dtype, op)
  if dtype == "bool" then return (i + r) % 3 ~= 0 and 1 or 0 end
  if op == "product" then return (i + r) % 2 + 1 end
  return (i * 7 + r * 3) % 5 + 1
end
local function input(r, count, dtype, op, first)
  local t = {}
  for i = 1, count do t[i] = val(r, (first or 0) + i - 1, dtype, op) end
  if count == 0 then return dt.zeros({0}, {dtype = dtype}) end
  return dt.tensor(t, {dtype = dtype})
end
-- f(dtype, op) for every dtype and every reduce op it takes (avg: floating dtypes only)
local function each_dtype_op(f)
  for _, dtype in ipairs(ALL) do
    for _, op in ipairs(OPS) do
      if op ~= "avg" or FLOATS[dtype] then f(dtype, op) end
    end
  end
end
local function num(v) return v == true and 1 or v == false and 0 or v end

local function fold(op, a, b)
  if op == "max" then return math.max(a, b) end
  if op == "min" then return math.min(a, b) end
  if op == "product" then return a * b end
  return a + b
end
-- the reduction over ranks of element i, as the dtype holds it (bool: any / all)
local function reduced(i, dtype, op, members)
  local acc
  for _, r in ipairs(members) do
    local v = val(r, i, dtype, op)
    acc = acc and fold(op, acc, v) or v
  end
  if dtype == "bool" then return (op == "min" or op == "product") and acc or (acc > 0 and 1 or 0) end
  if op == "avg" then return acc / #members end
  return acc
end

local function check_values(got, want, what, tol)
  assert.are.equal(#want, #got, what)
  for i = 1, #want do
    local g = num(got[i])
    if tol then
      if math.abs(g - want[i]) > tol * math.max(1, math.abs(want[i])) then
        error(string.format("%s: element %d is %s, expected %s", what, i, g, want[i]))
      end
    elseif g ~= want[i] then
      error(string.format("%s: element %d is %s, expected %s", what, i, tostring(got[i]), want[i]))
    end
  end
end

-- every member holds the same bits: the members' results gathered, compared with this one
local function same_on_every_rank(t, group, what)
  local k = t:numel()
  if k == 0 then return end
  local all = D.all_gather(t, group):totable()
  local mine = t:totable()
  for p = 0, #all // k - 1 do
    for i = 1, k do
      if num(all[p * k + i]) ~= num(mine[i]) then
        error(string.format("%s: rank %d holds %s at element %d, this rank %s", what, p, tostring(all[p * k + i]), i,
          tostring(mine[i])))
      end
    end
  end
end

-- groups to run on: the world, and (n > 2) the ranks 1..n-1 (rank positions are 0-based
-- in the group; members lists their world ranks)
local groups = {{group = nil, members = {}}}
for r = 0, n - 1 do groups[1].members[r + 1] = r end
if n > 2 then
  local members = {}
  for r = 1, n - 1 do members[r] = r end
  groups[2] = {group = D.new_group(members), members = members}
end
local function each_group(f)
  for _, g in ipairs(groups) do
    local pos
    for i, r in ipairs(g.members) do
      if r == rank then pos = i - 1 end
    end
    if pos then f(g.group, g.members, pos) end
  end
end

describe("collectives at random sizes (the shared-memory data path under mpirun on one host)", function()
  it("all_reduce in place: every dtype and reduce op, the reference's values, the same bits on every rank", function()
    each_group(function(group, members)
      for _, count in ipairs(sizes(1)) do
        each_dtype_op(function(dtype, op)
          local t = input(rank, count, dtype, op)
          local r = D.all_reduce(t, op, group)
          assert.are.equal(t, r)
          local want = {}
          for i = 1, count do want[i] = reduced(i - 1, dtype, op, members) end
          local what = string.format("all_reduce(%s, %s, %d) on %d ranks", op, dtype, count, #members)
          check_values(t:totable(), want, what, op == "avg" and 1e-2 or nil)
          if op == "avg" then same_on_every_rank(t, group, what) end
        end)
      end
    end)
  end)

  it("all_reduce and reduce_scatter over several of the fold's 1 MiB chunks per rank", function()
    each_group(function(group, members, pos)
      local m = #members
      for _, dtype in ipairs({"float64", "float16"}) do
        local count = m * (1 << 18) + 3 -- float64: 2 MiB and more per rank's slice
        local t = D.all_reduce(input(rank, count, dtype, "sum"), "sum", group):totable()
        for i = 1, count, 997 do assert.are.equal(reduced(i - 1, dtype, "sum", members), t[i], dtype) end
        assert.are.equal(reduced(count - 1, dtype, "sum", members), t[count], dtype)
        local k = 1 << 18
        local out = D.reduce_scatter(input(rank, k * m, dtype, "max"), "max", group):totable()
        for i = 1, k, 997 do assert.are.equal(reduced(pos * k + i - 1, dtype, "max", members), out[i], dtype) end
      end
    end)
  end)

  it("reduce_scatter: every dtype and reduce op, each rank its slice of the reference", function()
    each_group(function(group, members, pos)
      local m = #members
      for _, count in ipairs(sizes(2)) do
        local k = count // m
        each_dtype_op(function(dtype, op)
          local out = D.reduce_scatter(input(rank, k * m, dtype, op), op, group)
          local want = {}
          for i = 1, k do want[i] = reduced(pos * k + i - 1, dtype, op, members) end
          check_values(out:totable(), want, string.format("reduce_scatter(%s, %s, %d)", op, dtype, k),
            op == "avg" and 1e-2 or nil)
        end)
      end
    end)
  end)

  it("all_gather, all_gather_v (uneven) and all_to_all move every rank's elements bit for bit", function()
    each_group(function(group, members, pos)
      local m = #members
      for _, count in ipairs(sizes(3)) do
        for _, dtype in ipairs(ALL) do
          local want = {}
          for p = 0, m - 1 do
            for i = 1, count do want[#want + 1] = val(members[p + 1], i - 1, dtype, "sum") end
          end
          check_values(D.all_gather(input(rank, count, dtype, "sum"), group):totable(), want,
            string.format("all_gather(%s, %d)", dtype, count))
          -- uneven: member p sends count + p elements
          local v, counts = D.all_gather_v(input(rank, count + pos, dtype, "sum"), group)
          want = {}
          for p = 0, m - 1 do
            assert.are.equal(count + p, counts[p + 1])
            for i = 1, count + p do want[#want + 1] = val(members[p + 1], i - 1, dtype, "sum") end
          end
          check_values(v:totable(), want, string.format("all_gather_v(%s, %d)", dtype, count))
          -- all_to_all: block q of p's input (elements q*k ..) lands as block p of q's output
          local k = count // m
          want = {}
          for p = 0, m - 1 do
            for i = 1, k do want[#want + 1] = val(members[p + 1], pos * k + i - 1, dtype, "sum") end
          end
          check_values(D.all_to_all(input(rank, k * m, dtype, "sum"), group):totable(), want,
            string.format("all_to_all(%s, %d)", dtype, k * m))
        end
      end
    end)
  end)

  it("broadcast from every root: the root's elements, bit for bit, the root's own untouched", function()
    each_group(function(group, members, pos)
      for _, count in ipairs(sizes(4)) do
        for _, dtype in ipairs(ALL) do
          for root = 0, #members - 1 do
            local t = input(pos == root and rank or 99, count, dtype, "sum")
            D.broadcast(t, members[root + 1], group)
            local want = {}
            for i = 1, count do want[i] = val(members[root + 1], i - 1, dtype, "sum") end
            check_values(t:totable(), want, string.format("broadcast(%s, %d, root %d)", dtype, count, root))
          end
        end
      end
    end)
  end)

  it("all_gather into strided blocks (Shard(k) -> Replicate): each peer read into its rows, bit for bit", function()
    -- the rows of a gathered Shard(2) or Shard(3) are strided in the output; under MPI on one
    -- host they are read straight into place (more than one read per peer past 512 rows)
    local mesh = dt.init_device_mesh("cpu", {n})
    local seed = 4242
    local function rnd(k)
      seed = (seed * 1103515245 + 12345) % 2147483648
      return (seed >> 8) % k
    end
    for _, dtype in ipairs({"float32", "float64", "bfloat16", "uint8"}) do
      for _ = 1, 6 do
        local nd = 2 + rnd(2)
        local shape, numel = {}, 1
        for d = 1, nd do
          shape[d] = rnd(3) == 0 and rnd(3) or 1 + rnd(d == 1 and 1200 or 40)
          numel = numel * shape[d]
        end
        local x = (dt.arange(numel) % 251):reshape(shape):to(dtype)
        local k = 1 + rnd(nd)
        local r = dt.distribute_tensor(x, mesh, {"S" .. k}):redistribute({"R"}):to_local()
        assert(dt.equal(r, x), string.format("Shard(%d) -> Replicate of %s %s", k, dtype, table.concat(shape, "x")))
      end
    end
  end)

  it("a send buffer changed right after the call does not change a peer's result", function()
    -- the call returns only once every peer has read this rank's buffer
    each_group(function(group, members)
      local count = 70000
      for _ = 1, 3 do
        local t = input(rank, count, "float32", "sum")
        local g = D.all_gather(t, group)
        t:fill_(-1)
        local all = g:totable()
        for p = 0, #members - 1 do
          assert.are.equal(val(members[p + 1], count - 1, "float32", "sum"), all[(p + 1) * count])
        end
      end
    end)
  end)
end)
