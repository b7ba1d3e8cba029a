-- The include graph follows the layer order: a file under src/<layer> may include only its
-- own layer and the layers listed before it in doc/architecture.md ("## Layers" table, one
-- row per layer, lowest first: | layer | folder | ...).  Run: dtlua tests/layers/check_layers.lua [srcdir]
-- Prints one line per violation and "layers: N passed, N failed" (N = files checked).
local srcdir = arg and arg[1] or "."

local function read_lines(path)
  local f = assert(io.open(path, "r"), "check_layers: cannot open " .. path)
  local lines = {}
  for l in f:lines() do lines[#lines + 1] = l end
  f:close()
  return lines
end

-- layer name -> rank, from the rows of the table under "## Layers"
local function layer_order()
  local rank, inside, n = {}, false, 0
  for _, l in ipairs(read_lines(srcdir .. "/doc/architecture.md")) do
    if l:match("^## ") then inside = l:match("^## Layers") ~= nil
    elseif inside then
      local folder = l:match("^|%s*[%w_ ]-%s*|%s*`?src/([%w_]+)/?`?%s*|")
      if folder then n = n + 1; rank[folder] = n end
    end
  end
  assert(n > 0, "check_layers: no layer rows found in doc/architecture.md under '## Layers'")
  return rank
end

local function source_files()
  local p = assert(io.popen("cd '" .. srcdir .. "' && find src -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' | sort"))
  local files = {}
  for f in p:lines() do files[#files + 1] = f end
  p:close()
  return files
end

local rank = layer_order()
local passed, failed = 0, 0
for _, file in ipairs(source_files()) do
  local own = file:match("^src/([%w_]+)/")
  local bad = {}
  if not own or not rank[own] then
    bad[#bad + 1] = "is in no layer listed in doc/architecture.md"
  else
    for i, l in ipairs(read_lines(srcdir .. "/" .. file)) do
      local inc = l:match('^%s*#%s*include%s+"([^"]+)"')
      local layer = inc and inc:match("^([%w_]+)/")
      if layer and rank[layer] and rank[layer] > rank[own] then
        bad[#bad + 1] = string.format("line %d includes %s (layer %s above %s)", i, inc, layer, own)
      elseif layer and not rank[layer] then
        bad[#bad + 1] = string.format("line %d includes %s (folder %s is in no layer)", i, inc, layer)
      end
    end
  end
  if #bad == 0 then passed = passed + 1
  else
    failed = failed + 1
    for _, b in ipairs(bad) do print("layers: " .. file .. " " .. b) end
  end
end
print(string.format("layers: %d passed, %d failed", passed, failed))
os.exit(failed == 0 and 0 or 1)
