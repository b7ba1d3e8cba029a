-- Temporaries are returned promptly: loops of op calls that make a new tensor each time and
-- never call collectgarbage keep the process's resident memory and the Lua heap flat (the
-- collector is told the bytes behind each tensor, see step_collector in l_tensor.c).

local mem = dofile("tests/spec/support/process_memory.lua")
local rss_bytes, sanitized = mem.rss_bytes, mem.sanitized -- (mem.minor_faults too)

-- Runs f n times after a warm-up; returns the growth of the Lua heap (KiB) and of resident
-- memory (MiB, nil where it cannot be measured), neither measured after a collection.
local function growth(n, f)
  for _ = 1, 2000 do f() end
  local measure_rss = rss_bytes() ~= nil and not sanitized()
  local heap0, rss0 = collectgarbage("count"), measure_rss and rss_bytes()
  for _ = 1, n do f() end
  local heap1, rss1 = collectgarbage("count"), measure_rss and rss_bytes()
  return heap1 - heap0, rss1 and (rss1 - rss0) / 2 ^ 20
end

describe("tensor memory in long loops", function()
  it("100k calls of a + b on 1 element keep the heap and resident memory flat", function()
    local a, b = dt.ones({1}), dt.full({1}, 2)
    local last
    local heap, rss = growth(100000, function() last = a + b end)
    assert.are.same({3}, last:totable())
    assert(heap < 1024, string.format("the Lua heap grew by %.0f KiB over 100k calls", heap))
    if rss then assert(rss < 16, string.format("resident memory grew by %.1f MiB over 100k calls", rss)) end
  end)

  it("100k calls making 4 KiB tensors (400 MB in all) keep resident memory flat", function()
    local a = dt.arange(1024):float()
    local last
    local heap, rss = growth(100000, function() last = a * 2 end)
    assert.are.equal(2 * 1023, last:totable()[1024])
    assert(heap < 1024, string.format("the Lua heap grew by %.0f KiB over 100k calls", heap))
    if rss then assert(rss < 16, string.format("resident memory grew by %.1f MiB over 100k calls", rss)) end
  end)

  it("a loop of 4 MiB temporaries frees them in young collections, never a full one", function()
    -- An old object is freed only by a full collection: it must survive 200 calls (800 MiB made).
    collectgarbage()
    local old_freed = false
    local sentinel = setmetatable({}, {__gc = function() old_freed = true end})
    collectgarbage()
    collectgarbage() -- sentinel is old now
    sentinel = nil
    local a = dt.ones({1024, 1024})
    local heap, rss = growth(200, function() local _ = a * 2 end)
    assert.is_false(old_freed, "a full collection ran inside a loop whose temporaries die young")
    assert(heap < 1024, string.format("the Lua heap grew by %.0f KiB over 200 calls", heap))
    if rss then assert(rss < 64, string.format("resident memory grew by %.1f MiB over 200 calls", rss)) end
    collectgarbage()
    assert.is_true(old_freed)
  end)

  -- A fresh process: the collector's and the allocator's state after other specs would hide both.
  local function fresh(script)
    local dtlua = os.getenv("DTLUA") or "./dtlua"
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write(script)
    f:close()
    local p = io.popen(string.format("timeout 60 %q %q 2>&1", dtlua, path))
    local out = p:read("a")
    p:close()
    os.remove(path)
    return out
  end

  it("a loop of 64 KiB-2 MiB temporaries reuses their blocks instead of faulting pages in", function()
    -- Both halves: the block cache keeps freed blocks from 16 KiB (glibc gave their pages back),
    -- and a result held in a variable until the next one is made is still freed young (the
    -- collector once aged it at birth; 128 results then waited for a full collection, more than
    -- the cache holds).
    if not mem.minor_faults() or sanitized() then return end -- no /proc, or ASan's own allocator
    local out = fresh([[
      local mem = dofile("tests/spec/support/process_memory.lua")
      for _, kib in ipairs({64, 256, 1024}) do
        local a, b, y = dt.ones({kib * 256}), dt.ones({kib * 256})
        for _ = 1, 50 do y = a + b end
        local f0 = mem.minor_faults()
        for _ = 1, 500 do y = a + b end
        print(kib, (mem.minor_faults() - f0) / 500)
      end
      -- two ops a call: some results age into the old generation and come back in bursts
      -- at a full collection (every 32 MiB), more blocks at once than a few slots hold
      for _, kib in ipairs({256, 2048}) do
        local a, b, y = dt.ones({kib * 256}), dt.ones({kib * 256})
        for _ = 1, 600 do y = (a + b) * 2 end
        local f0 = mem.minor_faults()
        for _ = 1, 300 do y = (a + b) * 2 end
        print(kib, (mem.minor_faults() - f0) / 300)
      end
    ]])
    for kib, per_call in out:gmatch("(%d+)\t(%S+)\n") do
      assert(tonumber(per_call) < 2, string.format("%s KiB adds: %s page faults a call (a fresh block each time)", kib, per_call))
    end
    assert.are.equal(5, select(2, out:gsub("\n", "")), out)
  end)

  it("4 MiB tensors that outlive the young generation are still collected", function()
    -- each is held for 3 calls (past two young collections: old), then dropped: only a full
    -- collection frees it, and one must come before 200 of them (800 MiB) pile up
    local a, ring = dt.ones({1024, 1024}), {}
    local heap, rss = growth(200, function()
      table.insert(ring, a * 2)
      if #ring > 3 then table.remove(ring, 1) end
    end)
    assert.are.equal(2, ring[3]:sum():item() / (1024 * 1024))
    assert(heap < 1024, string.format("the Lua heap grew by %.0f KiB over 200 calls", heap))
    if rss then assert(rss < 256, string.format("resident memory grew by %.1f MiB over 200 calls", rss)) end
  end)

  it("t:release() and <close> free a tensor at once; using it afterwards is an error", function()
    local t = dt.ones({4})
    t:release()
    local ok, err = pcall(function() return t + 1 end)
    assert.is_false(ok)
    assert.matches("released", tostring(err))
    local closed
    do
      local c <close> = dt.ones({4})
      closed = c
      assert.are.same({1, 1, 1, 1}, c:totable())
    end
    ok, err = pcall(function() return closed:sum() end)
    assert.is_false(ok)
    assert.matches("released", tostring(err))
  end)
end)
