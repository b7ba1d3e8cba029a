-- Acceptance of issue 3 (ranks and collectives), SPMD half: every rank runs this file
-- (dtlua -n 1..4, mpirun -np 2/4); a test passes only if it passes on every rank.  Each
-- `it` is named after the issue's wording.  The launcher, REPL and failure items that
-- need subprocesses are in tests/spec/acceptance_issue3_spec.lua.
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

-- the group {0, 2} of the issue where it exists, else the world's first two ranks (or rank 0)
local function issue_group_ranks()
  if n >= 3 then return {0, 2} end
  if n == 2 then return {0, 1} end
  return {0}
end

describe("issue 3: Both: dt.rank(), dt.world_size(), dt.local_rank(), dt.backend(), dt.barrier()", function()
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

describe("issue 3: dt.print0(...) prints on rank 0 only", function()
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

describe("issue 3: all_reduce (sum, avg, max, min, product)", function()
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
    assert.are.equal("all_reduce: argument #3 must be a group (from dt.distributed.new_group) or nil",
      err_of(D.all_reduce, dt.ones(2), "sum", "world"))
    assert.is_truthy(err_of(D.all_reduce, 7):match("tensor expected, got number"))
    D.barrier() -- the world still works after every rank raised
  end)
end)

describe("issue 3: broadcast(t, src, group)", function()
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

describe("issue 3: all_gather(t, group), all_gather_v (uneven sizes)", function()
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
    assert.are.equal("all_gather: out must be a contiguous float32 CPU tensor of shape {" .. 2 * n .. "}, got int64 {3}",
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

describe("issue 3: reduce_scatter(t, op, group)", function()
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

describe("issue 3: all_to_all(t, group), all_to_all_v (uneven sizes)", function()
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

describe("issue 3: scatter, gather, send/recv, barrier", function()
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

describe("issue 3: send/recv with different sizes or dtypes", function()
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

describe("issue 3: on any sub-group of ranks: dt.distributed.new_group({0, 2})", function()
  it("runs every collective inside the group only, with group-local results", function()
    local ranks = issue_group_ranks()
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
    local ranks = issue_group_ranks()
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

describe("issue 3: collective mismatch detection", function()
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
