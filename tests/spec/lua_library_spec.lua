-- The Lua library's composition contract (lua/dtensor/init.lua): each module returns a table
-- and writes nowhere when required; init.lua alone installs the modules' functions into dt,
-- dt.Tensor, dt.nn (dt.nn.functional and dt.nn.utils included) and dt.utils, starting from a
-- copy of the C core, which stays as C made it.
local LIBRARY = {"dtensor.dtensor", "dtensor.dispatch", "dtensor.dtensor_ops", "dtensor.dtensor_nn", "dtensor.autograd",
                 "dtensor.optim", "dtensor.amp", "dtensor.utils",
                 "dtensor.nn.module", "dtensor.nn.initializers", "dtensor.nn.linear", "dtensor.nn.embedding",
                 "dtensor.nn.normalization", "dtensor.nn.dropout", "dtensor.nn.activation", "dtensor.nn.containers",
                 "dtensor.nn.loss", "dtensor.parallel"}
local FIELDS = {module = true, methods = true, functional = true, with_dt = true, nn = true, utils = true, nn_utils = true}
-- with the helper modules the library's modules require (installed nowhere)
local SAVED = {"dtensor", "dtensor.core", "dtensor.nn.functional", "dtensor.nn.checks", "dtensor.nn.state_dict",
               "dtensor.nn.module_repr", "dtensor.optim.optimizer", "dtensor.optim.check", "dtensor.optim.sgd",
               "dtensor.optim.adam", "dtensor.optim.lr_scheduler", "dtensor.optim.clip_grad", "dtensor.utils.progress",
               "dtensor.utils.plot", "dtensor.utils.jsonl", "dtensor.utils.sparkline", "dtensor.parallel.layouts",
               "dtensor.parallel.style", "dtensor.parallel.distribute_module", "dtensor.parallel.linear_styles",
               "dtensor.parallel.sequence_parallel", "dtensor.parallel.prepare_module", "dtensor.parallel.parallelize",
               "dtensor.parallel.loss", "dtensor.parallel.buckets", "dtensor.parallel.replicate", "dtensor.value_text",
               "dtensor.placements_text",
               table.unpack(LIBRARY)}

local function snapshot(t)
  local s = {}
  for k, v in pairs(t) do s[k] = v end
  return s
end

-- a table that reads through to t (pairs included) and raises on any write
local function read_only(t, what)
  return setmetatable({}, {__index = t, __pairs = function() return next, t, nil end,
                           __newindex = function(_, k) error("wrote " .. what .. "." .. tostring(k), 2) end})
end

-- a table whose every use raises: a module must not reach for the composed dt
local function forbidden(what)
  local function refuse(_, k) error("read " .. what .. "." .. tostring(k), 2) end
  return setmetatable({}, {__index = refuse, __newindex = refuse})
end

-- runs f with package.loaded[name] = loaded[name] for each saved name (nil: not loaded, so
-- required afresh) and the global dt forbidden; everything restored afterwards
local function with_loaded(loaded, f)
  local saved, global_dt = {}, rawget(_G, "dt")
  for _, name in ipairs(SAVED) do saved[name] = package.loaded[name] end
  for _, name in ipairs(SAVED) do package.loaded[name] = loaded[name] end
  rawset(_G, "dt", forbidden("the global dt"))
  local res = table.pack(pcall(f))
  for _, name in ipairs(SAVED) do package.loaded[name] = saved[name] end
  rawset(_G, "dt", global_dt)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

local function loader_of(name)
  for _, searcher in ipairs(package.searchers) do
    local f, extra = searcher(name)
    if type(f) == "function" then return f, extra end
  end
  error("no loader for " .. name)
end

local function is_c(f) return debug.getinfo(f, "S").what == "C" end

describe("the Lua library's modules", function()
  local core = require "dtensor.core"

  for _, name in ipairs(LIBRARY) do
    it(name .. " returns a table of functions by target and writes nowhere when required", function()
      local before = {dt = snapshot(dt), methods = snapshot(dt.Tensor), F = snapshot(dt.nn.functional), nn = snapshot(dt.nn)}
      local m = with_loaded({["dtensor.core"] = read_only(core, "dtensor.core"), dtensor = forbidden("dtensor")},
                            function() return require(name) end)
      assert.are.equal("table", type(m))
      local declared = 0
      for field, v in pairs(m) do
        if FIELDS[field] then
          for key, fn in pairs(v) do
            assert.are.equal("string", type(key), name .. "." .. field)
            assert(type(fn) == "function" or ((field == "module" or field == "nn") and type(fn) == "table"),
                   name .. "." .. field .. "." .. key)
            declared = declared + 1
          end
        else
          assert.are.equal("function", type(v), name .. ": a helper field is a function: " .. field)
        end
      end
      assert(declared > 0, name .. " declares nothing")
      assert.are.same(before, {dt = snapshot(dt), methods = snapshot(dt.Tensor), F = snapshot(dt.nn.functional),
                               nn = snapshot(dt.nn)})
    end)
  end

  it("dtensor.nn.functional is a plain table of functions that writes nowhere when required", function()
    local F = with_loaded({["dtensor.core"] = read_only(core, "dtensor.core"), dtensor = forbidden("dtensor")},
                          function() return require "dtensor.nn.functional" end)
    for key, fn in pairs(F) do assert.are.equal("function", type(fn), key) end
    assert.are.equal("function", type(F.embedding))
  end)
end)

describe("init.lua's composition", function()
  local core = require "dtensor.core"

  it("exposes every name each module declares, as installed", function()
    for _, name in ipairs(LIBRARY) do
      local m = require(name)
      for key, fn in pairs(m.module or {}) do assert.are.equal(fn, dt[key], name .. ": dt." .. key) end
      for key, fn in pairs(m.methods or {}) do assert.are.equal(fn, dt.Tensor[key], name .. ": method " .. key) end
      for key, fn in pairs(m.functional or {}) do assert.are.equal(fn, dt.nn.functional[key], name .. ": F." .. key) end
      for key in pairs(m.with_dt or {}) do assert.are.equal("function", type(dt[key]), name .. ": dt." .. key) end
      for key, v in pairs(m.nn or {}) do assert.are.equal(v, dt.nn[key], name .. ": dt.nn." .. key) end
      for key, fn in pairs(m.utils or {}) do assert.are.equal(fn, dt.utils[key], name .. ": dt.utils." .. key) end
      for key, fn in pairs(m.nn_utils or {}) do assert.are.equal(fn, dt.nn.utils[key], name .. ": dt.nn.utils." .. key) end
    end
    -- dt.utils gathers several modules' utils
    assert.are.equal("function", type(dt.utils.checkpoint))
    assert.are.equal("function", type(dt.utils.progress))
    assert.are.equal("function", type(dt.nn.utils.clip_grad_norm_))
    assert.are.equal(dt.nn.functional, dt.F)
    for key in pairs(require "dtensor.nn.functional") do assert.are.equal("function", type(dt.F[key]), "F." .. key) end
  end)

  it("starts from the C core and never writes into it (but its method table, which tensors read)", function()
    assert.are_not.equal(core, dt)
    assert.are.equal(core.Tensor, dt.Tensor)
    for key, v in pairs(core) do
      assert(dt[key] ~= nil, "dt." .. key .. " is missing")
      if type(v) == "function" then assert(is_c(v), "dtensor.core." .. key .. " is not the C function") end
    end
    -- the wrappers' plain paths reach the C functions they wrap
    assert.are.equal(3, dt.tensor({3}):item())
    assert.is_true(dt.equal(dt.ones(2), dt.ones(2)))
    assert.are.same({2, 3}, dt.zeros_like(dt.ones(2, 3)):size())
  end)

  -- init.lua run afresh on a read-only core whose method table is a copy: every module is
  -- required again, so nothing of the running dt is shared
  local function compose(loaded)
    local base = snapshot(core)
    base.Tensor = snapshot(core.Tensor)
    local fake = read_only(base, "dtensor.core")
    loaded["dtensor.core"] = fake
    local load = loader_of("dtensor")
    return with_loaded(loaded, function() return load("dtensor") end), fake
  end

  it("composes a fresh dt without writing into the core or the running dt", function()
    local before = {dt = snapshot(dt), methods = snapshot(dt.Tensor), F = snapshot(dt.nn.functional), nn = snapshot(dt.nn)}
    local dt2, fake = compose({})
    assert.are_not.equal(dt, dt2)
    assert.are.equal(fake.Tensor, dt2.Tensor)
    assert.are.equal("dtlua 0.1.0", dt2._VERSION)
    for key in pairs(dt) do assert(dt2[key] ~= nil, "dt." .. key .. " missing from a fresh composition") end
    for key in pairs(dt.nn.functional) do assert(dt2.F[key] ~= nil, "F." .. key .. " missing") end
    for key in pairs(dt.nn) do assert(dt2.nn[key] ~= nil, "dt.nn." .. key .. " missing") end
    assert.is_false(rawequal(dt.nn.Module, dt2.nn.Module), "required afresh: classes are not shared")
    assert.are.same(before, {dt = snapshot(dt), methods = snapshot(dt.Tensor), F = snapshot(dt.nn.functional),
                             nn = snapshot(dt.nn)})
  end)

  it("refuses a module that replaces another module's function", function()
    local ok, err = pcall(compose, {["dtensor.dtensor_nn"] = {module = {zeros_like = function() end}}})
    assert.is_false(ok)
    assert.matches("dtensor.dtensor_nn: module.zeros_like is already installed by dtensor.dtensor_ops", err, 1, true)
    ok, err = pcall(compose, {["dtensor.utils"] = {utils = {checkpoint = function() end}}})
    assert.is_false(ok)
    assert.matches("dtensor.utils: utils.checkpoint is already installed by dtensor.autograd", err, 1, true)
  end)

  it("refuses a module that replaces dt.utils or dt.nn, which init.lua composes", function()
    local ok, err = pcall(compose, {["dtensor.utils"] = {module = {utils = {}}}})
    assert.is_false(ok)
    assert.matches("dtensor.utils: module.utils would replace dt.utils, which init.lua composes: use the utils fields", err, 1, true)
    ok, err = pcall(compose, {["dtensor.optim"] = {module = {nn = {}}}})
    assert.is_false(ok)
    assert.matches("module.nn would replace dt.nn", err, 1, true)
  end)

  it("installs the nn field into dt.nn, and keeps dt.nn.functional", function()
    assert.are.equal(require("dtensor.nn.module").nn.Module, dt.nn.Module)
    local ok, err = pcall(compose, {["dtensor.autograd"] = {nn = {functional = {}}}})
    assert.is_false(ok)
    assert.matches("dtensor.autograd: nn.functional is already installed by dtensor.nn.functional", err, 1, true)
    ok, err = pcall(compose, {["dtensor.autograd"] = {nn = {utils = {}}}})
    assert.is_false(ok)
    assert.matches("dtensor.autograd: nn.utils is already installed by init.lua (the nn_utils field fills dt.nn.utils)", err, 1, true)
  end)
end)
