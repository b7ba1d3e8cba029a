-- busted output handler: one line per failing test with its message, then
-- "specs: N passed, N failed" (errors count as failed) for scripts/run-tests to add up.
-- SPMD-aware: under several ranks (dtlua -n N, mpirun) every rank runs the same tests; at
-- the end the per-test failure flags are all-reduced (max), so a test passes only if it
-- passed on every rank, and rank 0 prints "spmd specs: ..." once for the world.
return function(options)
  local busted = require "busted"
  local handler = require "busted.outputHandlers.base"()
  local dtm = rawget(_G, "dt")
  local nranks = dtm and dtm.world_size and dtm.world_size() or 1
  local rank = nranks > 1 and dtm.rank() or 0
  local where_rank = nranks > 1 and string.format("rank %d: ", rank) or ""
  local flags = {} -- per test, in run order: 1 failed/errored here, 0 passed
  local outside = 0 -- errors outside any test

  local function report(t, kind)
    local where = t.element.trace and (t.element.trace.short_src .. ":" .. t.element.trace.currentline) or "?"
    local msg = t.message
    if type(msg) ~= "string" then msg = tostring(msg) end
    io.write(string.format("%s%s: %s\n  at %s\n  %s\n", where_rank, kind, handler.getFullName(t.element), where,
      (msg or "nil"):gsub("\n", "\n  ")))
    if options.verbose and t.trace and t.trace.traceback then io.write(t.trace.traceback, "\n") end
  end

  handler.testEnd = function(element, parent, status)
    if status == "success" then
      flags[#flags + 1] = 0
    elseif status == "failure" then
      flags[#flags + 1] = 1
      report(handler.failures[#handler.failures], "FAIL")
    elseif status == "error" then
      flags[#flags + 1] = 1
      report(handler.errors[#handler.errors], "ERROR")
    end
    return nil, true
  end

  handler.error = function(element, parent, message)
    outside = outside + 1
    io.write(where_rank, "ERROR (outside a test): ", tostring(message), "\n")
    return nil, true
  end

  -- Combines the ranks' verdicts; returns passed, failed for the world.
  local function combine()
    local D = dtm.distributed
    local n = #flags
    local counts = D.all_reduce(dtm.tensor({n, -n, outside}, {dtype = "int64"}), "max"):totable()
    if counts[1] ~= -counts[2] then
      io.write(where_rank, string.format("ERROR: ranks ran different numbers of tests (%d to %d)\n", -counts[2], counts[1]))
      return 0, counts[1]
    end
    local failed = counts[3] -- errors outside tests on any rank count once
    if n == 0 then return 0, failed end
    local all = D.all_reduce(dtm.tensor(flags, {dtype = "int32"}), "max"):totable()
    local passed = 0
    for i = 1, n do
      if all[i] == 0 then passed = passed + 1 else failed = failed + 1 end
    end
    return passed, failed
  end

  handler.suiteEnd = function()
    if nranks > 1 then
      local passed, failed = combine()
      if rank == 0 then io.write(string.format("spmd specs: %d passed, %d failed\n", passed, failed)) end
      io.flush()
      dtm.barrier() -- rank 0 has printed before any rank's failure exit tears the world down
    else
      local failed = outside
      local passed = 0
      for _, f in ipairs(flags) do
        if f == 0 then passed = passed + 1 else failed = failed + 1 end
      end
      io.write(string.format("specs: %d passed, %d failed\n", passed, failed))
      io.flush()
    end
    return nil, true
  end

  busted.subscribe({"test", "end"}, handler.testEnd, {predicate = handler.cancelOnPending})
  busted.subscribe({"error", "file"}, handler.error)
  busted.subscribe({"failure", "file"}, handler.error)
  busted.subscribe({"error", "describe"}, handler.error)
  busted.subscribe({"failure", "describe"}, handler.error)
  busted.subscribe({"suite", "end"}, handler.suiteEnd)
  return handler
end
