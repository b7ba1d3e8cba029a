-- dt.utils.plot(jsonl_path, png_path, {key = "loss", x = "step", title =, width = 900,
-- height = 500}): draws a metric of a JSON-lines file (dt.utils.progress's log) against the
-- step into a PNG with gnuplot, on rank 0 (the other ranks draw nothing).  Without gnuplot
-- it says what to install (on stderr, rank 0) and returns nil and that message.
local core = require "dtensor.core"
local jsonl = require "dtensor.utils.jsonl"
local M = {}
local show = require "dtensor.value_text" -- a value for an error message

local OPTIONS = {key = true, x = true, title = true, width = true, height = true, quiet = true}

M.MISSING = "plot: gnuplot was not found on PATH, so %s was not drawn; install it " ..
            "(Debian/Ubuntu: apt-get install gnuplot-nox) or read %s, e.g. with dt.utils.sparkline"

local function have_gnuplot() return os.execute("command -v gnuplot >/dev/null 2>&1") == true end

local function gp_string(s) return "'" .. s:gsub("'", "''") .. "'" end -- a gnuplot single-quoted string

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- runs gnuplot on script; returns true, or false and its output
local function run_gnuplot(script)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(script)
  f:close()
  local p = io.popen("gnuplot " .. sh_quote(path) .. " 2>&1")
  local out = p:read("a")
  local ok = p:close()
  os.remove(path)
  return ok == true, out
end

function M.plot(jsonl_path, png_path, opts)
  opts = opts or {}
  if type(jsonl_path) ~= "string" or type(png_path) ~= "string" then
    error(string.format("plot: expected plot(jsonl_path, png_path, opts), got a %s and a %s", type(jsonl_path), type(png_path)), 2)
  end
  if type(opts) ~= "table" then error("plot: opts must be a table, got " .. type(opts), 2) end
  for k in pairs(opts) do
    if not OPTIONS[k] then error("plot: unknown option '" .. show(k) .. "' (options: height, key, quiet, title, width, x)", 2) end
  end
  local key, x = opts.key or "loss", opts.x or "step"
  if not have_gnuplot() then
    local msg = string.format(M.MISSING, png_path, jsonl_path)
    if core.rank() == 0 and not opts.quiet then io.stderr:write(msg, "\n") end
    return nil, msg
  end
  if core.rank() ~= 0 then return png_path end
  local rows = jsonl.read(jsonl_path)
  local data = {}
  for _, row in ipairs(rows) do
    local xv, yv = row[x], row[key]
    if type(xv) == "number" and type(yv) == "number" and yv == yv and math.abs(yv) < math.huge then
      data[#data + 1] = string.format("%.17g %.17g", xv, yv)
    end
  end
  if #data == 0 then
    error(string.format("plot: %s has no line with numbers '%s' and '%s' to draw", jsonl_path, x, key), 2)
  end
  local data_path = os.tmpname()
  local f = assert(io.open(data_path, "w"))
  f:write(table.concat(data, "\n"), "\n")
  f:close()
  local function script(terminal)
    return table.concat({
      string.format("set terminal %s size %d,%d", terminal, opts.width or 900, opts.height or 500),
      "set output " .. gp_string(png_path),
      "set title " .. gp_string(opts.title or (key .. " (" .. jsonl_path:match("[^/]*$") .. ")")) .. " noenhanced",
      "set xlabel " .. gp_string(x) .. " noenhanced",
      "set ylabel " .. gp_string(key) .. " noenhanced",
      "set grid",
      "set key off",
      "plot " .. gp_string(data_path) .. " using 1:2 with lines linewidth 2",
    }, "\n") .. "\n"
  end
  local ok, out = run_gnuplot(script("pngcairo"))
  if not ok and out:find("terminal", 1, true) then ok, out = run_gnuplot(script("png")) end -- a gnuplot without cairo
  os.remove(data_path)
  if not ok then error("plot: gnuplot failed to draw " .. png_path .. ": " .. out, 2) end
  return png_path
end

return M
