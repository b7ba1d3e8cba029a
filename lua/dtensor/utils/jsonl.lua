-- JSON lines for metrics: one object per line.  encode writes a flat object of numbers,
-- strings and booleans (non-finite numbers as NaN / Infinity, as Python's json does); read
-- parses a file of such lines back (nested arrays and objects too; null is a missing key).
local M = {}

local function number_text(v)
  if v ~= v then return "NaN" end
  if v == math.huge then return "Infinity" end
  if v == -math.huge then return "-Infinity" end
  if math.type(v) == "integer" then return tostring(v) end
  for digits = 15, 17 do -- the shortest text that reads back as v
    local s = string.format("%." .. digits .. "g", v)
    if tonumber(s) == v then return s end
  end
end

local ESCAPES = {['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t"}
local function string_text(s)
  return '"' .. s:gsub('[%c"\\]', function(c) return ESCAPES[c] or string.format("\\u%04x", c:byte()) end) .. '"'
end

M.quote = string_text -- a JSON string literal (dt.checkpoint's index writer)

local function value_text(v, what)
  local t = type(v)
  if t == "number" then return number_text(v) end
  if t == "string" then return string_text(v) end
  if t == "boolean" then return tostring(v) end
  error(string.format("%s: %s is a %s; metrics are numbers, strings or booleans", what, "value", t), 0)
end

-- encode(obj, first): a one-line JSON object; the keys of first (a list) in that order, then
-- the others sorted
function M.encode(obj, first)
  local keys, seen = {}, {}
  for _, k in ipairs(first or {}) do
    if obj[k] ~= nil then keys[#keys + 1], seen[k] = k, true end
  end
  local rest = {}
  for k in pairs(obj) do
    if type(k) ~= "string" then error("jsonl: keys must be strings, got a " .. type(k), 0) end
    if not seen[k] then rest[#rest + 1] = k end
  end
  table.sort(rest)
  for _, k in ipairs(rest) do keys[#keys + 1] = k end
  local parts = {}
  for i, k in ipairs(keys) do parts[i] = string_text(k) .. ":" .. value_text(obj[k], "jsonl: key " .. k) end
  return "{" .. table.concat(parts, ",") .. "}"
end

-- ---- reading ----
local decode_value

local function fail(s, i, what) error({at = i, what = what .. " at column " .. i .. " of: " .. s}, 0) end

local function skip(s, i) return s:find("[^ \t\r\n]", i) or #s + 1 end

local UNESCAPES = {b = "\b", f = "\f", n = "\n", r = "\r", t = "\t", ['"'] = '"', ["\\"] = "\\", ["/"] = "/"}
local function decode_string(s, i) -- s:sub(i, i) == '"'
  local out, j = {}, i + 1
  while true do
    local c = s:sub(j, j)
    if c == "" then fail(s, j, "unterminated string") end
    if c == '"' then return table.concat(out), j + 1 end
    if c == "\\" then
      local e = s:sub(j + 1, j + 1)
      if e == "u" then
        local hex = s:sub(j + 2, j + 5)
        if not hex:match("^%x%x%x%x$") then fail(s, j, "bad \\u escape") end
        out[#out + 1] = utf8.char(tonumber(hex, 16))
        j = j + 6
      elseif UNESCAPES[e] then
        out[#out + 1] = UNESCAPES[e]
        j = j + 2
      else
        fail(s, j, "bad escape")
      end
    else
      out[#out + 1] = c
      j = j + 1
    end
  end
end

local WORDS = {["true"] = true, ["false"] = false, ["NaN"] = 0 / 0, ["Infinity"] = math.huge, ["-Infinity"] = -math.huge}

function decode_value(s, i)
  i = skip(s, i)
  local c = s:sub(i, i)
  if c == '"' then return decode_string(s, i) end
  if c == "{" or c == "[" then
    local obj, is_obj, close = {}, c == "{", c == "{" and "}" or "]"
    i = skip(s, i + 1)
    if s:sub(i, i) == close then return obj, i + 1 end
    while true do
      local key
      if is_obj then
        if s:sub(i, i) ~= '"' then fail(s, i, "expected a key") end
        key, i = decode_string(s, i)
        i = skip(s, i)
        if s:sub(i, i) ~= ":" then fail(s, i, "expected ':'") end
        i = i + 1
      end
      local v
      v, i = decode_value(s, i)
      if is_obj then obj[key] = v else obj[#obj + 1] = v end
      i = skip(s, i)
      local sep = s:sub(i, i)
      if sep == close then return obj, i + 1 end
      if sep ~= "," then fail(s, i, "expected ',' or '" .. close .. "'") end
      i = skip(s, i + 1)
    end
  end
  if s:sub(i, i + 3) == "null" then return nil, i + 4 end
  for word, v in pairs(WORDS) do
    if s:sub(i, i + #word - 1) == word then return v, i + #word end
  end
  local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", i)
  if num and tonumber(num) then return tonumber(num), i + #num end
  fail(s, i, "unexpected character '" .. c .. "'")
end

-- decode(line): the value of one line of JSON
function M.decode(line)
  local v, i = decode_value(line, 1)
  i = skip(line, i)
  if i <= #line then fail(line, i, "trailing characters") end
  return v
end

-- read(path): the list of the objects of a JSON-lines file (blank lines skipped)
function M.read(path)
  if type(path) ~= "string" then error("read_jsonl: expected a path, got " .. type(path), 2) end
  local f, err = io.open(path, "r")
  if not f then error("read_jsonl: cannot open " .. tostring(err), 2) end
  local rows, n = {}, 0
  -- a directory opens but does not read: f:lines() would raise "Is a directory" unnamed
  local ok_read, read_err = f:read(0)
  if ok_read == nil and read_err then f:close(); error("read_jsonl: cannot read " .. path .. ": " .. read_err, 2) end
  for line in f:lines() do
    n = n + 1
    if line:match("[^ \t\r]") then
      local ok, v = pcall(M.decode, line)
      if not ok then
        f:close()
        error(string.format("read_jsonl: %s:%d: %s", path, n, type(v) == "table" and v.what or tostring(v)), 2)
      end
      rows[#rows + 1] = v
    end
  end
  f:close()
  return rows
end

return M
