-- Every row with a CUDA kernel (src/kernels/cuda/kernel_list.h), on "cuda", against the same case
-- on the CPU: the op-table cases (tests/spec/support/op_cases.lua) with their inputs moved to the
-- device (a non-contiguous input stays non-contiguous there).  Exact for data movement, fills,
-- comparisons, integer results and the random rows (the same generator bits); within the
-- case's tolerance (float32: 1e-5 relative, looser for half dtypes) for arithmetic.  Run by
-- tests/gpu/run.sh; without a device it skips with one line.
local C = require "tests.spec.support.op_cases"

local function to_cuda(x)
  if not dt.is_tensor(x) then return x end
  if x:is_contiguous() or x:dim() < 2 then return x:contiguous():cuda() end
  -- keep the layout: the transpose of a contiguous device tensor is what noncontig() makes
  return x:transpose(1, 2):contiguous():cuda():transpose(1, 2)
end

local function moved(inputs)
  local out = {}
  for k, v in pairs(inputs) do out[k] = type(v) == "table" and not dt.is_tensor(v) and moved(v) or to_cuda(v) end
  return out
end

local FLOAT = {float32 = true, float64 = true, bfloat16 = true, float16 = true}
local function exact(row, e, dtype) return row.view or row.random or e.family == "view" or not FLOAT[dtype] end

local function tol(e, dtype)
  if dtype == "bfloat16" then return 2e-2 elseif dtype == "float16" then return 2e-3 end
  return math.max(C.tol(e, dtype), dtype == "float32" and 1e-5 or 1e-10)
end

describe("every CUDA row against the CPU", function()
  if not dt.cuda.is_available() then
    it("skips: no CUDA device", function() io.write("\nops_gpu_spec: no CUDA device: skipped\n") end)
    return
  end
  local checked = 0
  for idx, row in ipairs(dt._op_rows()) do
    local e = C.ops[row.name]
    if row.cuda and e then
      it(row.name .. ": cuda matches cpu", function()
        for k, c in ipairs(e.cases(C.prng(1000 + idx))) do
          local what = row.name .. " case " .. k .. " (" .. c.label .. ")"
          local gin = moved(c.inputs) -- before the CPU run: in-place rows write their inputs
          if e.random then dt.manual_seed(1234 + k) end
          local want = table.pack(e.run(c.inputs, c.static))
          if e.random then dt.manual_seed(1234 + k) end
          local got = table.pack(e.run(gin, c.static))
          assert.are.equal(want.n, got.n, what .. ": number of results")
          for j = 1, want.n do
            assert.are.equal("cuda", got[j].device, what .. ": result " .. j .. " on cuda")
            local g, w = got[j]:cpu(), want[j]
            assert.are.equal(w.dtype, g.dtype, what .. ": dtype")
            assert.are.same(w:size(), g:size(), what .. ": shape")
            if exact(row, e, w.dtype) then
              assert.is_true(dt.equal(g, w) or dt.allclose(g, w, 0, 0, true), what .. ": exactly the CPU's values")
            else
              local t = tol(e, w.dtype)
              assert.is_true(dt.allclose(g:double(), w:double(), t, t, true), what .. ": within " .. t)
            end
          end
        end
        checked = checked + 1
      end)
    end
  end
  it("reports how many rows ran", function() io.write(string.format("\nops_gpu_spec: %d CUDA rows matched the CPU\n", checked)) end)
end)
