-- Box reads of safetensors files through a mapping (dt.checkpoint's strided reshard loads,
-- src/io/safetensors_boxes.c): the same bytes as preadv for random boxes, dtypes, casts and
-- strided destinations (zero-size included), on 1 and 2 threads; the rule picks mmap for a
-- strided box in the page cache and preadv for contiguous runs and from the disk; a mapping is per version of a file (shared by
-- the threads that read it); a file shortened before the read (fstat) or
-- during it (SIGBUS) is an error naming the file and the tensor, and the process goes on.
local fails = require("tests.spec.support.io_nn_helpers").fails
local rng = require("tests.spec.support.spec_helpers").prng(2718)

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p '" .. dir .. "'"))
local function path(name) return dir .. "/" .. name end
local function truncate(p, size) assert(os.execute(string.format("truncate -s %d '%s'", size, p))) end
local function file_size(p)
  local f = assert(io.open(p, "rb"))
  local n = f:seek("end")
  f:close()
  return n
end

local DTYPES = {"float64", "float32", "bfloat16", "float16", "int64", "int32", "uint8", "bool"}

-- a tensor of dtype with varied values (bool: bytes that are not 0/1 are written as 1)
local function values(shape, dtype)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return (dt.arange(n, {dtype = "float64"}):mul(7):remainder(23):sub(5)):reshape(shape):to(dtype)
end

local function random_box(shape)
  local src, size, at = {}, {}, {}
  for d = 1, #shape do
    size[d] = rng.int(0, shape[d])
    if d > 1 and rng.int(1, 5) > 1 then size[d] = math.max(size[d], 1) end
    src[d] = rng.int(0, shape[d] - size[d])
    at[d] = 0
  end
  return src, size, at
end

local function narrowed(x, src, size)
  for d = 1, #size do x = x:narrow(d, src[d] + 1, size[d]) end
  return x
end

describe("safetensors box reads through a mapping", function()
  after_each(function() dt.set_num_threads(1) end)

  it("read the same values as preadv: random boxes, dtypes, casts, strided destinations, 1 and 2 threads", function()
    local p = path("random.safetensors")
    for case = 1, 40 do
      local ndim = rng.int(1, 3)
      local shape = {}
      for d = 1, ndim do shape[d] = rng.int(case % 7 == 0 and 0 or 1, 9) end
      local from, to = DTYPES[rng.int(1, #DTYPES)], DTYPES[rng.int(1, #DTYPES)]
      local x = values(shape, from)
      dt.save({pad = dt.ones(rng.int(0, 5)), x = x}, p)
      local src, size, at = random_box(shape)
      local want = narrowed(x, src, size):to(to)
      local what = string.format("case %d: %s -> %s, %s box %s at %s", case, from, to,
                                 table.concat(shape, "x"), table.concat(size, "x"), table.concat(src, ","))
      for _, mode in ipairs({"preadv", "mmap", "auto"}) do
        dt.set_num_threads(case % 2 + 1)
        local dst = dt.full(size, 9, {dtype = to})
        if case % 3 == 0 and ndim > 1 then -- a transposed destination: runs of one element
          local rev = {}
          for d = 1, ndim do rev[d] = size[ndim + 1 - d] end
          local perm = {}
          for d = 1, ndim do perm[d] = ndim + 1 - d end
          dst = dt.full(rev, 9, {dtype = to}):permute(table.unpack(perm))
        end
        local f = dt._safetensors_open(p, "read_boxes")
        dt._safetensors_read_boxes("read_boxes", {{f, "x", dst, src, size, at}}, {mode = mode})
        f:close()
        assert(dt.equal(dst, want), what .. ", " .. mode)
      end
    end
  end)

  it("a large strided box: columns of a matrix, uneven, cast, over many work items", function()
    local p = path("matrix.safetensors")
    local a = dt.arange(1500 * 1001, {dtype = "float32"}):reshape(1500, 1001)
    dt.save({a = a}, p)
    for _, nt in ipairs({1, 2}) do
      dt.set_num_threads(nt)
      for _, mode in ipairs({"auto", "mmap"}) do
        local f = dt._safetensors_open(p, "read_boxes")
        local cols = dt.zeros(1500, 251, {dtype = "float32"})
        local cast = dt.zeros(1500, 250, {dtype = "float64"})
        dt._safetensors_read_boxes("read_boxes", {{f, "a", cols, {0, 750}, {1500, 251}, {0, 0}},
                                                  {f, "a", cast, {0, 3}, {1500, 250}, {0, 0}}}, {mode = mode})
        f:close()
        assert(dt.equal(cols, a:narrow(2, 751, 251)), nt .. " threads, " .. mode)
        assert(dt.equal(cast, a:narrow(2, 4, 250):to("float64")), nt .. " threads, " .. mode)
      end
    end
  end)

  it("a file shortened before the read: the size check (fstat) names the file and the tensor", function()
    local p = path("short.safetensors")
    dt.save({a = dt.arange(400 * 300, {dtype = "float32"}):reshape(400, 300)}, p)
    local f = dt._safetensors_open(p, "read_boxes") -- the header checks passed
    truncate(p, file_size(p) // 2)
    fails("read_boxes: " .. p .. ": tensor 'a': file is truncated", dt._safetensors_read_boxes, "read_boxes",
          {{f, "a", dt.zeros(400, 30), {0, 0}, {400, 30}, {0, 0}}}, {mode = "mmap"})
    f:close()
  end)

  it("a file shortened during the read (SIGBUS in the copy): an error naming the file and the tensor", function()
    local p = path("race.safetensors")
    local a = dt.arange(400 * 300, {dtype = "float32"}):reshape(400, 300)
    for _, nt in ipairs({1, 2}) do
      dt.set_num_threads(nt)
      dt.save({a = a}, p)
      local f = dt._safetensors_open(p, "read_boxes")
      local dst = dt.zeros(400, 30)
      -- the box is strided (keeps 1/10 of its span): the rule maps it; the hook runs once the
      -- mapping is made and its size checked, so the copy faults past the new end
      fails("read_boxes: " .. p .. ": tensor 'a': file is truncated or unreadable (SIGBUS",
            dt._safetensors_read_boxes, "read_boxes", {{f, "a", dst, {0, 100}, {400, 30}, {0, 0}}},
            {after_map = function() truncate(p, 64) end})
      f:close()
    end
    -- the process goes on, and reads again
    dt.save({a = a}, p)
    local f = dt._safetensors_open(p, "read_boxes")
    local dst = dt.zeros(400, 30)
    dt._safetensors_read_boxes("read_boxes", {{f, "a", dst, {0, 100}, {400, 30}, {0, 0}}})
    f:close()
    assert(dt.equal(dst, a:narrow(2, 101, 30)))
  end)

  it("the rule: contiguous runs are read by preadv (a short read), strided ones mapped (SIGBUS) when cached", function()
    local p = path("rule.safetensors")
    local a = dt.arange(400 * 300, {dtype = "float32"}):reshape(400, 300)
    local function error_of(box, mode, cold)
      dt.save({a = a}, p)
      local f = dt._safetensors_open(p, "read_boxes")
      -- cold: the file's pages dropped from the page cache (posix_fadvise DONTNEED, no privilege)
      if cold then assert(os.execute(string.format("dd if='%s' iflag=nocache count=0 2>/dev/null", p))) end
      local ok, err = pcall(dt._safetensors_read_boxes, "read_boxes", {box(f)},
                            {mode = mode, after_map = function() truncate(p, 64) end})
      f:close()
      assert.is_false(ok)
      return tostring(err)
    end
    local rows = function(f) return {f, "a", dt.zeros(200, 300), {100, 0}, {200, 300}, {0, 0}} end
    local strided = function(f) return {f, "a", dt.zeros(400, 30), {0, 100}, {400, 30}, {0, 0}} end
    assert.matches("tensor 'a': file is truncated$", error_of(rows, "auto"))
    assert.matches("SIGBUS", error_of(strided, "auto"), 1, true)
    assert.matches("tensor 'a': file is truncated$", error_of(strided, "preadv"))
    assert.matches("SIGBUS", error_of(rows, "mmap"), 1, true)
    -- from the disk a strided box is read by preadv too (the I/O is the cost there)
    assert.matches("tensor 'a': file is truncated$", error_of(strided, "auto", true))
  end)

  it("a mapping is per version of a file: a file replaced while one is held is mapped anew", function()
    local p = path("versions.safetensors")
    local old, new = dt.arange(200 * 50, {dtype = "int64"}):reshape(200, 50), dt.full({200, 50}, 5, {dtype = "int64"})
    dt.save({a = old}, p)
    local f = dt._safetensors_open(p, "read_boxes")
    local outer, inner = dt.zeros(200, 5, {dtype = "int64"}), dt.zeros(200, 5, {dtype = "int64"})
    local again = dt.zeros(200, 5, {dtype = "int64"})
    dt._safetensors_read_boxes("read_boxes", {{f, "a", outer, {0, 10}, {200, 5}, {0, 0}}}, {mode = "mmap",
      after_map = function() -- the old file is mapped here: the same file again, then its replacement
        dt._safetensors_read_boxes("read_boxes", {{f, "a", again, {0, 10}, {200, 5}, {0, 0}}}, {mode = "mmap"})
        dt.save({a = new}, p) -- a new file renamed over the old one
        local g = dt._safetensors_open(p, "read_boxes")
        dt._safetensors_read_boxes("read_boxes", {{g, "a", inner, {0, 10}, {200, 5}, {0, 0}}}, {mode = "mmap"})
        g:close()
      end})
    f:close()
    assert(dt.equal(outer, old:narrow(2, 11, 5)))
    assert(dt.equal(again, old:narrow(2, 11, 5)))
    assert(dt.equal(inner, new:narrow(2, 11, 5)))
  end)

  it("rejects an unknown read mode", function()
    local p = path("mode.safetensors")
    dt.save({a = dt.ones(2)}, p)
    local f = dt._safetensors_open(p, "read_boxes")
    fails("invalid option 'fast'", dt._safetensors_read_boxes, "read_boxes", {}, {mode = "fast"})
    f:close()
  end)
end)
