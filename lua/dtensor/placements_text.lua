-- A list of placements as messages and explain output show it: "(Shard(1), Replicate())".
-- Shared by the dispatcher's explain text and the parallel styles' errors.
return function(placements)
  local s = {}
  for m, p in ipairs(placements) do s[m] = tostring(p) end
  return "(" .. table.concat(s, ", ") .. ")"
end
