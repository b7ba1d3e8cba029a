-- Helpers shared by the pointwise specs (not a spec itself: the runner matches *_spec).
local assert = require "luassert" -- dofile runs in _G, outside busted's spec environment
local H = {}

-- relative tolerance per dtype; integers and bool compare exactly
H.TOL = {float32 = 2e-6, float64 = 1e-12, bfloat16 = 1e-2, float16 = 2e-3}

-- the elements of t in row-major order
function H.flat(t)
  local out = {}
  local function walk(v) if type(v) == "table" then for _, x in ipairs(v) do walk(x) end else out[#out + 1] = v end end
  walk(t:totable())
  return out
end

-- expected (plain Lua numbers/booleans) against got, within the dtype's tolerance
function H.close(expected, got, dtype, what)
  what = what or ""
  assert.are.equal(#expected, #got, what)
  local tol = H.TOL[dtype] or 0
  for i = 1, #expected do
    local e, g = expected[i], got[i]
    if type(e) == "boolean" or type(g) == "boolean" then
      assert.are.equal(e, g, what)
    elseif e ~= e then
      assert.is_true(g ~= g, what .. " element " .. i .. " should be nan")
    elseif e == math.huge or e == -math.huge then
      assert.are.equal(e, g, what)
    else
      local err = math.abs(e - g) / math.max(1, math.abs(e))
      assert.is_true(err <= tol, string.format("%s element %d: expected %.17g got %.17g (%s)", what, i, e, g, dtype))
    end
  end
end

return H
