-- The benchmarks run and print their figures next to the same-run baselines (memcpy, memset,
-- direct MPI calls): bench/collectives.lua and bench/rng.lua, as subprocesses under timeout.

do
  local H = require("tests.spec.support.launch_helpers")
  local sh_quote, run = H.sh_quote, H.run
  local srcdir = os.getenv("srcdir") or "."

  -- mpirun with the CI settings, or nil where there is none (or no MPI backend)
  local mpirun = H.mpirun_prefix()
  local mrun = H.mrun

  describe("bench/collectives.lua", function()
    local bench = srcdir .. "/bench/collectives.lua"

    it("threads: all_reduce, all_gather, reduce_scatter, all_to_all next to memcpy measured in the same run", function()
      local out, rc = run("-n 2 " .. sh_quote(bench) .. " 0.01 0.005")
      assert.are.equal(0, rc, out)
      assert.matches("# threads backend, 2 ranks; reference: memcpy (measured in this run)", out, 1, true)
      for _, c in ipairs({"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}) do
        assert.matches("\n" .. c .. " +4 KiB +[%d.]+ +[%d.]+ +[%d.]+ +[%d.]+", out)
      end
    end)

    it("MPI: next to the same collective called directly through MPI from C", function()
      if not mpirun then return end
      local out, rc = mrun(2, sh_quote(bench) .. " 0.01 0.005")
      assert.are.equal(0, rc, out)
      assert.matches("# mpi backend, 2 ranks; reference: raw MPI (measured in this run)", out, 1, true)
      -- the fingerprint (as the backend runs it, and by messages), the polled non-blocking call and a barrier,
      -- against the bare call
      assert.matches("fp cost    fp msgs     polled    barrier", out, 1, true)
      assert.matches("\nall_to_all +4 KiB +[%d.]+ +[%d.]+ +[%d.]+ +[%d.]+ +[-+][%d.]+%% +[-+][%d.]+%% +[-+][%d.]+%%", out)
    end)
  end)
end
do
  describe("bench/rng.lua", function()
    it("prints GB/s for rand next to memset/memcpy in the same run", function()
      local srcdir = os.getenv("srcdir") or "."
      local dtlua = os.getenv("DTLUA") or "./dtlua"
      local p = io.popen(string.format("timeout 60 %q %q 16 1 2>&1", dtlua, srcdir .. "/bench/rng.lua"))
      local out = p:read("a")
      p:close()
      assert.matches("memset", out, 1, true)
      assert.matches("memcpy", out, 1, true)
      assert.matches("rand[^\n]*GB/s", out)
    end)
  end)
end
do
  describe("bench/redistribute.lua", function()
    local H = require("tests.spec.support.launch_helpers")
    local srcdir = os.getenv("srcdir") or "."

    it("prints each transition against its bare collective, and C threads' strided and contiguous copies", function()
      local out, rc = H.run("-n 2 " .. H.sh_quote(srcdir .. "/bench/redistribute.lua") .. " 1 2")
      assert.are.equal(0, rc, out)
      for _, t in ipairs({"Shard%(1%)%->Replicate", "Partial%->Replicate", "Shard%(1%)%->Shard%(2%)", "Partial%->Shard%(1%)"}) do
        assert.matches(t .. " +[%d.]+ ms +[%w_]+ +[%d.]+ ms +ratio [%d.]+", out)
      end
      assert.matches("C threads, the same copies: column slabs [%d.]+ ms, contiguous [%d.]+ ms, ratio [%d.]+", out)
    end)
  end)
end
do
  describe("bench/autograd.lua", function()
    local H = require("tests.spec.support.launch_helpers")
    local srcdir = os.getenv("srcdir") or "."

    it("prints the recording overhead and the MLP step on 1 rank and tensor-parallel on 2 (quick: no PyTorch)", function()
      local out, rc = H.run("-n 2 " .. H.sh_quote(srcdir .. "/bench/autograd.lua") .. " quick")
      assert.are.equal(0, rc, out)
      assert.matches("# bench/autograd.lua: 2 rank(s), threads backend, quick; PyTorch n/a: quick run", out, 1, true)
      assert.matches("\n  recording overhead +[+-][%d.]+ +n/a +%(target <= 0.3%)", out)
      assert.matches("\nbackward through a 1000%-op chain, per op +[%d.]+", out)
      assert.matches("\n1 rank, %d+ BLAS threads %(PyTorch: %d+%) +[%d.]+ +n/a +n/a", out)
      assert.matches("\n2 ranks x %d+, tensor%-parallel %(PyTorch: %d+%) +[%d.]+ +n/a +n/a", out)
    end)
  end)
end
do
  describe("bench/train.lua", function()
    local H = require("tests.spec.support.launch_helpers")
    local srcdir = os.getenv("srcdir") or "."

    it("prints tokens/s of the demo GPT on 1x2 and 2x1 with the comm/compute/framework split (quick: no PyTorch)",
      function()
        local out, rc = H.run("-n 2 " .. H.sh_quote(srcdir .. "/bench/train.lua") .. " quick")
        assert.are.equal(0, rc, out)
        assert.matches("# bench/train%.lua: 2 rank%(s%), threads backend, %d+ BLAS thread%(s%) per rank, quick; PyTorch n/a: quick run", out)
        for _, mesh in ipairs {"1x2", "2x1"} do
          assert.matches("\n" .. mesh .. " +[%d.]+ +%d+ | +[%d.]+ +[%d.]+ +[-%d.]+ | +n/a +n/a +n/a", out)
          assert.matches("\ncollectives per step, " .. mesh .. ": all_reduce x%d+", out)
        end
      end)
  end)
end
do
  describe("bench/train_ops.lua", function()
    local H = require("tests.spec.support.launch_helpers")
    local srcdir = os.getenv("srcdir") or "."

    it("prints the step's forward/backward/optimizer and its ops in ms (quick: no PyTorch)", function()
      local out, rc = H.run(H.sh_quote(srcdir .. "/bench/train_ops.lua") .. " quick", "DTLUA_NUM_THREADS=2")
      assert.are.equal(0, rc, out)
      assert.matches("one rank, 2 threads %(dtlua and PyTorch%)", out)
      for _, piece in ipairs {"step: forward %+ loss", "step: backward", "step: clip %+ AdamW", "gelu %[B,L,4W%]",
                              "layer_norm %[B,L,W%]", "sdpa causal %[B,H,L,W/H%]", "softmax %[B,H,L,L%]"} do
        assert.matches("\n" .. piece .. " +[%d.]+ +n/a +n/a", out)
      end
    end)
  end)
end
do
  describe("bench/blas_cores.lua", function()
    it("prints sgemm GFLOP/s for each forced OpenBLAS core and dtlua's own pick, with ratios", function()
      if dt.config().blas ~= "openblas" then return end
      local srcdir = os.getenv("srcdir") or "."
      local dtlua = os.getenv("DTLUA") or "./dtlua"
      local p = io.popen(string.format("timeout 120 %q %q 64 1 2>&1", dtlua, srcdir .. "/bench/blas_cores.lua"))
      local out = p:read("a")
      p:close()
      assert.matches("sgemm 64x64, 1 thread%(s%)", out)
      assert.matches("\nOPENBLAS_CORETYPE=Prescott +[%d.]+ +[%d.]+", out)
      assert.matches("\ndtlua's own pick %(%S+%) +[%d.]+ +[%d.]+", out)
    end)
  end)
end
do
  describe("bench/fully_shard.lua", function()
    local H = require("tests.spec.support.launch_helpers")
    local srcdir = os.getenv("srcdir") or "."

    it("prints both runs' step times, collectives and bytes, and their ratios, on 2 ranks", function()
      local out, rc = H.run("-n 2 " .. H.sh_quote(srcdir .. "/bench/fully_shard.lua") .. " 1")
      assert.are.equal(0, rc, out)
      assert.matches("\nreplicated +[%d.]+ ms/step  all_gather +0  reduce_scatter +0", out)
      assert.matches("\nfully_shard +[%d.]+ ms/step  all_gather +5  reduce_scatter +3", out)
      local mem = tonumber(out:match("memory: ([%d.]+)"))
      assert.is_true(mem ~= nil and mem > 0.45 and mem < 0.55, out) -- half the bytes on 2 ranks
      assert.matches("fully_shard / replicated step time: [%d.]+", out)
    end)
  end)
end
do
  describe("bench/data_parallel.lua", function()
    local H = require("tests.spec.support.launch_helpers")
    local srcdir = os.getenv("srcdir") or "."

    it("prints data_parallel's (replayed and eager) and replicate's step times against the single device's, on 2 ranks", function()
      local out, rc = H.run("-n 2 " .. H.sh_quote(srcdir .. "/bench/data_parallel.lua") .. " 8 1")
      assert.are.equal(0, rc, out)
      assert.matches("MLP step, batch 8, 2 rank%(s%): single device [%d.]+ ms; data_parallel replayed [%d.]+ ms %([%d.]+x of "
        .. "single%); eager %(replay = false%) [%d.]+ ms %([%d.]+x of single%); replayed / eager [%d.]+; replicate [%d.]+ ms "
        .. "%([%d.]+x of single%); replayed / replicate [%d.]+", out)
    end)
  end)
end
