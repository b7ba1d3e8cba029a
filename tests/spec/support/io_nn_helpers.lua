-- Helpers shared by io_spec.lua, nn_spec.lua and random_spec.lua.
local assert = require "luassert"
local M = {}

-- Asserts that f(...) raises an error containing `text` (plain substring).
function M.fails(text, f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok)
  assert.matches(text, tostring(err), 1, true)
end

return M
