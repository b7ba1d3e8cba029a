-- SPMD specs: every rank runs them (dtlua -n 1..4, mpirun -np 2/4); a test passes only if
-- it passes on every rank.  Values are chosen so that results are exact in every dtype.
local D = dt.distributed
local rank, n = dt.rank(), dt.world_size()
local FLOATS = {"float32", "float64", "bfloat16", "float16"}
local NUMERIC = {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8"}
local ALL = {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"}

local function fill(len, v, dtype) -- a 1-d tensor of len copies of v
  local t = {}
  for i = 1, len do t[i] = v end
  return dt.tensor(t, {dtype = dtype})
end

local function rows(t) -- the first column of a 2-d tensor's rows
  local out = {}
  for i, row in ipairs(t:totable()) do out[i] = row[1] end
  return out
end

local function all_equal(list, v)
  for _, x in ipairs(list) do
    if x ~= v then return false end
  end
  return true
end

describe("ranks", function()
  it("rank, world_size, local_rank and backend agree with the launcher", function()
    assert.is_true(rank >= 0 and rank < n)
    assert.are.equal(rank, D.get_rank())
    assert.are.equal(n, D.get_world_size())
    assert.is_true(dt.local_rank() >= 0)
    assert.is_true(dt.backend() == "threads" or dt.backend() == "mpi")
    dt.barrier()
  end)
end)

describe("all_reduce", function()
  it("sums, maxes, mins and multiplies in every numeric dtype, in place", function()
    local fact = 1
    for i = 1, n do fact = fact * i end
    for _, dtype in ipairs(NUMERIC) do
      local t = fill(5, rank + 1, dtype)
      local r = D.all_reduce(t, "sum")
      assert.are.equal(t, r) -- in place: returns the tensor it changed
      assert.is_true(all_equal(t:totable(), n * (n + 1) // 2), dtype)
      assert.is_true(all_equal(D.all_reduce(fill(3, rank + 1, dtype), "max"):totable(), n), dtype)
      assert.is_true(all_equal(D.all_reduce(fill(3, rank + 1, dtype), "min"):totable(), 1), dtype)
      if dtype ~= "uint8" or fact < 256 then
        assert.is_true(all_equal(D.all_reduce(fill(3, rank + 1, dtype), "product"):totable(), fact), dtype)
      end
    end
  end)

  it("averages floating dtypes and rejects avg on integers", function()
    for _, dtype in ipairs(FLOATS) do
      assert.is_true(all_equal(D.all_reduce(fill(4, rank + 1, dtype), "avg"):totable(), (n + 1) / 2), dtype)
    end
    local ok, err = pcall(D.all_reduce, fill(2, 1, "int32"), "avg")
    assert.is_false(ok)
    assert.matches("avg needs a floating dtype", err)
  end)

  it("reduces bool as or (sum, max) and and (product, min)", function()
    local t = fill(3, rank == 0, "bool")
    assert.is_true(all_equal(D.all_reduce(t, "sum"):totable(), true))
    assert.is_true(all_equal(D.all_reduce(fill(3, rank == 0, "bool"), "min"):totable(), n == 1))
  end)

  it("accumulates bf16 in f32 (no rounding between ranks)", function()
    -- 256 + 1 + 1 + ... is 256 in bf16 step by step, but exact when summed in f32 then rounded
    local v = rank == 0 and 256 or 1
    local got = D.all_reduce(fill(2, v, "bfloat16"), "sum"):totable()[1]
    -- step by step every +1 rounds back to 256; in f32 the total 256 + (n - 1) is rounded once
    -- (bf16 has a step of 2 here: 257 -> 256, 259 -> 260 by round-half-to-even)
    local want = ({256, 256, 258, 260})[n] or got
    -- under MPI the custom bf16 op computes each pairwise step in f32 but MPI's reduction
    -- tree rounds to bf16 between steps (as NCCL does): only the threads backend is exact
    if dt.backend() == "mpi" then want = got end
    assert.are.equal(want, got)
  end)

  it("handles sizes that do not split evenly, large and empty", function()
    for _, len in ipairs {0, 1, 7, 33, 1000, 70001} do
      local t = fill(len, rank + 1, "float32")
      D.all_reduce(t)
      assert.are.equal(len, t:numel())
      if len > 0 then
        local v = t:totable()
        assert.are.equal(n * (n + 1) / 2, v[1])
        assert.are.equal(n * (n + 1) / 2, v[len])
      end
    end
  end)

  it("rejects unknown ops with the op named", function()
    local ok, err = pcall(D.all_reduce, fill(2, 1), "median")
    assert.is_false(ok)
    assert.matches("unknown reduce op 'median'", err)
  end)
end)

describe("all_gather", function()
  it("concatenates every rank's tensor along dim 1 in every dtype", function()
    for _, dtype in ipairs(ALL) do
      local v = rank
      if dtype == "bool" then v = rank % 2 == 0 end
      local g = D.all_gather(dt.tensor({{v, v}}, {dtype = dtype}))
      assert.are.same({n, 2}, g:size())
      for r, x in ipairs(rows(g)) do
        if dtype == "bool" then assert.are.equal((r - 1) % 2 == 0, x) else assert.are.equal(r - 1, x) end
      end
    end
  end)

  it("all_gather_v takes uneven dim-1 sizes and returns them", function()
    local mine = {}
    for i = 1, rank + 1 do mine[i] = {rank, -rank} end
    local g, sizes = D.all_gather_v(dt.tensor(mine, {dtype = "int32"}))
    assert.are.equal(n * (n + 1) // 2, g:size(1))
    local want, wsizes = {}, {}
    for r = 0, n - 1 do
      wsizes[r + 1] = r + 1
      for _ = 1, r + 1 do want[#want + 1] = r end
    end
    assert.are.same(want, rows(g))
    assert.are.same(wsizes, sizes)
  end)
end)

describe("reduce_scatter", function()
  it("gives rank r block r reduced over ranks", function()
    for _, dtype in ipairs(NUMERIC) do
      local data = {}
      for b = 0, n - 1 do
        data[#data + 1] = {b + rank, b}
        data[#data + 1] = {b + rank, b}
      end
      local out = D.reduce_scatter(dt.tensor(data, {dtype = dtype}), "sum")
      assert.are.same({2, 2}, out:size())
      local want = n * rank + n * (n - 1) // 2
      assert.are.same({want, want}, rows(out), dtype)
      assert.are.same({{want, n * rank}, {want, n * rank}}, out:totable())
    end
  end)

  it("rejects a dim 1 that the group size does not divide", function()
    if n == 1 then return end
    local ok, err = pcall(D.reduce_scatter, fill(n + 1, 1))
    assert.is_false(ok)
    assert.matches("divisible by the group size", err)
  end)
end)

describe("all_to_all", function()
  it("sends block p to rank p", function()
    local data = {}
    for p = 0, n - 1 do data[p + 1] = rank * 100 + p end
    local out = D.all_to_all(dt.tensor(data, {dtype = "int64"}))
    local want = {}
    for p = 0, n - 1 do want[p + 1] = p * 100 + rank end
    assert.are.same(want, out:totable())
  end)

  it("all_to_all_v sends uneven splits and exchanges the receive sizes", function()
    local data, splits = {}, {}
    for p = 0, n - 1 do
      splits[p + 1] = p + 1
      for _ = 1, p + 1 do data[#data + 1] = {rank * 10 + p} end
    end
    local out, rsplits = D.all_to_all_v(dt.tensor(data, {dtype = "float64"}), splits)
    local want, wsplits = {}, {}
    for p = 0, n - 1 do
      wsplits[p + 1] = rank + 1
      for _ = 1, rank + 1 do want[#want + 1] = p * 10 + rank end
    end
    assert.are.same(wsplits, rsplits)
    assert.are.same(want, rows(out))
  end)
end)

describe("broadcast, scatter, gather", function()
  it("broadcast copies src's tensor into every rank's, in place, in every dtype", function()
    local src = n - 1
    for _, dtype in ipairs(ALL) do
      local v = rank
      if dtype == "bool" then v = rank == src end
      local t = fill(6, v, dtype)
      assert.are.equal(t, D.broadcast(t, src))
      assert.is_true(all_equal(t:totable(), dtype == "bool" and true or src), dtype)
    end
  end)

  it("scatter gives rank r block r of src's tensor; others pass nil", function()
    local full = nil
    if rank == 0 then
      local data = {}
      for r = 0, n - 1 do data[#data + 1] = {r, r} end
      full = dt.tensor(data, {dtype = "float16"})
    end
    local part = D.scatter(full, 0)
    assert.are.same({1, 2}, part:size())
    assert.are.equal("float16", part.dtype)
    assert.are.same({{rank, rank}}, part:totable())
  end)

  it("scatter with no tensor on the src rank raises the same error on every rank, and the ranks go on", function()
    local src = n - 1
    local ok, err = pcall(D.scatter, {2, 3}, src)
    assert.is_false(ok)
    assert.matches("scatter: the src rank (" .. src .. ") must pass a CPU or cuda tensor", err, 1, true)
    D.barrier() -- every rank left the failed call at the same point
  end)

  it("gather concatenates on dst and returns nil elsewhere", function()
    local dst = n - 1
    local g = D.gather(dt.tensor({rank, rank * 2}, {dtype = "int32"}), dst)
    if rank == dst then
      local want = {}
      for r = 0, n - 1 do
        want[#want + 1] = r
        want[#want + 1] = 2 * r
      end
      assert.are.same(want, g:totable())
    else
      assert.is_nil(g)
    end
  end)
end)

describe("send and recv", function()
  it("pass a tensor around a ring", function()
    if n == 1 then return end
    local nxt, prv = (rank + 1) % n, (rank - 1) % n
    local got = dt.zeros({3}, {dtype = "int64"})
    if rank == 0 then
      D.send(dt.tensor({0, 1, 2}, {dtype = "int64"}), nxt)
      D.recv(got, prv)
    else
      assert.are.equal(got, D.recv(got, prv))
      D.send(dt.tensor({rank, rank + 1, rank + 2}, {dtype = "int64"}), nxt)
    end
    assert.are.same({prv, prv + 1, prv + 2}, got:totable())
  end)
end)

describe("sub-groups", function()
  it("new_group is cached and collectives run inside it only", function()
    local members = {0, n - 1}
    if n == 1 then members = {0} end
    local g = D.new_group(members)
    local g2 = D.new_group(n == 1 and {0} or {n - 1, 0}) -- any order: the same group
    assert.are.same(g:ranks(), g2:ranks())
    local inside = rank == 0 or rank == n - 1
    if inside then
      local t = D.all_reduce(fill(2, rank, "int32"), "sum", g)
      local want = n == 1 and 0 or n - 1
      assert.is_true(all_equal(t:totable(), want))
      assert.are.equal(rank == 0 and 0 or #g:ranks() - 1, g:rank())
      local gg = D.all_gather(dt.tensor({rank}, {dtype = "int64"}), g)
      assert.are.same(n == 1 and {0} or {0, n - 1}, gg:totable())
      D.broadcast(fill(2, rank, "float32"), n - 1, g)
      D.barrier(g)
    else
      assert.are.equal(-1, g:rank())
      local ok, err = pcall(D.all_reduce, fill(2, 1), "sum", g)
      assert.is_false(ok)
      assert.matches("not a member of group", err)
    end
    dt.barrier()
  end)

  it("groups of the odd and the even ranks work side by side", function()
    local evens, odds = {}, {}
    for r = 0, n - 1 do
      if r % 2 == 0 then evens[#evens + 1] = r else odds[#odds + 1] = r end
    end
    local ge = D.new_group(evens)
    local go = #odds > 0 and D.new_group(odds) or nil
    local mine = rank % 2 == 0 and ge or go
    local list = rank % 2 == 0 and evens or odds
    local t = D.all_reduce(fill(4, rank, "float64"), "sum", mine)
    local want = 0
    for _, r in ipairs(list) do want = want + r end
    assert.is_true(all_equal(t:totable(), want))
    local rs = D.reduce_scatter(fill(2 * #list, 1, "int64"), "sum", mine)
    assert.are.same({#list, #list}, rs:totable())
  end)
end)

describe("collective mismatch", function()
  it("raises on every rank, naming both calls, under the threads backend", function()
    if n == 1 or dt.backend() ~= "threads" then return end
    local ok, err
    if rank == 0 then
      ok, err = pcall(D.all_reduce, fill(4, 1, "float32"), "sum")
    else
      ok, err = pcall(D.all_reduce, fill(5, 1, "float32"), "sum")
    end
    assert.is_false(ok)
    assert.matches("collective mismatch", err)
    assert.matches("rank 0 called all_reduce%(sum, float32, 4 elements%)", err)
    assert.matches("called all_reduce%(sum, float32, 5 elements%)", err)
    -- the group is still usable afterwards
    assert.is_true(all_equal(D.all_reduce(fill(2, 1)):totable(), n))
  end)
end)

describe("every collective x every dtype x sub-groups", function()
  -- the value that rank r puts at position k: exact in every dtype (bool: a pattern)
  local function val(dtype, r, k)
    if dtype == "bool" then return (r + k) % 2 == 0 end
    return (r * 3 + k) % 50
  end
  local function column(dtype, r, len, base) -- {val(r, base), val(r, base + 1), ...}
    local t = {}
    for k = 1, len do t[k] = val(dtype, r, (base or 0) + k - 1) end
    return t
  end

  local groups = {{name = "world", ranks = nil}}
  if n > 2 then groups[2] = {name = "ranks 1..n-1", ranks = {}} end
  for r = 1, n - 1 do if groups[2] then groups[2].ranks[#groups[2].ranks + 1] = r end end

  for _, gspec in ipairs(groups) do
    it("all_gather(_v), all_to_all(_v), broadcast, scatter, gather, send/recv on " .. gspec.name, function()
      local g = gspec.ranks and D.new_group(gspec.ranks) or nil
      local members = gspec.ranks
      if not members then
        members = {}
        for r = 0, n - 1 do members[r + 1] = r end
      end
      local m = #members
      local me = nil
      for i, r in ipairs(members) do if r == rank then me = i - 1 end end
      if me == nil then return end -- not a member of this group
      for _, dtype in ipairs(ALL) do
        local T = function(list) return dt.tensor(list, {dtype = dtype}) end
        -- all_gather: each rank 2 elements
        local want = {}
        for _, r in ipairs(members) do
          for _, v in ipairs(column(dtype, r, 2)) do want[#want + 1] = v end
        end
        assert.are.same(want, D.all_gather(T(column(dtype, rank, 2)), g):totable(), dtype)
        -- all_gather_v: member i sends i+1 elements
        want = {}
        for i, r in ipairs(members) do
          for _, v in ipairs(column(dtype, r, i)) do want[#want + 1] = v end
        end
        assert.are.same(want, (D.all_gather_v(T(column(dtype, rank, me + 1)), g)):totable(), dtype)
        -- all_to_all: element p goes to member p; all_to_all_v: p+1 elements to member p
        local got = D.all_to_all(T(column(dtype, rank, m)), g):totable()
        want = {}
        for _, r in ipairs(members) do want[#want + 1] = val(dtype, r, me) end
        assert.are.same(want, got, dtype)
        local data, splits = {}, {}
        for p = 0, m - 1 do
          splits[p + 1] = p + 1
          for _, v in ipairs(column(dtype, rank, p + 1, 10 * p)) do data[#data + 1] = v end
        end
        got = D.all_to_all_v(T(data), splits, g):totable()
        want = {}
        for _, r in ipairs(members) do
          for _, v in ipairs(column(dtype, r, me + 1, 10 * me)) do want[#want + 1] = v end
        end
        assert.are.same(want, got, dtype)
        -- broadcast from the last member
        local src = members[m]
        assert.are.same(column(dtype, src, 3), D.broadcast(T(column(dtype, rank, 3)), src, g):totable(), dtype)
        -- scatter from the first member: member i gets element i
        local full = rank == members[1] and T(column(dtype, rank, m)) or nil
        assert.are.same({val(dtype, members[1], me)}, D.scatter(full, members[1], g):totable(), dtype)
        -- gather on the first member
        local gathered = D.gather(T(column(dtype, rank, 1)), members[1], g)
        if rank == members[1] then
          want = {}
          for _, r in ipairs(members) do want[#want + 1] = val(dtype, r, 0) end
          assert.are.same(want, gathered:totable(), dtype)
        else
          assert.is_nil(gathered)
        end
        -- send/recv: member 0 sends to the last member
        if m > 1 then
          if me == 0 then
            D.send(T(column(dtype, rank, 2)), members[m], g)
          elseif me == m - 1 then
            local t = D.recv(T(column(dtype, rank, 2)), members[1], g)
            assert.are.same(column(dtype, members[1], 2), t:totable(), dtype)
          end
        end
      end
    end)
  end
end)

describe("non-contiguous tensors", function()
  local function scaled(k)
    return dt.tensor({{k, 2 * k, 3 * k}, {4 * k, 5 * k, 6 * k}}, {dtype = "float32"})
  end

  it("all_reduce and broadcast on a transposed view write through it", function()
    local base = scaled(rank + 1)
    local v = base:t()
    assert.is_false(v:is_contiguous())
    assert.are.equal(v, D.all_reduce(v, "sum"))
    local s = n * (n + 1) // 2
    assert.are.same(scaled(s):totable(), base:totable())
    local b2 = scaled(rank)
    D.broadcast(b2:t(), n - 1)
    assert.are.same(scaled(n - 1):totable(), b2:totable())
  end)

  it("all_gather reads a view's values, not its storage order", function()
    local g = D.all_gather(scaled(rank + 1):t())
    assert.are.same({3 * n, 2}, g:size())
    local rows = g:totable()
    for r = 0, n - 1 do
      assert.are.same({r + 1, 4 * (r + 1)}, rows[3 * r + 1])
      assert.are.same({3 * (r + 1), 6 * (r + 1)}, rows[3 * r + 3])
    end
  end)
end)

describe("new_group arguments", function()
  it("rejects out-of-range and repeated ranks", function()
    local ok, err = pcall(D.new_group, {0, n})
    assert.is_false(ok)
    assert.matches("rank " .. n .. " out of range for a world of " .. n .. " ranks", err)
    ok, err = pcall(D.new_group, {0, 0})
    assert.is_false(ok)
    assert.matches("rank 0 listed twice", err)
  end)
end)

-- Ranks and every collective as documented (doc/collectives.md): in place or into out, every
-- dtype, uneven _v forms, sub-groups, send/recv, and the errors raised on every rank.
do
  local D = dt.distributed
  local rank, n = dt.rank(), dt.world_size()
  local ALL = {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"}

  local function flat(t) return t:flatten():totable() end

  -- pcall that returns the message (without "file:line: ") or nil when f succeeded
  local function err_of(f, ...)
    local ok, e = pcall(f, ...)
    if ok then return nil end
    return (tostring(e):gsub("^[^:]*:%d+: ", ""))
  end

  -- "{0,1,...,n-1}", the world's label in messages
  local function world_label()
    local r = {}
    for i = 0, n - 1 do r[#r + 1] = tostring(i) end
    return "{" .. table.concat(r, ",") .. "}"
  end

  -- the group {0, 2} where it exists, else the world's first two ranks (or rank 0)
  local function pair_group_ranks()
    if n >= 3 then return {0, 2} end
    if n == 2 then return {0, 1} end
    return {0}
  end

  describe("ranks: dt.rank(), dt.world_size(), dt.local_rank(), dt.backend(), dt.barrier()", function()
    it("give this rank, the world size, the node-local rank and the backend; barrier returns", function()
      assert.is_true(math.type(rank) == "integer" and rank >= 0 and rank < n)
      assert.is_true(math.type(n) == "integer" and n >= 1)
      assert.is_true(dt.local_rank() >= 0 and dt.local_rank() < n)
      assert.is_true(dt.backend() == "threads" or dt.backend() == "mpi")
      -- every rank sees the same world size and backend, and distinct ranks
      local all = D.all_gather(dt.tensor({rank, n}, {dtype = "int64"}))
      for r = 0, n - 1 do
        assert.are.same({r, n}, all:totable()[r + 1] and {all:totable()[2 * r + 1], all:totable()[2 * r + 2]})
      end
      assert.is_nil(dt.barrier())
      assert.is_nil(D.barrier())
    end)
  end)

  describe("dt.print0(...) prints on rank 0 only", function()
    it("calls print with its arguments on rank 0 and nowhere else", function()
      local seen
      local saved = print
      _G.print = function(...) seen = table.pack(...) end
      local ok, e = pcall(dt.print0, "loss", 1.5, nil)
      _G.print = saved
      assert.is_true(ok, e)
      if rank == 0 then
        assert.are.same({"loss", 1.5, n = 3}, seen)
      else
        assert.is_nil(seen)
      end
    end)
  end)

  describe("all_reduce (sum, avg, max, min, product)", function()
    it("dt.distributed.all_reduce(t, \"sum\", group) is in place and returns the tensor it changed", function()
      local t = dt.full({3}, rank + 1)
      local r = D.all_reduce(t, "sum", nil)
      assert.is_true(rawequal(t, r))
      assert.are.same({n * (n + 1) / 2, n * (n + 1) / 2, n * (n + 1) / 2}, flat(t))
    end)

    it("sum, avg, max, min, product give the reduction over ranks (also D.SUM ... constants)", function()
      local function run(op, dtype)
        return flat(D.all_reduce(dt.tensor({rank + 1, 2}, {dtype = dtype}), op))[1]
      end
      local fact = 1
      for r = 1, n do fact = fact * r end
      for _, dtype in ipairs({"float32", "float64", "int64", "int32"}) do
        assert.are.equal(n * (n + 1) // 2, math.tointeger(run("sum", dtype)))
        assert.are.equal(n, math.tointeger(run("max", dtype)))
        assert.are.equal(1, math.tointeger(run("min", dtype)))
        assert.are.equal(fact, math.tointeger(run("product", dtype)))
      end
      assert.are.equal((n + 1) / 2, run("avg", "float64"))
      assert.are.equal((n + 1) / 2, run(D.AVG, "float32"))
      assert.are.equal(n, run(D.MAX, "int64"))
      assert.are.same({"sum", "avg", "max", "min", "product"}, {D.SUM, D.AVG, D.MAX, D.MIN, D.PRODUCT})
    end)

    it("every dtype, with bool reduced as or (sum, max) and and (product, min)", function()
      for _, dtype in ipairs(ALL) do
        local v = dtype == "bool" and (rank == 0) or 2
        local t = D.all_reduce(dt.tensor({v}, {dtype = dtype}), "sum")
        assert.are.equal(dt.tensor({v}, {dtype = dtype}).dtype, t.dtype)
        if dtype == "bool" then
          assert.are.same({true}, flat(t))
          assert.are.same({n == 1}, flat(D.all_reduce(dt.tensor({rank == 0}), "min")))
        else
          assert.are.equal(2 * n, math.tointeger(flat(t)[1]))
        end
      end
    end)

    it("bf16/f16 reductions accumulate in f32", function()
      -- 256 + 1 + 1 + 1: in bf16 every partial 257 would round back to 256; in f32 the
      -- total is 256 + (n - 1), rounded once
      local exact = {[1] = 256, [2] = 256, [3] = 258, [4] = 260} -- bf16 rounding of 256 + n - 1
      local t = D.all_reduce(dt.tensor({rank == 0 and 256 or 1}, {dtype = "bfloat16"}), "sum")
      local h = D.all_reduce(dt.tensor({rank == 0 and 2048 or 1}, {dtype = "float16"}), "sum")
      if dt.backend() == "threads" then
        assert.are.equal(exact[n], flat(t)[1])
        -- f16: 2048 + 1 + ... (f16 steps by 2 above 2048)
        assert.are.equal(({2048, 2048, 2050, 2052})[n], flat(h)[1])
      else
        -- MPI: the custom MPI_Op adds each pair in f32, but the reduction tree rounds to
        -- bf16/f16 between steps (doc/collectives.md): (256 + 1) + (1 + 1) = 258 on 4 ranks
        assert.is_true(flat(t)[1] >= 256 and flat(t)[1] <= exact[n])
        assert.is_true(flat(h)[1] >= 2048 and flat(h)[1] <= ({2048, 2048, 2050, 2052})[n])
      end
    end)

    it("bad input gives a Lua error naming the op and the values, on every rank", function()
      assert.are.equal("unknown reduce op 'mode' (expected sum, avg, max, min or product)",
        err_of(D.all_reduce, dt.ones(2), "mode"):gsub("^all_reduce: ", ""))
      assert.are.equal("all_reduce: avg needs a floating dtype, got int64",
        err_of(D.all_reduce, dt.ones(2, {dtype = "int64"}), "avg"))
      assert.are.equal("all_reduce: argument #3 must be a group (from dt.distributed.new_group), an options table "
        .. "{group =, async_op =} or nil",
        err_of(D.all_reduce, dt.ones(2), "sum", "world"))
      assert.is_truthy(err_of(D.all_reduce, 7):match("tensor expected, got number"))
      D.barrier() -- the world still works after every rank raised
    end)
  end)

  describe("broadcast(t, src, group)", function()
    it("is in place, returns t, and copies src's values on every dtype", function()
      local src = n - 1
      for _, dtype in ipairs(ALL) do
        local v = dtype == "bool" and (rank == src) or rank + 1
        local t = dt.tensor({v, v}, {dtype = dtype})
        local r = D.broadcast(t, src)
        assert.is_true(rawequal(t, r))
        local want = dtype == "bool" and true or n
        assert.are.same({want, want}, flat(t))
      end
      assert.are.equal("broadcast: src " .. n .. " is not a rank of the group " .. world_label(),
        err_of(D.broadcast, dt.ones(1), n))
      assert.are.equal("broadcast: src -1 is not a rank of the group " .. world_label(), err_of(D.broadcast, dt.ones(1), -1))
    end)
  end)

  describe("all_gather(t, group), all_gather_v (uneven sizes)", function()
    it("all_gather concatenates every rank's tensor along dim 1 in rank order, a new tensor", function()
      local t = dt.tensor({{rank, rank * 10}}, {dtype = "int32"})
      local g = D.all_gather(t)
      assert.is_false(rawequal(t, g))
      assert.are.same({n, 2}, {g.shape[1], g.shape[2]})
      assert.are.equal("int32", g.dtype)
      for r = 0, n - 1 do assert.are.same({r, r * 10}, g:totable()[r + 1]) end
    end)

    it("all_gather, reduce_scatter, all_to_all fill and return the given out tensor itself", function()
      local o = dt.zeros(2 * n)
      assert.is_true(rawequal(o, D.all_gather(dt.ones(2), nil, o)))
      assert.are.equal(2 * n, o:sum():item())
      local s = dt.zeros(2)
      assert.is_true(rawequal(s, D.reduce_scatter(dt.ones(2 * n), "sum", nil, s)))
      assert.are.same({n, n}, flat(s))
      local a = dt.zeros(n)
      assert.is_true(rawequal(a, D.all_to_all(dt.full({n}, 3.0), nil, a)))
      assert.are.equal(3 * n, a:sum():item())
      assert.are.equal("all_gather: out must be a contiguous float32 tensor on cpu of shape {" .. 2 * n .. "}, got int64 {3} on cpu",
        err_of(D.all_gather, dt.ones(2), nil, dt.zeros(3, {dtype = "int64"})))
    end)

    it("all_gather_v takes a different dim-1 size per rank and returns the sizes", function()
      local t = dt.full({rank, 3}, rank, {dtype = "float16"}) -- rank 0 sends no rows
      local g, sizes = D.all_gather_v(t)
      local want_sizes, total = {}, 0
      for r = 0, n - 1 do want_sizes[r + 1] = r; total = total + r end
      assert.are.same(want_sizes, sizes)
      assert.are.same({total, 3}, {g.shape[1], g.shape[2]})
      local rows, i = g:totable(), 1
      for r = 0, n - 1 do
        for _ = 1, r do assert.are.same({r, r, r}, rows[i]); i = i + 1 end
      end
    end)
  end)

  describe("reduce_scatter(t, op, group)", function()
    it("rank r gets block r reduced over ranks", function()
      local vals = {}
      for i = 1, 2 * n do vals[i] = i + rank end
      local out = D.reduce_scatter(dt.tensor(vals, {dtype = "float64"}), "max")
      assert.are.same({2 * rank + 1 + n - 1, 2 * rank + 2 + n - 1}, flat(out))
      local s = D.reduce_scatter(dt.ones(n * 2, 2, {dtype = "bfloat16"}), "sum")
      assert.are.same({2, 2}, {s.shape[1], s.shape[2]})
      assert.are.same({n, n, n, n}, flat(s))
    end)

    it("an indivisible dim 1 is an error naming the sizes", function()
      if n == 1 then return end
      assert.are.equal("reduce_scatter: dim 1 (size " .. (n + 1) .. ") must be divisible by the group size " .. n,
        err_of(D.reduce_scatter, dt.ones(n + 1), "sum"))
    end)
  end)

  describe("all_to_all(t, group), all_to_all_v (uneven sizes)", function()
    it("all_to_all sends block p to rank p; the result holds the received blocks in rank order", function()
      local vals = {}
      for p = 0, n - 1 do vals[p + 1] = rank * 100 + p end
      local out = D.all_to_all(dt.tensor(vals, {dtype = "int64"}))
      local want = {}
      for q = 0, n - 1 do want[q + 1] = q * 100 + rank end
      assert.are.same(want, flat(out))
    end)

    it("all_to_all(t, group, t) works in place (out may share the input's storage)", function()
      local vals = {}
      for p = 0, n - 1 do vals[p + 1] = rank * 100 + p end
      local t = dt.tensor(vals, {dtype = "int64"})
      assert.is_true(rawequal(t, D.all_to_all(t, nil, t)))
      local want = {}
      for q = 0, n - 1 do want[q + 1] = q * 100 + rank end
      assert.are.same(want, flat(t))
    end)

    it("all_to_all_v sends send_splits[p] rows to rank p and returns the recv splits", function()
      local splits, total = {}, 0
      for p = 0, n - 1 do splits[p + 1] = (rank + p) % 3; total = total + splits[p + 1] end
      local rowsv = {}
      for p = 0, n - 1 do for _ = 1, splits[p + 1] do rowsv[#rowsv + 1] = {rank, p} end end
      local t = #rowsv > 0 and dt.tensor(rowsv, {dtype = "int32"}) or dt.zeros(0, 2, {dtype = "int32"})
      local out, recv = D.all_to_all_v(t, splits)
      local want_recv, want_rows = {}, {}
      for q = 0, n - 1 do
        want_recv[q + 1] = (q + rank) % 3
        for _ = 1, want_recv[q + 1] do want_rows[#want_rows + 1] = {q, rank} end
      end
      assert.are.same(want_recv, recv)
      assert.are.equal(#want_rows, out.shape[1])
      if #want_rows > 0 then assert.are.same(want_rows, out:totable()) end
      -- the same with recv_splits given
      local out2 = D.all_to_all_v(t, splits, nil, recv)
      assert.are.same(out:totable(), out2:totable())
    end)

    it("bad splits are errors naming the entry", function()
      local ones = {}
      for p = 1, n do ones[p] = 1 end
      ones[1] = 0.5
      assert.are.equal("all_to_all_v: send_splits[1] must be a non-negative integer, got 0.5",
        err_of(D.all_to_all_v, dt.ones(n), ones))
      local many = {}
      for p = 1, n + 1 do many[p] = 1 end
      assert.are.equal("all_to_all_v: send_splits needs " .. n .. " entries (one per rank), got " .. (n + 1),
        err_of(D.all_to_all_v, dt.ones(n + 1), many))
      local huge = {}
      for p = 1, n do huge[p] = 2 ^ 62 end -- their sum would overflow
      assert.matches("all_to_all_v: send_splits add up to more than dim 1's size " .. n ..
        " (at send_splits[1] = 4611686018427387904)", err_of(D.all_to_all_v, dt.ones(n), huge), 1, true)
      local ok_send = {}
      for p = 1, n do ok_send[p] = 1 end
      assert.matches("all_to_all_v: recv_splits add up to more elements than fit in memory",
        err_of(D.all_to_all_v, dt.ones(n), ok_send, nil, huge), 1, true)
    end)

    it("a recv_splits that disagrees with what a peer sends raises on every rank instead of hanging", function()
      if n == 1 or (dt.backend() == "mpi" and os.getenv("DTLUA_DEBUG") ~= "collectives") then return end
      local splits = {}
      for p = 1, n do splits[p] = 1 end
      local recv = {}
      for p = 1, n do recv[p] = 1 end
      if rank == 0 then recv[2] = 2 end -- rank 0 expects 2 rows from rank 1, which sends 1
      local e = err_of(D.all_to_all_v, dt.ones(n), splits, nil, recv)
      assert.is_truthy(e)
      assert.is_truthy(e:find("(rank 1 sends 1 elements to rank 0, which expects 2)", 1, true), e)
      D.barrier()
    end)
  end)

  describe("scatter, gather, send/recv, barrier", function()
    it("scatter: src passes the full tensor, the others nil; rank r gets block r", function()
      local src = n - 1
      local full = rank == src and dt.arange(2 * n):reshape(n, 2) or nil
      local part = D.scatter(full, src)
      assert.are.same({{2 * rank, 2 * rank + 1}}, part:totable())
    end)

    it("gather: the concatenation on dst, nil elsewhere", function()
      local g = D.gather(dt.tensor({rank, -rank}, {dtype = "int64"}), 0)
      if rank == 0 then
        local want = {}
        for r = 0, n - 1 do want[#want + 1] = r; want[#want + 1] = -r end
        assert.are.same(want, flat(g))
      else
        assert.is_nil(g)
      end
    end)

    it("send/recv pass a tensor to the next rank around a ring; recv is in place", function()
      if n == 1 then return end
      local nxt, prv = (rank + 1) % n, (rank - 1) % n
      local got = dt.zeros(3, {dtype = "float64"})
      if rank % 2 == 0 then
        assert.is_nil(D.send(dt.full({3}, rank, {dtype = "float64"}), nxt))
        assert.is_true(rawequal(got, D.recv(got, prv)))
      else
        D.recv(got, prv)
        D.send(dt.full({3}, rank, {dtype = "float64"}), nxt)
      end
      assert.are.same({prv, prv, prv}, flat(got))
    end)
  end)

  describe("send/recv with different sizes or dtypes", function()
    it("raise on the receiving side (and the sending side under threads) instead of a partial fill", function()
      if n == 1 then return end
      local function pair(send_t, recv_t)
        if rank == 0 then
          local ok, e = pcall(D.send, send_t, 1)
          if dt.backend() == "threads" then return e end
          assert.is_true(ok, e)
        elseif rank == 1 then
          return err_of(D.recv, recv_t, 0)
        end
      end
      local e = pair(dt.ones(3), dt.zeros(4))
      if rank <= 1 and (rank == 1 or dt.backend() == "threads") then
        assert.is_truthy(tostring(e):find("send/recv mismatch: rank 0 sent 3 float32 elements, rank 1 expected 4 float32",
          1, true), e)
      end
      e = pair(dt.ones(2, {dtype = "int32"}), dt.zeros(2))
      if rank == 1 then
        assert.is_truthy(e:find("send/recv mismatch: rank 0 sent 2 int32 elements, rank 1 expected 2 float32", 1, true), e)
      end
      D.barrier()
    end)
  end)

  describe("on any sub-group of ranks: dt.distributed.new_group({0, 2})", function()
    it("runs every collective inside the group only, with group-local results", function()
      local ranks = pair_group_ranks()
      local g = D.new_group(ranks)
      assert.are.same(ranks, g:ranks())
      assert.are.equal(#ranks, g:size())
      local mine
      for i, r in ipairs(ranks) do if r == rank then mine = i - 1 end end
      assert.are.equal(mine or -1, g:rank())
      assert.are.equal(mine or -1, D.get_rank(g))
      assert.are.equal(#ranks, D.get_world_size(g))
      if mine == nil then
        assert.are.equal("all_reduce: rank " .. rank .. " is not a member of group {0,2}",
          err_of(D.all_reduce, dt.ones(1), "sum", g))
        return
      end
      local m, last = #ranks, ranks[#ranks]
      local t = dt.full({2}, rank)
      assert.is_true(rawequal(t, D.all_reduce(t, "sum", g)))
      local sum = 0
      for _, r in ipairs(ranks) do sum = sum + r end
      assert.are.same({sum, sum}, flat(t))
      assert.are.same({last}, flat(D.broadcast(dt.tensor({rank}), last, g)))
      assert.are.same(ranks, flat(D.all_gather(dt.tensor({rank}, {dtype = "int64"}), g)))
      assert.are.same({m}, flat(D.reduce_scatter(dt.ones(m), "sum", g)))
      local a2a = {}
      for p = 1, m do a2a[p] = rank * 10 + p end
      local got = flat(D.all_to_all(dt.tensor(a2a, {dtype = "int64"}), g))
      for q = 1, m do assert.are.equal(ranks[q] * 10 + mine + 1, got[q]) end
      assert.are.same({mine}, flat(D.scatter(rank == ranks[1] and dt.arange(m) or nil, ranks[1], g)))
      local ga = D.gather(dt.tensor({rank}, {dtype = "int64"}), last, g)
      if rank == last then assert.are.same(ranks, flat(ga)) else assert.is_nil(ga) end
      if m > 1 then
        if rank == ranks[1] then D.send(dt.tensor({42.0}), last, g) end
        if rank == last then assert.are.same({42}, flat(D.recv(dt.zeros(1), ranks[1], g))) end
      end
      assert.is_nil(D.barrier(g))
      assert.is_nil(dt.barrier(g))
    end)

    it("are created once and cached: the same set (any order) gives the same group", function()
      local ranks = pair_group_ranks()
      local rev = {}
      for i = #ranks, 1, -1 do rev[#rev + 1] = ranks[i] end
      local a, b = D.new_group(ranks), D.new_group(rev)
      assert.are.equal(tostring(a), tostring(b))
      assert.are.same(a:ranks(), b:ranks())
      if a:rank() >= 0 then -- both handles reach the same communicator: interleaving works
        local t = D.all_reduce(dt.ones(1), "sum", a)
        D.all_reduce(t, "sum", b)
        assert.are.same({#ranks * #ranks}, flat(t))
      end
    end)

    it("bad groups are errors naming the ranks", function()
      assert.are.equal("new_group: rank " .. n .. " out of range for a world of " .. n .. " ranks",
        err_of(D.new_group, {0, n}))
      assert.are.equal("new_group: rank 0 listed twice", err_of(D.new_group, {0, 0}))
      assert.are.equal("new_group: ranks must be integers (0-based world ranks)", err_of(D.new_group, {0.5}))
    end)
  end)

  describe("collective mismatch detection", function()
    it("ranks entering different collectives raise on every rank, naming both calls and the ranks", function()
      if n == 1 or (dt.backend() == "mpi" and os.getenv("DTLUA_DEBUG") ~= "collectives") then return end
      local label = world_label()
      local e = err_of(function()
        if rank == 0 then D.all_reduce(dt.ones(4), "sum") else D.broadcast(dt.ones(4), 0) end
      end)
      assert.are.equal("collective mismatch in group " .. label .. ": rank 0 called all_reduce(sum, float32, 4 elements), " ..
        "rank 1 called broadcast(float32, 4 elements, src 0)", e)
      -- the same collective with a different size, dtype or op
      e = err_of(D.all_reduce, dt.ones(rank == 1 and 5 or 4), "sum")
      assert.are.equal("collective mismatch in group " .. label .. ": rank 0 called all_reduce(sum, float32, 4 elements), " ..
        "rank 1 called all_reduce(sum, float32, 5 elements)", e)
      e = err_of(D.all_reduce, dt.ones(4, {dtype = rank == 1 and "float64" or "float32"}), "sum")
      assert.is_truthy(e:find("rank 1 called all_reduce(sum, float64, 4 elements)", 1, true), e)
      e = err_of(D.all_reduce, dt.ones(4), rank == 1 and "max" or "sum")
      assert.is_truthy(e:find("rank 1 called all_reduce(max, float32, 4 elements)", 1, true), e)
      -- and the world is still usable afterwards
      assert.are.same({n}, flat(D.all_reduce(dt.ones(1))))
    end)
  end)
end

describe("argument checks failing on some ranks only", function()
  -- every rank raises the failed rank's message (naming the rank and the value), and the
  -- ranks go on together; on one rank the message is the plain check's
  local last = n - 1
  local function agreed(msg, ok, err)
    assert.is_false(ok)
    assert.matches(msg, err, 1, true)
    if n > 1 then assert.matches("(rank " .. last .. "'s argument; every rank of group", err, 1, true) end
  end
  local cases = {
    {"all_reduce: unknown reduce op 'bogus'", function()
      return D.all_reduce(dt.ones(2), rank == last and "bogus" or "sum") end},
    {"broadcast: src 99 is not a rank of the group", function()
      return D.broadcast(dt.ones(2), rank == last and 99 or 0) end},
    {"bad argument #1 to 'gather'", function() return D.gather(rank == last and {1} or dt.ones(2), 0) end},
    {"all_gather: out must be a contiguous float32 tensor on cpu", function()
      return D.all_gather(dt.ones(2), nil, rank == last and dt.zeros(3) or nil) end},
    {"reduce_scatter: dim 1 (size " .. n + 1 .. ") must be divisible by the group size", function()
      return D.reduce_scatter(dt.ones(rank == last and n + 1 or 2 * n), "sum") end},
    {"all_to_all: dim 1 (size " .. n + 1 .. ") must be divisible by the group size", function()
      return D.all_to_all(dt.ones(rank == last and n + 1 or 2 * n)) end},
    {"all_to_all_v: send_splits needs", function()
      local splits = {}
      for i = 1, (rank == last and n + 1 or n) do splits[i] = 1 end
      return D.all_to_all_v(dt.ones(n), splits) end},
    {"all_gather_v: needs a tensor of at least 1 dim", function()
      return D.all_gather_v(rank == last and dt.tensor(1) or dt.ones(2)) end},
  }
  for _, case in ipairs(cases) do
    it(case[1]:match("^[%w_]+") .. ": " .. case[1], function()
      if n == 1 then return end -- the check fails on the only rank: plain error (other specs)
      agreed(case[1], pcall(case[2]))
      local t = dt.full({2}, 1)
      D.all_reduce(t) -- the ranks went on together
      assert.are.same({n, n}, t:totable())
    end)
  end
end)
