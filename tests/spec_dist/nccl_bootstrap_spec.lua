-- SPMD specs of the NCCL backend's start-up that run without a GPU: the unique id (128 opaque
-- bytes) travels from rank 0 to every rank through the host communicator (process memory
-- under `dtlua -n N`, MPI under mpirun), tested with fake ids; and the world's NCCL
-- communicator is a clear error on every rank where there is no GPU or no NCCL in the build.
-- On a GPU, tests/gpu/nccl_spec.lua runs the collectives themselves.
local D = dt.distributed
local rank, n = dt.rank(), dt.world_size()

-- A fake id of 128 bytes, different for every (rank, salt), every byte value likely.
local function fake_id(r, salt)
  local b = {}
  for i = 1, 128 do b[i] = string.char((r * 97 + salt * 31 + i * 13 + (i * i) % 7) % 256) end
  return table.concat(b)
end

describe("the NCCL unique id exchange", function()
  it("gives every rank rank 0's id, byte for byte, over and over", function()
    for salt = 1, 5 do
      local got = D._nccl_id_exchange(fake_id(rank, salt))
      assert.are.equal(128, #got)
      assert.are.equal(fake_id(0, salt), got) -- rank 0's, not this rank's own
      if rank ~= 0 then assert.are_not.equal(fake_id(rank, salt), got) end
    end
  end)

  it("carries every byte value, the zero byte included", function()
    local all = {}
    for i = 0, 127 do all[#all + 1] = string.char((i * 2 + rank) % 256) end
    local mine = table.concat(all)
    local got = D._nccl_id_exchange(mine)
    local want = {}
    for i = 0, 127 do want[#want + 1] = string.char(i * 2) end
    assert.are.equal(table.concat(want), got)
  end)

  it("raises rank 0's failure on every rank, and the ranks go on", function()
    local mine = fake_id(rank, 9)
    if rank == 0 then mine = false end
    local ok, err = pcall(D._nccl_id_exchange, mine)
    assert.is_false(ok)
    assert.matches("NCCL unique id exchange: rank 0 could not make the id: _nccl_id_exchange: rank 0 was given no fake id",
      err, 1, true)
    D.barrier()
    assert.are.equal(fake_id(0, 3), D._nccl_id_exchange(fake_id(rank, 3)))
  end)

  it("refuses an id of the wrong length", function()
    local ok, err = pcall(D._nccl_id_exchange, "short")
    assert.is_false(ok)
    assert.matches("_nccl_id_exchange: the id must be 128 bytes, got 5", err, 1, true)
  end)
end)

describe("the world's NCCL communicator without a GPU", function()
  it("is an error on every rank that says why, and nothing else changes", function()
    local ok, err = pcall(D._nccl_init)
    if ok then
      print("  (a GPU is present: tests/gpu/nccl_spec.lua covers this build)")
      return
    end
    if D.is_nccl_available() then
      local ranks = {}
      for r = 0, n - 1 do ranks[#ranks + 1] = r end
      assert.matches("nccl init: NCCL: no GPU on rank(s) {" .. table.concat(ranks, ",") .. "}", err, 1, true)
    else
      assert.matches("collectives on cuda need the NCCL backend, which this build lacks (configure --with-nccl)",
        err, 1, true)
    end
    -- the host collectives are untouched
    local t = dt.full({3}, rank + 1.0)
    D.all_reduce(t)
    assert.are.same({n * (n + 1) / 2, n * (n + 1) / 2, n * (n + 1) / 2}, t:totable())
  end)
end)
