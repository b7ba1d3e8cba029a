-- Intra-op threads with several ranks in one process: every rank has its own workers, so
-- ranks that run threaded kernels at the same time (between collectives) neither deadlock nor
-- change each other's results; each rank's thread count is its own; DTensor random draws and
-- a sharded op are the same bits with 1 and 3 threads per rank.
local F = dt.nn.functional
local n, rank = dt.world_size(), dt.rank()

local function work(seed)
  dt.manual_seed(seed)
  local x = dt.randn(300, 700)
  local w = dt.randn(700)
  return {F.layer_norm(x, {700}, w, w), x:softmax(2), (x * 2 + 1):sum(1), x:t():contiguous(), dt.rand(100003)}
end

describe("intra-op threads on " .. n .. " ranks", function()
  local saved
  before_each(function() saved = dt.get_num_threads() end)
  after_each(function() dt.set_num_threads(saved) end)

  it("each rank's count is its own", function()
    dt.set_num_threads(1 + rank % 3)
    dt.barrier()
    assert.are.equal(1 + rank % 3, dt.get_num_threads())
  end)

  it("ranks running threaded kernels at once give their 1-thread results", function()
    dt.set_num_threads(1)
    local ref = work(100 + rank)
    dt.set_num_threads(3)
    for round = 1, 5 do
      dt.barrier() -- every rank submits at the same moment
      local got = work(100 + rank)
      for i = 1, #ref do assert.is_true(ref[i]:equal(got[i]), "rank " .. rank .. " round " .. round .. " result " .. i) end
      local total = dt.distributed.all_reduce(got[3]:sum():reshape(1), "sum")
      assert.are.equal(1, total:numel())
    end
  end)

  it("DTensor draws and sharded ops are the same bits with 1 and 3 threads per rank", function()
    local ranks = {}
    for r = 0, n - 1 do ranks[#ranks + 1] = r end
    local mesh = dt.DeviceMesh("cpu", ranks)
    local results = {}
    for _, t in ipairs({1, 3}) do
      dt.set_num_threads(t)
      dt.manual_seed(9)
      local x = dt.randn({n * 50001 + 3}, {device_mesh = mesh, placements = {dt.Shard(1)}})
      local y = (x * x + 1):log()
      results[t] = {x:full_tensor(), y:full_tensor(), y:sum():full_tensor()}
    end
    for i = 1, 3 do assert.is_true(results[1][i]:equal(results[3][i]), "result " .. i) end
  end)
end)
