-- Small assertion helpers shared by the plain specs (create, tensor, view, pointwise, reduce,
-- linalg, join, nn, io, interpreter specs): an error's message, an expected error, numbers
-- within a tolerance, temporary paths, the built dtlua run as a subprocess, and a PRNG that
-- draws the same cases on every rank.
local assert = require "luassert"
local M = {}

M.DTLUA = os.getenv("DTLUA") or "./dtlua"

function M.sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Runs the built dtlua with args (stdin optional, an env prefix optional) under timeout(1);
-- returns its output (stdout+stderr) and exit status.
function M.run(args, stdin, env)
  local cmd = string.format("%s timeout 60 %s %s 2>&1", env or "", M.sh_quote(M.DTLUA), args)
  if stdin then cmd = "printf %s " .. M.sh_quote(stdin) .. " | " .. cmd end
  local p = io.popen(cmd .. "; echo \"rc=$?\"")
  local out = p:read("a")
  p:close()
  local rc = tonumber(out:match("rc=(%d+)\n?$"))
  return out:gsub("rc=%d+\n?$", ""), rc
end

-- The message of the error f(...) raises (the test fails when none is raised).
function M.err(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

-- Asserts that f(...) fails with a message containing msg (plain text).
function M.fails(msg, f, ...)
  local e = M.err(f, ...)
  assert.is_truthy(e:find(msg, 1, true), "expected '" .. msg .. "' in: " .. e)
end

-- Numbers (or nested lists of numbers) equal within tol (default 1e-6).
function M.close(expected, actual, tol)
  tol = tol or 1e-6
  if type(expected) == "table" then
    assert.are.equal(#expected, #actual)
    for i = 1, #expected do M.close(expected[i], actual[i], tol) end
  else
    assert.is_true(math.abs(expected - actual) <= tol, ("expected %.9g, got %.9g"):format(expected, actual))
  end
end

-- A PRNG seeded alike on every rank: r.int(lo, hi) (inclusive) and r.pick(list).  Also the
-- generator of the op-table cases (op_cases.lua) and of the DTensor specs (dtensor_helpers.lua).
function M.prng(seed) -- Park-Miller: deterministic and identical on every rank
  local s = seed
  local r = {}
  function r.int(lo, hi)
    s = (s * 48271) % 2147483647
    return lo + s % (hi - lo + 1)
  end
  function r.pick(list) return list[r.int(1, #list)] end
  return r
end

-- A training step: zero_grad, the mean-square loss of forward(x) against y, backward, the
-- optimizer's step; returns the loss (the graph-capture specs compile it).
function M.mse_step(forward, opt)
  return function(x, y)
    opt:zero_grad()
    local d = forward(x) - y
    local loss = (d * d):mean()
    loss:backward()
    opt:step()
    return loss
  end
end

-- A fresh temporary path ending in suffix (nothing created).
function M.tmpname(suffix)
  local n = os.tmpname()
  os.remove(n)
  return n .. suffix
end

return M
