-- Size limits: every size computation is checked.  A shape whose element count (the product
-- of its non-zero sizes: a 0 elsewhere hides nothing) is over 2^59, or an allocation larger
-- than the machine's memory, is a Lua error naming the op and the shape, never a crash.
local fails = require("tests.spec.support.io_nn_helpers").fails
local BIG = "has more elements than fit in memory"

describe("size limits", function()
  describe("factories", function()
    it("zeros(2^32, 2^32): 2^64 elements is an error, not a 0-byte tensor", function()
      fails("zeros: shape {4294967296,4294967296} " .. BIG .. " (2^64; at most 2^59)", dt.zeros, 2^32, 2^32)
    end)
    it("ones(2, 2^62) is refused instead of a negative numel", function()
      fails("ones: shape {2,4611686018427387904} " .. BIG, dt.ones, 2, 2^62)
    end)
    it("a 0 in one dim does not hide an overflow in the others", function()
      fails("zeros: shape {0,4611686018427387904,4} " .. BIG, dt.zeros, 0, 2^62, 4)
      fails("empty: shape {4294967296,0,4294967296} " .. BIG, dt.empty, 2^32, 0, 2^32)
      assert.are.equal(0, dt.zeros(0, 2^40):numel()) -- within the limit: fine
    end)
    it("full, rand, randn, randint name themselves", function()
      fails("full: shape {4294967296,4294967296} " .. BIG, dt.full, {2^32, 2^32}, 1)
      fails("rand: shape {4294967296,4294967296} " .. BIG, dt.rand, 2^32, 2^32)
      fails("randn: shape {4294967296,4294967296} " .. BIG, dt.randn, 2^32, 2^32)
    end)
    it("eye(2^32) is an error", function()
      fails("eye: shape {4294967296,4294967296} " .. BIG, dt.eye, 2^32)
    end)
    it("more bytes than the machine has: out of memory, named", function()
      fails("zeros: shape {1099511627776} of float32: out of memory allocating 4398046511104 bytes", dt.zeros, 2^40)
      fails("eye: shape {268435456,268435456} of float32: out of memory allocating", dt.eye, 2^28)
      fails("out of memory allocating", dt.ones, 2^20, 2^20, 2^10)
    end)
  end)

  describe("random", function()
    it("multinomial with 2^62 samples", function()
      fails("multinomial: shape {2,4611686018427387904} " .. BIG, dt.multinomial, dt.ones(2, 3), 2^62, true)
      fails("multinomial: shape {4611686018427387904} " .. BIG, dt.multinomial, dt.ones(3), 2^62, true)
    end)
  end)

  describe("views", function()
    it("expand(2^32, 2^32) is refused before any kernel reads", function()
      fails("expand: shape {4294967296,4294967296} " .. BIG, function() return dt.ones(1, 1):expand(2^32, 2^32):sum() end)
      fails("expand: shape {0,4294967296,4294967296} " .. BIG, function() return dt.ones(1, 1):expand(0, 2^32, 2^32) end)
      assert.are.equal(2^40, dt.ones(1, 1):expand(2^20, 2^20):numel()) -- a large view within the limit
    end)
    it("view/reshape sizes whose product wraps do not match the element count", function()
      fails("view: shape {4294967296,4294967296,0} is invalid", function() return dt.zeros(0):view(2^32, 2^32, 0) end)
      fails("is invalid", function() return dt.zeros(0):reshape(2^32, 2^32, -1) end)
      fails("is invalid", function() return dt.zeros(16):view(2^62, 4, -1) end)
    end)
    it("a slice step far beyond the size", function()
      local t = dt.arange(10)
      local s = t[{{1, 10, 1 << 62}}]
      assert.are.same({1}, s:size())
      assert.are.equal(0, s:item())
    end)
    it("chunk(2^62) of an empty dim is an error, not a byte-count overflow", function()
      fails("chunk: 4611686018427387904 pieces are more than a list can hold", dt.chunk, dt.zeros(0, 3), 2^62)
      assert.are.equal(3, #dt.chunk(dt.zeros(0, 3), 3))
    end)
    it("split into more pieces than a list holds", function()
      local t = dt.ones(1):expand(2^40)
      fails("split: 1099511627776 pieces are more than a list can hold", function() return t:split(1) end)
      fails("split: sizes add up to more than", function() return dt.zeros(4):split({2^62, 2^62, -2^63 + 4}) end)
    end)
  end)

  describe("files", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p '" .. dir .. "'"))
    local function write(name, s)
      local f = assert(io.open(dir .. "/" .. name, "wb"))
      f:write(s)
      f:close()
      return dir .. "/" .. name
    end
    local function st_bytes(header) return string.pack("<I8", #header) .. header end
    local function npy(dict)
      local hlen = (#dict + 1 + 10 + 63) // 64 * 64 - 10
      return "\x93NUMPY\1\0" .. string.pack("<I2", hlen) .. dict .. string.rep(" ", hlen - #dict - 1) .. "\n"
    end

    it("a safetensors shape (0, 2^62, 4) does not load", function()
      local p = write("zero.safetensors", st_bytes('{"x":{"dtype":"F32","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}}'))
      fails("load: " .. p .. ": tensor 'x': shape {0,4611686018427387904,4} " .. BIG, dt.load, p)
    end)
    it("a .npy shape (0, 2^62, 4) does not load", function()
      local p = write("zero.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4), }"))
      fails("load_npy: " .. p .. ": shape {0,4611686018427387904,4} " .. BIG, dt.load_npy, p)
    end)
    it("a .npy shape whose product wraps to a small count does not load", function()
      local p = write("wrap.npy", npy("{'descr': '|u1', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"))
      fails("load_npy: " .. p .. ": shape {4294967296,4294967296} " .. BIG, dt.load_npy, p)
    end)
  end)

  describe("DTensors", function()
    it("a DTensor's global shape is checked", function()
      local mesh = dt.init_device_mesh("cpu", {1})
      fails("from_local: shape {4294967296,4294967296} " .. BIG, dt.from_local, dt.ones(2, 2), mesh, {dt.Replicate()},
            {shape = {2^32, 2^32}})
    end)

    it("mesh sizes whose product overflows are an error naming init_device_mesh", function()
      fails("init_device_mesh: mesh shape {4294967296,4294967296} has more than 2147483647 ranks, but the world has 1",
            dt.init_device_mesh, "cpu", {2^32, 2^32})
      fails("init_device_mesh: mesh shape {9223372036854775807,3} has more than 2147483647 ranks",
            dt.init_device_mesh, "cpu", {math.maxinteger, 3})
    end)
  end)
end)
