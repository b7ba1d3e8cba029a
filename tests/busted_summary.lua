-- busted output handler: one line per failing test with its message, then
-- "specs: N passed, N failed" (errors count as failed) for scripts/run-tests to add up.
return function(options)
  local busted = require "busted"
  local handler = require "busted.outputHandlers.base"()
  local passed, failed = 0, 0

  local function report(t, kind)
    local where = t.element.trace and (t.element.trace.short_src .. ":" .. t.element.trace.currentline) or "?"
    local msg = t.message
    if type(msg) ~= "string" then msg = tostring(msg) end
    io.write(string.format("%s: %s\n  at %s\n  %s\n", kind, handler.getFullName(t.element), where,
      (msg or "nil"):gsub("\n", "\n  ")))
    if options.verbose and t.trace and t.trace.traceback then io.write(t.trace.traceback, "\n") end
  end

  handler.testEnd = function(element, parent, status)
    if status == "success" then
      passed = passed + 1
    elseif status == "failure" then
      failed = failed + 1
      report(handler.failures[#handler.failures], "FAIL")
    elseif status == "error" then
      failed = failed + 1
      report(handler.errors[#handler.errors], "ERROR")
    end
    return nil, true
  end

  handler.error = function(element, parent, message)
    failed = failed + 1
    io.write("ERROR (outside a test): ", tostring(message), "\n")
    return nil, true
  end

  handler.suiteEnd = function()
    io.write(string.format("specs: %d passed, %d failed\n", passed, failed))
    io.flush()
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
