-- The geometry a checkpoint works in: each rank's box of a DTensor in the global tensor,
-- and the overlaps of saved blocks with it.
local core = require "dtensor.core"
local M = {}

function M.zeros(n)
  local z = {}
  for i = 1, n do z[i] = 0 end
  return z
end

-- the global box of x this rank holds: offset and shape (nil off x's mesh); a Partial
-- placement holds the whole extent of its dim, as Replicate
function M.my_box(x)
  if not core.is_dtensor(x) then return M.zeros(x:dim()), x:size() end
  local me = core.rank()
  for _, s in ipairs(core._dtensor_shards(x)) do
    if s.rank == me then return s.offset, s.shape end
  end
end

-- x's placements with Partial as Replicate, or nil when x has no Partial placement
function M.replicated_placements(x)
  if not core.is_dtensor(x) then return nil end
  local ps, any = {}, false
  for i, p in ipairs(x.placements) do
    if p:is_partial() then ps[i], any = core.Replicate(), true else ps[i] = p end
  end
  return any and ps or nil
end

-- adds to `boxes` every piece's overlap with the box (at, size) of the global tensor, read
-- into dst (which holds exactly that box)
function M.add_boxes(boxes, cat, name, entry, dst, at, size)
  for _, p in ipairs(entry.pieces) do
    local src, box, dst_at, empty = {}, {}, {}, false
    for d = 1, #size do
      local lo = math.max(at[d], p.offset[d])
      local hi = math.min(at[d] + size[d], p.offset[d] + p.shape[d])
      if hi <= lo then empty = true break end
      src[d], box[d], dst_at[d] = lo - p.offset[d], hi - lo, lo - at[d]
    end
    if not empty then boxes[#boxes + 1] = {cat.files[p.file], name, dst, src, box, dst_at} end
  end
end

return M
