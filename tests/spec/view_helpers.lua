-- Helpers shared by the view/join/factory/compare specs (not a spec itself):
--   local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "view_helpers.lua")
local h = {}

-- 1..n (row-major position, 1-based) as a tensor of the given shape.
function h.seq(shape, dtype)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local flat = {}
  for i = 1, n do flat[i] = i end
  return dt.tensor(flat, dtype and {dtype = dtype}):view(shape)
end

-- The message of the error f(...) raises; fails the test when it raises none.
-- (This file runs outside busted's spec environment, hence error() and not assert.)
function h.err(f, ...)
  local ok, e = pcall(f, ...)
  if ok then error("expected an error, got none", 2) end
  return e
end

return h
