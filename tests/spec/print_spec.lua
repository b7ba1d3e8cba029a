-- tostring(t): PyTorch's print format, compared as exact strings.

local function check(want, t) assert.are.equal(want, tostring(t)) end

describe("printing", function()
  it("floats: integer mode, fixed 4 decimals, scientific", function()
    check("tensor([[1., 2.],\n        [3., 4.]])", dt.tensor({{1.0, 2}, {3, 4}}))
    check("tensor([[1.5000, 2.0000],\n        [3.0000, 4.0000]])", dt.tensor({{1.5, 2}, {3, 4}}))
    check("tensor([ -1.5000, 100.2500])", dt.tensor({-1.5, 100.25}))
    check("tensor([1.0000e-05, 1.0000e+00])", dt.tensor({1e-5, 1}))
    check("tensor([1.0000e-03, 1.2500e+01])", dt.tensor({1e-3, 12.5})) -- max/min > 1000
    check("tensor([1.2346e+08, 1.0000e+00])", dt.tensor({123456789.0, 1}))
    check("tensor([-0., 0., 1.])", dt.tensor({-0.0, 0.0, 1}))
    check("tensor([0., 0.])", dt.zeros(2))
    check("tensor([   nan,    inf,   -inf, 1.5000])", dt.tensor({0 / 0, 1 / 0, -1 / 0, 1.5}))
  end)

  it("0-d tensors", function()
    check("tensor(3.5000)", dt.tensor(3.5))
    check("tensor(3.)", dt.tensor(3.0))
    check("tensor(3)", dt.tensor(3))
    check("tensor(True)", dt.tensor(true))
  end)

  it("every dtype, with a suffix for the non-inferred ones", function()
    check("tensor([-1, 10])", dt.tensor({-1, 10}))
    check("tensor([ True, False])", dt.tensor({true, false}))
    check("tensor([1.5000, 2.0000], dtype=float64)", dt.tensor({1.5, 2}, {dtype = "float64"}))
    check("tensor([ 1.5000, -2.0000], dtype=bfloat16)", dt.tensor({1.5, -2}, {dtype = "bfloat16"}))
    check("tensor([ 1.5000, -2.0000], dtype=float16)", dt.tensor({1.5, -2}, {dtype = "float16"}))
    check("tensor([1, 2], dtype=int32)", dt.tensor({1, 2}, {dtype = "int32"}))
    check("tensor([  1, 255], dtype=uint8)", dt.tensor({1, 255}, {dtype = "uint8"}))
    check("tensor([-9223372036854775807,                    5])", dt.tensor({-9223372036854775807, 5}))
  end)

  it("empty tensors show their size when not {0}, and their dtype", function()
    check("tensor([])", dt.zeros(0))
    check("tensor([], size=(2, 0))", dt.zeros(2, 0))
    check("tensor([], dtype=int64)", dt.zeros(0, {dtype = "int64"}))
    check("tensor([], size=(2, 0), dtype=bool)", dt.zeros(2, 0, {dtype = "bool"}))
  end)

  it("nests with blank lines between blocks and reads strided views", function()
    check("tensor([[[ 1,  2,  3],\n         [ 4,  5,  6]],\n\n        [[ 7,  8,  9],\n         [10, 11, 12]]])",
      dt.arange(1, 13):view(2, 2, 3))
    check("tensor([[1, 4],\n        [2, 5],\n        [3, 6]])", dt.tensor({{1, 2, 3}, {4, 5, 6}}):t())
    check("tensor([[2, 2],\n        [3, 3]])", dt.tensor({{2}, {3}}):expand(2, 2))
  end)

  it("wraps long rows at 80 columns and the dtype suffix too", function()
    check("tensor([0.0000, 0.1000, 0.2000, 0.3000, 0.4000, 0.5000, 0.6000, 0.7000, 0.8000,\n" ..
          "        0.9000, 1.0000, 1.1000])", dt.arange(0, 1.15, 0.1))
    check("tensor([0.1000, 0.2000, 0.3000, 0.4000, 0.5000, 0.6000, 0.7000, 0.8000, 0.9000],\n" ..
          "       dtype=float64)", dt.tensor({0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}, {dtype = "float64"}))
  end)

  it("summarises more than 1000 elements with the first and last 3 per dim", function()
    check("tensor([   0,    1,    2,  ..., 1997, 1998, 1999])", dt.arange(2000))
    check("tensor([[0., 0., 0.,  ..., 0., 0., 0.],\n" ..
          "        [0., 0., 0.,  ..., 0., 0., 0.],\n" ..
          "        [0., 0., 0.,  ..., 0., 0., 0.],\n" ..
          "        ...,\n" ..
          "        [0., 0., 0.,  ..., 0., 0., 0.],\n" ..
          "        [0., 0., 0.,  ..., 0., 0., 0.],\n" ..
          "        [0., 0., 0.,  ..., 0., 0., 0.]])", dt.zeros(100, 100))
    -- 1000 elements exactly: not summarised
    assert.is_nil(tostring(dt.arange(1000)):find("...", 1, true))
  end)

  it("is also t:tostring()", function()
    assert.are.equal("tensor([1, 2])", dt.tensor({1, 2}):tostring())
  end)
end)
