-- Sharding plugins seen from outside a run (dtlua -n 2 subprocesses under timeout): every *.lua
-- of the DTLUA_PLUGINS directories, in name order, errors naming the file; a module of rules
-- loaded with require.
local H = require("tests.spec.support.launch_helpers")

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p " .. H.sh_quote(d)))
  return d
end

local write = H.write

local count = H.count

describe("plugins: DTLUA_PLUGINS and required modules", function()
  local a, b = tmpdir(), tmpdir()
  write(a .. "/b_op.lua", [[
    local dt = ...
    dt.register_op {name = "plug_double", forward = function(x) return x * ORDER_FACTOR end,
                    sharding = function(s) return {{inputs = {s.inputs[1].placements}, output = s.inputs[1].placements}} end}
  ]])
  write(a .. "/a_first.lua", "ORDER_FACTOR = 2  -- runs before b_op.lua (name order)\n")
  write(a .. "/notes.txt", "not lua: never loaded\n")
  write(b .. "/rule.lua", [[
    local dt = ...
    dt.register_sharding("add", function(schema)  -- replicate everything: an all_gather per input
      local r = {}
      for m = 1, schema.mesh_ndim do r[m] = "R" end
      return {{inputs = {r, r}, output = r}}
    end)
  ]])
  local prog = [[
    local mesh = dt.init_device_mesh("cpu", {2})
    local X = dt.arange(6):to("float32")
    local x = dt.distribute_tensor(X, mesh, {"S1"})
    local y = dt.ops.plug_double(x)
    assert(dt.equal(y:full_tensor(), X * 2) and tostring(y.placements[1]) == "Shard(1)")
    local z
    local c = dt.comm_debug(function() z = x + x end)
    assert(c.all_gather == 2 and tostring(z.placements[1]) == "Replicate()", "the plugin rule is used")
    assert(dt.equal(z:full_tensor(), X + X))
    print("plugins ok " .. dt.rank())
  ]]

  it("loads every *.lua of the DTLUA_PLUGINS directories, in name order, with dt as argument", function()
    local out, rc = H.run("-n 2 -e " .. H.sh_quote(prog), "DTLUA_PLUGINS=" .. H.sh_quote(a .. ":" .. b))
    assert.are.equal(0, rc, out)
    assert.are.equal(2, count(out, "plugins ok %d"), out)
    os.execute("rm -rf " .. H.sh_quote(a) .. " " .. H.sh_quote(b))
  end)

  it("an error in a plugin names the file and carries its traceback; the run fails", function()
    local c = tmpdir()
    write(c .. "/broken.lua", "local function helper() error('plugin exploded') end\nhelper()\n")
    local out, rc = H.run("-n 2 -e 'print(1)'", "DTLUA_PLUGINS=" .. H.sh_quote(c))
    assert.are_not.equal(0, rc)
    assert.matches("DTLUA_PLUGINS: " .. c .. "/broken.lua: " .. c .. "/broken.lua:1: plugin exploded", out, 1, true)
    assert.matches("in local 'helper'", out, 1, true)
    assert(count(out, "rank %d: DTLUA_PLUGINS") >= 1, out)
    os.execute("rm -rf " .. H.sh_quote(c))
  end)

  it("a Lua module that registers rules, loaded with require", function()
    local d = tmpdir()
    write(d .. "/luaop_rules.lua", [[
      local dt = require "dtensor"
      dt.register_sharding("add", function(schema)
        local r = {}
        for m = 1, schema.mesh_ndim do r[m] = "R" end
        return {{inputs = {r, r}, output = r}}
      end)
      return true
    ]])
    local p = [[
      local mesh = dt.init_device_mesh("cpu", {2})
      local X = dt.arange(6):to("float32")
      local x = dt.distribute_tensor(X, mesh, {"S1"})
      local c = dt.comm_debug(function() local _ = x + x end)
      assert(#c.ops == 0, "the built-in rule: nothing moves")
      require "luaop_rules"
      local z
      c = dt.comm_debug(function() z = x + x end)
      assert(c.all_gather == 2 and dt.equal(z:full_tensor(), X + X))
      print("module ok " .. dt.rank())
    ]]
    local out, rc = H.run("-n 2 -e " .. H.sh_quote(p), "LUA_PATH=" .. H.sh_quote(d .. "/?.lua;;"))
    assert.are.equal(0, rc, out)
    assert.are.equal(2, count(out, "module ok %d"), out)
    os.execute("rm -rf " .. H.sh_quote(d))
  end)
end)
