-- A tour of local tensors: run with `dtlua examples/tensors.lua`.
local a = dt.tensor({{1, 2, 3}, {4, 5, 6}}, {dtype = "float32"})
print("a =", a)
print("a:size() =", table.concat(a:size(), "x"), "dtype", a.dtype)

local b = dt.ones(3)
print("a + b (broadcast) =", a + b)
print("a * 2 - 1 =", a * 2 - 1)
print("a:sum(2) (row sums, dims are 1-based) =", a:sum(2))
print("a:matmul(a:t()) =", a:matmul(a:t()))
print("softmax over dim 2 =", a:softmax(2))
print("a[2] (second row, a view) =", a[2])
local v = a[{{1, 2}, {2, 3}}]
print("a[{{1, 2}, {2, 3}}] =", v)
v:fill_(0)
print("after filling the view with 0, a =", a)

local x = dt.tensor({{0.5, -1.0, 2.0}})
print("gelu(x) =", dt.F.gelu(x))
print("cross_entropy =", dt.F.cross_entropy(dt.tensor({{2.0, 0.5, -1.0}}), dt.tensor({1})))

local ok, err = pcall(function() return dt.ones(2, 3) + dt.ones(4) end)
print("bad broadcast ->", ok, err)
