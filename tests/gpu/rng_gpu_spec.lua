-- The random rows on "cuda" give the CPU generator's bits for the same (seed, offset): large
-- tensors of every float dtype, bounds that stress the top of the range, and a non-contiguous
-- target.  Run by tests/gpu/run.sh; without a device it skips with one line.
describe("RNG: CUDA against the CPU, bit for bit", function()
  if not dt.cuda.is_available() then
    it("skips: no CUDA device", function() io.write("\nrng_gpu_spec: no CUDA device: skipped\n") end)
    return
  end
  for _, dtype in ipairs {"float32", "float64", "bfloat16", "float16"} do
    for _, ab in ipairs {{0, 1}, {-3, 5}, {1, 1.0009765625}, {2, 2}} do
      it(string.format("uniform_(%g, %g) in %s", ab[1], ab[2], dtype), function()
        for _, shape in ipairs {{1 << 20}, {3, 1001}, {0, 5}, {7}} do
          dt.manual_seed(42)
          local cpu = dt.empty(shape, {dtype = dtype}):uniform_(ab[1], ab[2])
          dt.manual_seed(42)
          local gpu = dt.empty(shape, {dtype = dtype}):cuda():uniform_(ab[1], ab[2])
          assert.is_true(dt.equal(cpu, gpu:cpu()), dtype .. " " .. table.concat(shape, "x"))
        end
      end)
    end
  end

  it("a non-contiguous target is filled in its logical order", function()
    dt.manual_seed(7)
    local cpu = dt.empty(64, 33):t():uniform_()
    dt.manual_seed(7)
    local gpu = dt.empty(64, 33):cuda():t():uniform_()
    assert.is_true(dt.equal(cpu, gpu:cpu()))
  end)

  it("the generator advances the same on both devices", function()
    dt.manual_seed(3)
    dt.empty(10):cuda():uniform_()
    local next_gpu = dt.rand(5)
    dt.manual_seed(3)
    dt.empty(10):uniform_()
    assert.is_true(dt.equal(next_gpu, dt.rand(5)))
  end)
end)
