-- The seed corpus of the file parsers' fuzzer (tests/fuzz/file_parsers_fuzz.sh): valid files
-- written by dtlua itself, in every dtype and shape family the parsers handle (0-d, 0-size,
-- several tensors, metadata, escapes in names), plus the bare JSON headers of the
-- safetensors files.   dtlua tests/fuzz/make_file_corpus.lua DIR
local dir = assert(arg[1], "usage: dtlua tests/fuzz/make_file_corpus.lua DIR")
local n = 0
local function name(ext)
  n = n + 1
  return string.format("%s/seed_%03d.%s", dir, n, ext)
end

local npy_dtypes = {"float32", "float64", "float16", "int64", "int32", "uint8", "bool"}
local shapes = {{}, {0}, {3}, {2, 3}, {2, 0, 4}, {1, 2, 1, 2}}
for _, dtype in ipairs(npy_dtypes) do
  for _, shape in ipairs(shapes) do
    dt.save_npy(dt.ones(shape, {dtype = dtype}), name("npy"))
  end
end

local all_dtypes = {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"}
for i, dtype in ipairs(all_dtypes) do
  local path = name("safetensors")
  dt.save({a = dt.ones(shapes[(i % #shapes) + 1], {dtype = dtype}), ["b.weight\t\"q\""] = dt.zeros({2}, {dtype = dtype})},
    path, {format = "pt", ["k\\ey"] = "v\226\130\172"})
  -- the header alone: the JSON reader's own seeds
  local f = assert(io.open(path, "rb"))
  local len = string.unpack("<I8", f:read(8))
  local header = f:read(len)
  f:close()
  local out = assert(io.open(name("json"), "wb"))
  out:write(header)
  out:close()
end
dt.save(dt.zeros({0}), name("safetensors"))
print(string.format("%d seed files in %s", n, dir))
