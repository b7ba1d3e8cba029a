-- What `make install` and `luarocks make` give a Lua user: a stock lua5.4 that requires
-- "dtensor" with the LUA_PATH/LUA_CPATH README.md names, the dtlua-busted runner (specs on
-- several ranks, one summary), and the rockspec in the source tree.  Installs into temporary
-- prefixes; needs the build tree (builddir, set by make check; the current directory otherwise).
local S = require("tests.spec.support.spec_helpers")

local builddir = os.getenv("builddir") or "."
local srcdir = os.getenv("srcdir") or "."
local sh_quote = S.sh_quote

local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1; echo \"rc=$?\"")
  local out = p:read("a")
  p:close()
  return out:gsub("rc=%d+\n?$", ""), tonumber(out:match("rc=(%d+)\n?$"))
end

local function tmpdir()
  local out = sh("mktemp -d")
  return out:match("[^\n]+")
end

-- make, without the jobserver of an enclosing make check
local MAKE = "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C " .. sh_quote(builddir)

-- A sanitizer build's module needs its runtime loaded first in a stock lua5.4 (which is not
-- linked with it): preload the libasan the module names, leak checks off (not this test's).
local function sanitizer_env(so)
  local lib = sh("ldd " .. sh_quote(so) .. " 2>/dev/null"):match("=>%s*(%S*libasan%.so[%.%d]*)")
  return lib and ("LD_PRELOAD=" .. sh_quote(lib) .. " ASAN_OPTIONS=detect_leaks=0 ") or ""
end

-- the variables README.md tells a user to set after an install into prefix p
local function lua_env(p)
  return sanitizer_env(p .. "/lib/lua/5.4/dtensor/core.so") ..
         string.format("LUA_PATH=%s LUA_CPATH=%s", sh_quote(p .. "/share/lua/5.4/?.lua;" .. p ..
                       "/share/lua/5.4/?/init.lua;;"), sh_quote(p .. "/lib/lua/5.4/?.so;;"))
end

describe("installing dtlua for Lua users", function()
  local prefix
  setup(function()
    prefix = tmpdir()
    local out, rc = sh(MAKE .. " install prefix=" .. sh_quote(prefix))
    assert.are.equal(0, rc, out)
  end)
  teardown(function() if prefix then os.execute("rm -rf " .. sh_quote(prefix)) end end)

  it("a stock lua5.4 requires dtensor from the prefix with README's LUA_PATH and LUA_CPATH", function()
    local prog = "local dt = require 'dtensor' print((dt.arange(6):reshape(2, 3):float():sum(2)):tolist()[2])"
    local out, rc = sh(lua_env(prefix) .. " lua5.4 -e " .. sh_quote(prog))
    assert.are.equal(0, rc, out)
    assert.are.equal("12.0\n", out)
    -- without them the module is not found: the test above used the prefix
    out, rc = sh("LUA_PATH=';;' LUA_CPATH=';;' lua5.4 -e " .. sh_quote("package.path = '' require 'dtensor'"))
    assert.are_not.equal(0, rc, out)
  end)

  it("dtlua-busted runs one's specs on several ranks and prints one summary", function()
    local dir = tmpdir()
    local f = assert(io.open(dir .. "/ranks_spec.lua", "w"))
    f:write([[
describe("on every rank", function()
  it("all_reduce sums the ranks", function()
    local n = dt.world_size()
    assert.are.equal(n * (n - 1) / 2, dt.distributed.all_reduce(dt.tensor({dt.rank()})):item())
  end)
  it("fails on rank 1 only", function() assert.are_not.equal(1, dt.rank()) end)
end)
]])
    f:close()
    local out, rc = sh(sh_quote(prefix .. "/bin/dtlua-busted") .. " -n 4 " .. sh_quote(dir))
    assert.are_not.equal(0, rc, out)
    local _, summaries = out:gsub("spmd specs: ", "")
    assert.are.equal(1, summaries, out)
    assert.matches("spmd specs: 1 passed, 1 failed", out, 1, true)
    assert.matches("rank 1: FAIL: fails on rank 1 only", out, 1, true)
    os.remove(dir .. "/ranks_spec.lua")
    f = assert(io.open(dir .. "/ranks_spec.lua", "w"))
    f:write("describe('x', function() it('has ranks', function() assert.are.equal(3, dt.world_size()) end) end)\n")
    f:close()
    out, rc = sh(sh_quote(prefix .. "/bin/dtlua-busted") .. " -n 3 " .. sh_quote(dir))
    assert.are.equal(0, rc, out)
    assert.matches("spmd specs: 1 passed, 0 failed", out, 1, true)
    os.execute("rm -rf " .. sh_quote(dir))
  end)
end)

describe("the LuaRocks rockspec", function()
  it("`luarocks make` builds and installs require 'dtensor' for a stock lua5.4", function()
    if not sh("command -v luarocks"):match("luarocks") then
      print("install_spec: luarocks is not installed (apt-get install luarocks): rockspec test skipped")
      return
    end
    -- a copy of the source tree: luarocks make configures and builds where it runs
    local work = tmpdir()
    local out, rc = sh("cd " .. sh_quote(srcdir) .. " && git rev-parse --is-inside-work-tree >/dev/null && " ..
                       "{ git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -C " ..
                       sh_quote(work) .. " -xf -; }")
    if rc ~= 0 then
      print("install_spec: the source tree is not a git checkout: rockspec test skipped")
      os.execute("rm -rf " .. sh_quote(work))
      return
    end
    local tree = work .. "/rocks"
    out, rc = sh("cd " .. sh_quote(work) .. " && luarocks --lua-version=5.4 --tree=" .. sh_quote(tree) ..
                 " make dtensor-scm-1.rockspec")
    assert.are.equal(0, rc, out)
    local env = string.format("LUA_PATH=%s LUA_CPATH=%s", sh_quote(tree .. "/share/lua/5.4/?.lua;" .. tree ..
                              "/share/lua/5.4/?/init.lua;;"), sh_quote(tree .. "/lib/lua/5.4/?.so;;"))
    out, rc = sh(env .. " lua5.4 -e " .. sh_quote("print(require('dtensor').ones(2, 3):sum():item())"))
    assert.are.equal(0, rc, out)
    assert.are.equal("6.0\n", out)
    out, rc = sh(sh_quote(tree .. "/bin/dtlua") .. " -n 2 -e " .. sh_quote("print(dt.rank())"))
    assert.are.equal(0, rc, out)
    os.execute("rm -rf " .. sh_quote(work))
  end)
end)
