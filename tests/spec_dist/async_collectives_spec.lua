-- SPMD specs of the async collectives ({async_op = true} returns a Work): the same values as
-- the blocking calls, bitwise, in every dtype, on the world and a sub-group; several works
-- outstanding at once, waited in any order and mixed with blocking calls; errors.
local D = dt.distributed
local rank, n = dt.rank(), dt.world_size()
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local ALL = {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"}

-- A random 2-d tensor of rows x cols in dtype, different on every rank (exact in every dtype).
local function data(rows, cols, dtype, salt)
  dt.manual_seed(1000 * rank + salt)
  local t = dt.randint(0, 40, {rows, cols})
  if dtype == "bool" then return t:remainder(2):to("bool") end
  return t:to(dtype)
end

local function bits(t) return t:to("float64"):totable() end -- every value of every dtype, exactly

local function member(spec)
  if not spec.ranks then return true end
  for _, r in ipairs(spec.ranks) do if r == rank then return true end end
  return false
end

describe("async collectives give the blocking calls' results, bitwise", function()
  for _, spec in ipairs(H.groups()) do
    it("all_reduce, broadcast, all_gather(_v), reduce_scatter, all_to_all(_v) on " .. spec.name, function()
      if not member(spec) then return end
      local g = spec.group
      local opts = {group = g, async_op = true}
      local m = g and g:size() or n
      local me = g and g:rank() or rank
      for i, dtype in ipairs(ALL) do
        local rows = 1 + (i + rank) % 3 -- uneven across ranks for the _v forms
        local x = data(2 * m, 3, dtype, i)
        local ops = dtype == "bool" and {"sum", "max"} or {"sum", "max", "min"}
        if dtype:match("^float") or dtype == "bfloat16" then ops[#ops + 1] = "avg" end
        for _, op in ipairs(ops) do
          local a = x:clone()
          local w = D.all_reduce(a, op, opts)
          local b = D.all_reduce(x:clone(), op, g)
          assert.are.equal(a, w:wait(), "in place: wait returns the tensor")
          assert.are.same(bits(b), bits(a), dtype .. " " .. op)
          local rs = D.reduce_scatter(x, op, opts):wait()
          assert.are.same(bits(D.reduce_scatter(x, op, g)), bits(rs), dtype .. " reduce_scatter " .. op)
        end
        local src = g and spec.ranks[#spec.ranks] or n - 1
        local a = x:clone()
        D.broadcast(a, src, opts):wait()
        assert.are.same(bits(D.broadcast(x:clone(), src, g)), bits(a), dtype .. " broadcast")
        assert.are.same(bits(D.all_gather(x, g)), bits(D.all_gather(x, opts):wait()), dtype .. " all_gather")
        local xv = data(rows, 2, dtype, 50 + i)
        local gv, sizes = D.all_gather_v(xv, opts):wait()
        local bv, bsizes = D.all_gather_v(xv, g)
        assert.are.same(bsizes, sizes)
        assert.are.same(bits(bv), bits(gv), dtype .. " all_gather_v")
        assert.are.same(bits(D.all_to_all(x, g)), bits(D.all_to_all(x, opts):wait()), dtype .. " all_to_all")
        local splits, recv, total = {}, {}, 0
        for p = 0, m - 1 do
          splits[p + 1] = (p + me) % 3
          recv[p + 1] = (me + p) % 3 -- what member p sends me: (me + p) % 3
          total = total + splits[p + 1]
        end
        local xs = data(total, 2, dtype, 90 + i)
        local got, rsplits = D.all_to_all_v(xs, splits, opts):wait()
        local want, wsplits = D.all_to_all_v(xs, splits, g)
        assert.are.same(wsplits, rsplits)
        assert.are.same(recv, rsplits)
        assert.are.same(bits(want), bits(got), dtype .. " all_to_all_v")
        local got2 = D.all_to_all_v(xs, splits, {group = g, async_op = true}, recv):wait()
        assert.are.same(bits(want), bits(got2), dtype .. " all_to_all_v with recv_splits")
      end
    end)
  end

  it("all_reduce on a strided view writes through it at wait", function()
    local base = data(3, 4, "float64", 7)
    local view = base:t()
    local want = D.all_reduce(base:t():contiguous(), "sum")
    local w = D.all_reduce(view, "sum", {async_op = true})
    assert.are.equal(view, w:wait())
    assert.are.same(want:totable(), view:totable())
    assert.are.same(want:t():totable(), base:totable())
  end)

  it("fills and returns the given out tensor itself", function()
    local x = data(2 * n, 2, "float32", 3)
    local out = dt.empty(2 * n * n, 2)
    assert.are.equal(out, D.all_gather(x, {async_op = true}, out):wait())
    assert.are.same(bits(D.all_gather(x)), bits(out))
  end)
end)

describe("several outstanding works", function()
  it("complete in issue order and may be waited in any order, mixed with blocking calls", function()
    local xs, works, wants = {}, {}, {}
    for k = 1, 6 do
      xs[k] = data(n, 5, "float64", 200 + k)
      wants[k] = D.all_reduce(xs[k]:clone(), "sum")
    end
    local gathered = D.all_gather(xs[1])
    for k = 1, 6 do works[k] = D.all_reduce(xs[k], "sum", {async_op = true}) end
    local gw = D.all_gather(xs[1], {async_op = true}) -- reads xs[1] after works[1] summed it
    local mid = D.all_reduce(dt.full({2}, rank + 1), "sum") -- blocking: after the six
    assert.are.same({n * (n + 1) / 2, n * (n + 1) / 2}, mid:totable())
    for _, k in ipairs({5, 2, 6, 1, 4, 3}) do
      works[k]:wait()
      assert.is_true(works[k]:is_completed())
      assert.are.same(wants[k]:totable(), xs[k]:totable(), "work " .. k)
    end
    -- issued after works[1] on every rank: every rank's xs[1] is already the sum
    local want_g = D.all_gather(wants[1])
    assert.are.same(want_g:totable(), gw:wait():totable())
    if n > 1 then assert.are_not.same(gathered:totable(), want_g:totable()) end
  end)

  it("across groups: works on the world and on sub-groups", function()
    if n < 2 then return end
    local pair = D.new_group({0, 1})
    local x, y = dt.full({3}, rank + 1), dt.full({3}, 10 * (rank + 1))
    local wx = D.all_reduce(x, "sum", {async_op = true})
    local wy = rank <= 1 and D.all_reduce(y, "max", {group = pair, async_op = true}) or nil
    if wy then assert.are.same({20, 20, 20}, wy:wait():totable()) end
    assert.are.same({n * (n + 1) / 2, n * (n + 1) / 2, n * (n + 1) / 2}, wx:wait():totable())
  end)

  it("dt.comm_debug counts an async call once, when it is issued", function()
    local w
    local c = dt.comm_debug(function() w = D.all_reduce(dt.ones(4), "sum", {async_op = true}) end)
    assert.are.equal(1, c.all_reduce)
    assert.are.equal(16, c.bytes)
    assert.are.same({n, n, n, n}, w:wait():totable())
  end)
end)

describe("async errors", function()
  it("waiting twice is an error naming the op", function()
    local w = D.all_gather(dt.ones(2), {async_op = true})
    w:wait()
    local ok, err = pcall(w.wait, w)
    assert.is_false(ok)
    assert.is_truthy(err:match("wait: this all_gather work was already waited"))
  end)

  it("a mismatch between ranks is raised by wait on every rank, naming both calls", function()
    if n < 2 then return end
    local w = D.all_reduce(dt.ones(rank == 0 and 3 or 4), "sum", {async_op = true})
    local ok, err = pcall(w.wait, w)
    assert.is_false(ok)
    assert.is_truthy(err:match("collective mismatch in group {0,[%d,]+}: rank 0 called all_reduce%(sum, float32, 3 " ..
                               "elements%), rank %d called all_reduce%(sum, float32, 4 elements%)"), err)
    D.barrier() -- the world still works
  end)

  it("bad arguments raise at issue, on every rank", function()
    local ok, err = pcall(D.all_reduce, dt.ones(2, {dtype = "int64"}), "avg", {async_op = true})
    assert.is_false(ok)
    assert.is_truthy(err:match("all_reduce: avg needs a floating dtype, got int64"), err)
    ok, err = pcall(D.all_reduce, dt.ones(2), "sum", {group = "world", async_op = true})
    assert.is_false(ok)
    assert.is_truthy(err:match("argument #3 must be a group"), err)
  end)
end)
