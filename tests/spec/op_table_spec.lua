-- The operator table walked row by row (in the spirit of ggml's test-backend-ops): for every
-- row of src/ops/op_list.h (dt._op_rows()), the CPU kernel against a plain-Lua float64
-- reference on random shapes, 0-size and non-contiguous inputs included.  The cases are the
-- table in tests/spec/support/op_cases.lua (one entry per op); a row without one fails here.
-- Prints the coverage at the end (op x device; a "grad" column joins with autograd).  The cuda
-- column is the CUDA kernel list (src/kernels/cuda/kernel_list.h), checked against the explicit
-- gap in tests/spec/support/cuda_missing.lua; tests/gpu runs the cases on a GPU.
local C = require "tests.spec.support.op_cases"
local G = require "tests.spec.support.grad_check"
local rows = dt._op_rows()
local devices = {"cpu"} -- a column per device with a kernel table
local coverage, grad_coverage = {}, {}

local function flags(row)
  local f = {}
  for _, k in ipairs {"view", "inplace", "factory", "random"} do if row[k] then f[#f + 1] = k end end
  return table.concat(f, ",")
end

describe("operator table, every row on one device", function()
  it("every row has a case, and every case a row", function() C.assert_complete() end)

  for idx, row in ipairs(rows) do
    local e = C.ops[row.name]
    if e then
      it(row.name .. ": the cpu kernel against the reference", function()
        local cases = e.cases(C.prng(1000 + idx))
        assert.is_true(#cases > 0, row.name .. ": no cases")
        for k, c in ipairs(cases) do
          local what = row.name .. " case " .. k .. " (" .. c.label .. ")"
          if e.random then dt.manual_seed(1234 + k) end
          local out = table.pack(e.run(c.inputs, c.static))
          assert.are.equal(row.nout, out.n, what .. ": number of results")
          if e.random then -- the same generator position gives the same draw, bit for bit
            dt.manual_seed(1234 + k)
            local again = table.pack(e.run(c.inputs, c.static))
            for j = 1, row.nout do
              assert.is_true(again[j].dtype == out[j].dtype and dt.equal(again[j], out[j]), what .. ": reproducible")
            end
          end
          if e.check then
            e.check(row.nout > 1 and out or out[1], c.inputs, c.static)
          else
            local want = e.ref(c.inputs, c.static)
            if row.nout == 1 then want = {want} end
            for j = 1, row.nout do C.check_ref(out[j], want[j], C.tol(e, out[j].dtype), what .. " result " .. j) end
          end
          if e.check_extra then e.check_extra(out[1]) end
        end
        coverage[row.name] = #cases
      end)
    end
  end

  -- the "grad" column: every row with a backward rule against finite differences; a row
  -- without one says why (nondiff in its entry)
  for idx, row in ipairs(rows) do
    local e = C.ops[row.name]
    if e and row.differentiable then
      it(row.name .. ": the gradient against finite differences", function()
        local rng = C.prng(5000 + idx)
        local cases = G.cases(e, rng)
        assert.is_true(#cases > 0, row.name .. ": no case for the gradient check")
        local n = 0
        for k, c in ipairs(cases) do
          n = n + G.check_case(e, row, c, rng, row.name .. " grad case " .. k .. " (" .. c.label .. ")")
        end
        assert.is_true(n > 0, row.name .. ": no floating input was differentiated")
        grad_coverage[row.name] = n
      end)
    elseif e then
      it(row.name .. ": has no gradient, and its case says why", function()
        assert.are.equal("string", type(e.nondiff),
          row.name .. ": a row whose backward column is `none` needs nondiff = \"why\" in op_cases.lua " ..
          "(or a backward rule)")
        grad_coverage[row.name] = "n/a"
      end)
    end
  end

  -- rows flagged inplace return their self tensor (the same Lua value, as torch returns self)
  local inplace_calls = {
    copy_ = function(x) return x:copy_(dt.ones(3)) end, fill_ = function(x) return x:fill_(2) end,
    zero_ = function(x) return x:zero_() end, add_ = function(x) return x:add_(1) end,
    mul_ = function(x) return x:mul_(2) end, uniform_ = function(x) return x:uniform_(0, 1) end,
    normal_ = function(x) return x:normal_(0, 1) end,
    masked_fill_ = function(x) return x:masked_fill_(x:ge(0), 1) end,
    index_put_ = function(x) -- t[k] = v is a statement: the write lands in x itself
      x[1] = dt.ones(3)
      assert(x:select(1, 1):equal(dt.ones(3)), "t[k] = v wrote into another tensor")
      return x
    end,
  }
  -- in-place rows without a backward rule: the optimizer's updates, which run under no_grad;
  -- with grad mode on, autograd refuses them on a tensor that requires grad
  local update_calls = {
    adam_step_ = function(x)
      local z = dt.zeros(2, 3)
      return dt._adam_step_(x, dt.ones(2, 3), z, z:clone(), nil, 0.1, 1, 0.9, 0.999, 1e-8, 1, true, false)
    end,
  }
  for _, row in ipairs(rows) do
    if row.inplace and update_calls[row.name] then
      it(row.name .. " returns self, and is refused on a tensor that requires grad", function()
        assert(not row.differentiable, row.name .. ": an optimizer update with a backward rule")
        local x = dt.zeros(2, 3)
        assert.are.equal(x, update_calls[row.name](x))
        assert.is_false(x:equal(dt.zeros(2, 3)), row.name .. ": nothing was written")
        local ok, err = pcall(update_calls[row.name], dt.zeros(2, 3):requires_grad_())
        assert(not ok and tostring(err):find(row.name, 1, true), row.name .. ": expected a refusal naming the op, got " .. tostring(err))
      end)
    elseif row.inplace then
      it(row.name .. " returns self, and has a backward rule", function()
        assert(inplace_calls[row.name], row.name .. ": an in-place row without a call in op_table_spec.lua")
        -- without one, autograd refuses the op on a tensor that requires grad (its history would lie)
        assert(row.differentiable, row.name .. ": an in-place row without a backward rule")
        local x = dt.zeros(2, 3)
        assert.are.equal(x, inplace_calls[row.name](x))
      end)
    end
  end

  it("the CUDA column: the rows without a CUDA kernel are exactly tests/spec/support/cuda_missing.lua", function()
    local missing, listed = {}, {}
    for _, name in ipairs(require "tests.spec.support.cuda_missing") do listed[name] = true end
    for _, row in ipairs(rows) do
      if not row.cuda then
        missing[#missing + 1] = row.name
        assert.is_true(listed[row.name] == true, row.name .. " has no CUDA kernel: list it in cuda_missing.lua")
      else
        assert.is_nil(listed[row.name], row.name .. " has a CUDA kernel now: delete it from cuda_missing.lua")
      end
      listed[row.name] = nil
    end
    assert.is_nil(next(listed), "cuda_missing.lua names a row the table does not have: " .. tostring(next(listed)))
    local n = #rows - #missing
    io.write(string.format("\ncuda coverage: %d of %d rows have a CUDA kernel (%d listed missing)%s\n", n, #rows, #missing,
                           dt.cuda.is_built() and "" or "; this build has no CUDA"))
  end)

  it("prints the coverage: op x device, and grad (inputs differentiated, n/a: no gradient)", function()
    local lines = {string.format("%-30s %-16s %6s %6s %5s", "op (src/ops/op_list.h)", "flags", devices[1], "grad", "cuda")}
    local n, ng = 0, 0
    for _, row in ipairs(rows) do
      local c = coverage[row.name]
      if c then n = n + 1 end
      local g = grad_coverage[row.name]
      if g then ng = ng + 1 end
      lines[#lines + 1] = string.format("%-30s %-16s %6s %6s %5s", row.name, flags(row), c and tostring(c) or "NONE",
                                        g and tostring(g) or "NONE", row.cuda and "yes" or "-")
    end
    lines[#lines + 1] = string.format("op table coverage: %d of %d rows on cpu, %d of %d with a passing grad check or a reason",
                                      n, #rows, ng, #rows)
    io.write("\n", table.concat(lines, "\n"), "\n")
    assert.are.equal(#rows, n, "rows without a passing case")
    assert.are.equal(#rows, ng, "rows without a passing gradient check (or a nondiff reason)")
  end)
end)
