-- The batch-dim analysis of traced programs (lua/dtensor/parallel/batch_dims.lua, used by
-- dt.parallel.data_parallel): the dim maps of view ops on random shapes, reductions,
-- matmul, joins, and the errors that name the op and the Lua line; the trace itself
-- (dt._trace) records what dt.compile would refuse.
local BD = require "dtensor.parallel.batch_dims"
local prng = require("tests.spec.support.spec_helpers").prng

-- the analysis of fn(x) with x batched in dim d (1-based); returns the state of its result
local function result_dim(fn, x, d)
  local out = table.pack(dt._trace(fn, x))
  local tr = out[1]
  tr.arg_shapes = {x:size()}
  local an = BD.analyse(tr, {d - 1})
  local s = an.state[tr.returns[1]]
  if math.type(s) == "integer" then return s + 1 end
  return s
end

local function analysis_error(fn, x, d)
  local ok, err = pcall(result_dim, fn, x, d)
  assert.is_false(ok, "expected an analysis error")
  return err
end

describe("batch-dim analysis", function()
  it("maps the batch dim through transpose and permute on random shapes", function()
    local g = prng(7)
    for _ = 1, 30 do
      local nd = g.int(2, 4)
      local shape = {}
      for i = 1, nd do shape[i] = g.int(1, 4) end
      local d = g.int(1, nd)
      local a, b = g.int(1, nd), g.int(1, nd)
      local want = d == a and b or d == b and a or d
      assert.are.equal(want, result_dim(function(x) return x:transpose(a, b) end, dt.randn(table.unpack(shape)), d))
      local order = {}
      for i = 1, nd do order[i] = i end
      for i = nd, 2, -1 do local j = g.int(1, i); order[i], order[j] = order[j], order[i] end
      local pos
      for i, k in ipairs(order) do if k == d then pos = i end end
      assert.are.equal(pos, result_dim(function(x) return x:permute(table.unpack(order)) end, dt.randn(table.unpack(shape)), d))
    end
  end)

  it("maps it through reshape, flatten, squeeze, unsqueeze and expand", function()
    local x = dt.randn(6, 4, 5)
    assert.are.equal(1, result_dim(function(t) return t:reshape(6, 20) end, x, 1)) -- merged with the dims after it
    assert.are.equal(1, result_dim(function(t) return t:reshape(2, 3, 20) end, x, 1)) -- split: the outer part
    assert.are.equal(2, result_dim(function(t) return t:reshape(6, 4, 5, 1):flatten(3) end, x, 2))
    assert.are.equal(3, result_dim(function(t) return t:unsqueeze(1):unsqueeze(1) end, x, 1))
    assert.are.equal(2, result_dim(function(t) return t:unsqueeze(2):squeeze(2) end, x, 2))
    assert.are.equal(2, result_dim(function(t) return t:unsqueeze(1):expand(3, 6, 4, 5) end, x, 1))
    assert.are.equal(1, result_dim(function(t) return t:view(6, 4, 5):contiguous() end, x, 1))
    local err = analysis_error(function(t) return t:reshape(24, 5) end, x, 2)
    assert.is_truthy(err:find("data_parallel: reshape at .*batch_dims_spec.lua:%d+: the batch %(dim 2 of {6,4,5}%) is merged with the dims before it"), err)
    err = analysis_error(function(t) return t:select(1, 2) end, x, 1)
    assert.is_truthy(err:find("select at .*: it selects one sample of the batch dim"), err)
    err = analysis_error(function(t) return t:narrow(1, 1, 2) end, x, 1)
    assert.is_truthy(err:find("narrow at .*: it works along the batch dim %(dim 1%)"), err)
  end)

  it("gives partial for reductions over the batch and shifts the dim for others", function()
    local x = dt.randn(3, 4, 5)
    assert.are.equal(BD.PARTIAL, result_dim(function(t) return t:mean() end, x, 2))
    assert.are.equal(BD.PARTIAL, result_dim(function(t) return t:sum(2) end, x, 2))
    assert.are.equal(BD.PARTIAL, result_dim(function(t) return t:amax(2, true) end, x, 2))
    assert.are.equal(1, result_dim(function(t) return t:sum(1) end, x, 2))
    assert.are.equal(2, result_dim(function(t) return t:sum(1, true) end, x, 2))
    assert.are.equal(2, result_dim(function(t) return t:softmax(3) end, x, 2))
    -- a partial through linear ops stays partial; a nonlinear op sums it first
    assert.are.equal(BD.PARTIAL, result_dim(function(t) return t:sum(2):mul(3):neg() end, x, 2))
    assert.is_nil(result_dim(function(t) return t:sum(2):exp() end, x, 2))
    assert.is_nil(result_dim(function(t) return t:sum() / t:sum() end, x, 1))
  end)

  it("follows matmul, cat, stack and embedding", function()
    local w = dt.randn(4, 2)
    local x = dt.randn(5, 4)
    assert.are.equal(1, result_dim(function(t) return t:matmul(w) end, x, 1))
    assert.are.equal(BD.PARTIAL, result_dim(function(t) return t:t():matmul(t) end, x, 1))
    assert.are.equal(2, result_dim(function(t) return w:t():matmul(t:t()) end, x, 1))
    local err = analysis_error(function(t) return t:matmul(t:t()) end, x, 1)
    assert.is_truthy(err:find("matmul at .*: its operands put the batch in different dims of the result %(batch dim 1 and batch dim 2%)"), err)
    assert.are.equal(1, result_dim(function(t) return dt.cat({t, t * 2}, 2) end, x, 1))
    assert.are.equal(2, result_dim(function(t) return dt.stack({t, t}, 1) end, x, 1))
    err = analysis_error(function(t) return dt.cat({t, t}, 1) end, x, 1)
    assert.is_truthy(err:find("cat at .*: it concatenates along the batch dim"), err)
    local e = dt.nn.Embedding(9, 3)
    assert.are.equal(1, result_dim(function(ids) return e(ids) end, dt.tensor({{1, 2}, {3, 4}, {5, 6}}, {dtype = "int64"}), 1))
  end)

  it("records in a trace what dt.compile refuses", function()
    local x = dt.randn(4, 3)
    local out = table.pack(dt._trace(function(t)
      local s = t:sum()
      if s:item() > 1e9 then return t end -- a value read into Lua: recorded as it ran
      return s, 5
    end, x))
    local tr = out[1]
    assert.are.equal(5, out[3])
    assert.are.equal(x:sum():item(), out[2]:item())
    assert.are.equal(1, tr.nargs)
    assert.are.equal("sum", tr.nodes[1].name)
    assert.is_truthy(tr.nodes[1].where:find("batch_dims_spec.lua:%d+$"))
    assert.are.same({}, tr.nodes[1].shapes[1])
    assert.are.same({0}, tr.nodes[1].ins)
    assert.are.equal(-1, tr.returns[2])
    -- inside dt.compile the trace is refused; dt.compile still refuses item()
    local f = dt.compile(function(t) return dt._trace(function(u) return u end, t) end)
    assert.has_error(function() f(x) end, "trace: a graph is already being recorded on this rank (inside dt.compile?)")
    local c = dt.compile(function(t) return t:sum():item() end)
    local ok, err = pcall(c, x)
    assert.is_false(ok)
    assert.is_truthy(err:find("compile: t:item%(%)"))
    assert.has_error(function() dt._trace(5) end, "trace: expected a function, got number")
  end)
end)
