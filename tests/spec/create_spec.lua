describe("creation", function()
  it("zeros/ones take varargs or a table, with a dtype option", function()
    local a = dt.zeros(2, 3)
    assert.are.same({2, 3}, a:size())
    assert.are.equal("float32", a.dtype)
    local b = dt.ones({4}, {dtype = "float64"})
    assert.are.equal("float64", b.dtype)
    assert.are.equal(4, b:numel())
    assert.are.equal("cpu", b.device)
  end)

  it("full picks int64 for integer fills, float32 for float ones", function()
    assert.are.equal("int64", dt.full({2}, 7).dtype)
    assert.are.equal("float32", dt.full({2}, 7.5).dtype)
    assert.are.equal("bool", dt.full({2}, true).dtype)
  end)

  it("rejects negative sizes and bad dtypes with the op named", function()
    local ok, err = pcall(dt.zeros, 2, -1)
    assert.is_false(ok)
    assert.matches("zeros: negative size %-1 in dim 2", err)
    assert.matches("full: negative size %-3 in dim 1", select(2, pcall(dt.full, {-3}, 1)))
    ok, err = pcall(dt.ones, {2}, {dtype = "float8"})
    assert.is_false(ok)
    assert.matches("unknown dtype 'float8'", err)
  end)

  it("refuses values the dtype cannot hold and stray arguments; full keeps integers exact", function()
    local function msg(f, ...) return select(2, pcall(f, ...)) end
    assert.matches("full: value 300 cannot be converted to type uint8 without overflow",
                   msg(dt.full, {2}, 300, {dtype = "uint8"}), 1, true)
    assert.matches("full: value 256 cannot be converted to type uint8 without overflow",
                   msg(dt.full_like, dt.zeros(2, {dtype = "uint8"}), 256), 1, true)
    assert.matches("tensor: value -1 cannot be converted to type uint8 without overflow",
                   msg(dt.tensor, {{0}, {-1}}, {dtype = "uint8"}), 1, true)
    assert.matches("indexing assignment: value 2147483648 cannot be converted to type int32 without overflow",
                   msg(function() dt.zeros(2, {dtype = "int32"})[1] = 2147483648 end), 1, true)
    assert.matches('empty: expected an options table such as {dtype = "float64"}, got string',
                   msg(dt.empty, 2, "float64"), 1, true)
    assert.matches('ones_like: expected an options table such as {dtype = "float64"}, got string',
                   msg(dt.ones_like, dt.ones(2), "float64"), 1, true)
    assert.are.equal(-9007199254740993, dt.full({1}, -9007199254740993):item())
    assert.are.equal(math.maxinteger, dt.full_like(dt.zeros(1, {dtype = "int64"}), math.maxinteger):item())
    assert.are.same({255, 255}, dt.full({2}, 255, {dtype = "uint8"}):totable())
    assert.matches("full: device 'cuda' is not available (tensors are on cpu in this build)",
                   msg(dt.full, {2}, 1, {device = "cuda"}), 1, true)
    assert.matches("eye: device 'cuda:0' is not available", msg(dt.eye, 2, {device = "cuda:0"}), 1, true)
    assert.are.equal("cpu", dt.empty(2, {device = "cpu"}).device)
  end)
end)
