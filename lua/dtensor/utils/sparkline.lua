-- sparkline(values, {width = 60, unicode = false}): a one-line picture of a series, for a
-- terminal: ASCII levels _.-~=+*# (or the Unicode blocks with unicode = true).  A series
-- longer than width is averaged in width consecutive buckets; NaN shows as ?, a constant
-- series as a flat middle line.
local ASCII = {"_", ".", "-", "~", "=", "+", "*", "#"}
local BLOCKS = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"}
-- a value for an error message: numbers, strings and booleans as they are, else their kind
-- (tostring of a released tensor would raise)
local function show(v)
  local t = type(v)
  if t == "number" or t == "string" or t == "boolean" or t == "nil" then return tostring(v) end
  return "a " .. t
end

return function(values, opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("sparkline: opts must be a table {width =, unicode =}, got " .. type(opts), 2) end
  if type(values) ~= "table" then error("sparkline: expected a list of numbers, got " .. type(values), 2) end
  local width = opts.width or 60
  if math.type(width) ~= "integer" or width < 1 then error("sparkline: width must be an integer >= 1, got " .. show(width), 2) end
  local levels = opts.unicode and BLOCKS or ASCII
  local n = #values
  for i = 1, n do
    if type(values[i]) ~= "number" then error(string.format("sparkline: values[%d] is a %s, not a number", i, type(values[i])), 2) end
  end
  local points = {}
  if n <= width then
    for i = 1, n do points[i] = values[i] end
  else
    for b = 1, width do -- bucket b covers values (b-1)*n/width+1 .. b*n/width
      local lo, hi = (b - 1) * n // width + 1, b * n // width
      local sum = 0
      for i = lo, hi do sum = sum + values[i] end
      points[b] = sum / (hi - lo + 1)
    end
  end
  local min, max = math.huge, -math.huge
  for _, v in ipairs(points) do
    if v == v and v > -math.huge and v < math.huge then min, max = math.min(min, v), math.max(max, v) end
  end
  local out = {}
  for i, v in ipairs(points) do
    if v ~= v then
      out[i] = "?"
    elseif v == math.huge then
      out[i] = levels[#levels]
    elseif v == -math.huge then
      out[i] = levels[1]
    elseif max == min then
      out[i] = levels[#levels // 2]
    else
      out[i] = levels[math.floor((v - min) / (max - min) * (#levels - 1) + 0.5) + 1]
    end
  end
  return table.concat(out)
end
