-- dt.checkpoint end to end through dtlua subprocesses: a checkpoint saved by one world size
-- loads on another; the GPT demo resumes on another mesh with identical losses; and real
-- clients -- the Python `safetensors` package reads dtlua's checkpoint and its consolidated
-- file, and dtlua loads a sharded checkpoint that package wrote (a plain weight_map).
local launch = dofile("tests/spec/support/launch_helpers.lua")
local q = launch.sh_quote

local function tmpdir()
  local p = os.tmpname()
  os.remove(p)
  return p
end

local write = launch.write

local function rmtree(p) os.execute("rm -rf " .. q(p) .. " " .. q(p .. ".dtlua-tmp")) end

-- a state with random placements per rank count; the values depend on the names only
local SAVE = [==[
local dir, mesh_shape = arg[1], {}
for s in arg[2]:gmatch("%d+") do mesh_shape[#mesh_shape + 1] = tonumber(s) end
local mesh = dt.init_device_mesh("cpu", mesh_shape)
local P = {dt.Shard(1), dt.Shard(2), dt.Replicate()}
local function val(shape, k, dtype)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return ((dt.arange(n):to("float64") * (0.3 + k)):sin():reshape(shape) * 5):to(dtype)
end
local SPECS = {{"emb", {11, 6}, "float32"}, {"w", {7, 5}, "float64"}, {"b", {5}, "float64"}, {"ids", {9, 2}, "int64"},
               {"mask", {4, 3}, "uint8"}, {"half", {6, 2}, "float16"}, {"empty", {0, 3}, "float32"}}
local state = {model = {}, step = 7}
for k, s in ipairs(SPECS) do
  local pl = {}
  for m = 1, #mesh_shape do pl[m] = P[(k + m) % #P + 1] end
  if #s[2] == 1 then for m = 1, #pl do if pl[m].dim == 2 then pl[m] = dt.Replicate() end end end
  state.model[s[1]] = dt.distribute_tensor(val(s[2], k, s[3]), mesh, pl)
end
]==]

local LOAD = [==[
local mesh_shape = {}
for s in arg[2]:gmatch("%d+") do mesh_shape[#mesh_shape + 1] = tonumber(s) end
local mesh = dt.init_device_mesh("cpu", mesh_shape)
local target, want = {model = {}}, dt.load(arg[3])
local names = {}
for name in pairs(want) do names[#names + 1] = name end
table.sort(names)
for i, name in ipairs(names) do
  local short = name:gsub("^model%.", "")
  local pl = {}
  for m = 1, #mesh_shape do pl[m] = (i + m) % 2 == 0 and dt.Shard(1) or dt.Replicate() end
  target.model[short] = dt.distribute_tensor(dt.zeros(want[name]:size(), {dtype = want[name].dtype}), mesh, pl)
end
dt.checkpoint.load(target, arg[1])
local bad = 0
for _, name in ipairs(names) do
  local got = target.model[(name:gsub("^model%.", ""))]:full_tensor()
  if not dt.equal(got, want[name]) then bad = bad + 1 print("differs: " .. name) end
end
dt.print0(string.format("loaded %d tensors, %d differ", #names, bad))
]==]

describe("dt.checkpoint across runs", function()
  local dir, ref, save_lua, load_lua
  setup(function()
    dir, ref = tmpdir(), os.tmpname() .. ".safetensors"
    save_lua, load_lua = os.tmpname() .. ".lua", os.tmpname() .. ".lua"
    write(save_lua, SAVE .. [==[
dt.checkpoint.save(state, dir)
local full = {}
for _, sp in ipairs(SPECS) do full["model." .. sp[1]] = state.model[sp[1]]:full_tensor() end -- in one order on every rank
if dt.rank() == 0 then dt.save(full, arg[3]) end
]==])
    write(load_lua, LOAD)
  end)
  teardown(function()
    rmtree(dir)
    os.remove(ref)
    os.remove(save_lua)
    os.remove(load_lua)
  end)

  it("loads on another world size and mesh (saved on 4 ranks as 2x2, loaded on 3, 1 and under mpirun on 2)", function()
    local out, rc = launch.run("-n 4 " .. save_lua .. " " .. q(dir) .. " 2x2 " .. q(ref))
    assert.are.equal(0, rc, out)
    for _, r in ipairs {{3, "3"}, {1, "1"}, {2, "1x2"}} do
      out, rc = launch.run("-n " .. r[1] .. " " .. load_lua .. " " .. q(dir) .. " " .. r[2] .. " " .. q(ref))
      assert.are.equal(0, rc, out)
      assert.matches("loaded 7 tensors, 0 differ", out, 1, true)
    end
    local mpi = launch.mpirun_prefix()
    if mpi then
      out, rc = launch.capture(mpi .. " -np 2 " .. q(launch.DTLUA) .. " " .. load_lua .. " " .. q(dir) .. " 2 " .. q(ref))
      assert.are.equal(0, rc, out)
      assert.matches("loaded 7 tensors, 0 differ", out, 1, true)
    else
      print("skip: no mpirun or no MPI build: the mpirun load is not run")
    end
  end)

  it("consolidate writes one safetensors file equal to the full tensors", function()
    local one = os.tmpname() .. ".safetensors"
    local out, rc = launch.run("-n 2 -e " .. q("dt.checkpoint.consolidate(" .. string.format("%q", dir) .. ", " ..
                               string.format("%q", one) .. ")"))
    assert.are.equal(0, rc, out)
    local got, want = dt.load(one), dt.load(ref)
    local n = 0
    for name, t in pairs(want) do
      assert(dt.equal(got[name], t), name)
      n = n + 1
    end
    assert.are.equal(7, n)
    os.remove(one)
  end)
end)

describe("an async save in flight when the program ends", function()
  it("is written and committed (the writer is joined at exit)", function()
    local dir = tmpdir()
    local prog = "local m = dt.init_device_mesh('cpu', {dt.world_size()}) " ..
                 "local w = dt.distribute_tensor(dt.arange(4096):to('float64'):reshape(64, 64), m, {dt.Shard(1)}) " ..
                 "dt.checkpoint.save({w = w, step = 3}, " .. string.format("%q", dir) .. ", {async = true})"
    local out, rc = launch.run("-n 3 -e " .. q(prog))
    assert.are.equal(0, rc, out)
    local check = "local t = {w = dt.zeros(64, 64, {dtype = 'float64'})} dt.checkpoint.load(t, " ..
                  string.format("%q", dir) .. ") print(dt.equal(t.w, dt.arange(4096):to('float64'):reshape(64, 64)), t.step)"
    out, rc = launch.run("-e " .. q(check))
    assert.are.equal(0, rc, out)
    assert.matches("true\t3", out)
    rmtree(dir)
  end)
end)

describe("train_gpt.lua with dt.checkpoint", function()
  it("20 steps, save, 20 more == save on 2 ranks (2x1), resume on 4 (2x2) and on 3 (1x3): the same losses", function()
    local A = "--steps 40 --dtype float64 --layers 2 --width 24 --heads 4 --digits 4 --batch 8 --print-losses"
    local losses = launch.losses
    local ck = tmpdir()
    local out, rc = launch.run("-n 2 examples/train_gpt.lua --mesh 2x1 " .. A)
    assert.are.equal(0, rc, out)
    local whole = losses(out)
    out, rc = launch.run("-n 2 examples/train_gpt.lua --mesh 2x1 " .. A .. " --until 20 --save-checkpoint " .. q(ck))
    assert.are.equal(0, rc, out)
    for _, r in ipairs {{4, "2x2"}, {3, "1x3"}} do
      out, rc = launch.run("-n " .. r[1] .. " examples/train_gpt.lua --mesh " .. r[2] .. " " .. A ..
                           " --resume-checkpoint " .. q(ck))
      assert.are.equal(0, rc, out)
      assert.matches("resumed from .* at step 21", out)
      local resumed = losses(out)
      for s = 21, 40 do
        assert.is_true(math.abs(resumed[s] - whole[s]) <= 1e-12 * math.abs(whole[s]),
          string.format("%s: step %d: resumed %.17g, uninterrupted %.17g", r[2], s, resumed[s], whole[s]))
      end
    end
    rmtree(ck)
  end)
end)

-- ---- the Python safetensors package ----
local VENV = (os.getenv("XDG_CACHE_HOME") or ((os.getenv("HOME") or "/tmp") .. "/.cache")) .. "/dtlua/safetensors-venv"

-- a python with safetensors and numpy: the system's, or a venv made here (pip from PyPI)
local function python()
  local function has(py) return select(2, launch.capture(py .. " -c 'import safetensors, numpy'")) == 0 end
  if has("python3") then return "python3" end
  local py = VENV .. "/bin/python3"
  if has(q(py)) then return q(py) end
  local out, rc = launch.capture("timeout 300 python3 -m venv " .. q(VENV) .. " && timeout 300 " .. q(py) ..
                                 " -m pip install -q safetensors numpy")
  if rc == 0 and has(q(py)) then return q(py) end
  return nil, out
end

local READ_PY = [[
import json, sys, numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file
d, one, ref = sys.argv[1], sys.argv[2], sys.argv[3]
index = json.load(open(d + "/model.safetensors.index.json"))
want, consolidated = load_file(ref), load_file(one)
meta = index["metadata"]["dtlua"]["tensors"]
assert set(index["weight_map"]) == set(want) == set(meta) == set(consolidated), (sorted(index["weight_map"]), sorted(want))
n = 0
for name, t in meta.items():
    full = np.zeros(t["shape"], dtype=want[name].dtype)
    for p in t["pieces"]:
        with safe_open(d + "/" + p["file"], "np") as f:
            block = f.get_tensor(name)
        assert list(block.shape) == p["shape"], (name, block.shape, p)
        full[tuple(slice(o, o + s) for o, s in zip(p["offset"], p["shape"]))] = block
    assert np.array_equal(full, want[name]), name
    assert np.array_equal(consolidated[name], want[name]), name
    with safe_open(d + "/" + index["weight_map"][name], "np") as f:
        assert name in f.keys()
    n += 1
print("python read %d tensors, all equal" % n)
]]

local WRITE_PY = [[
import json, os, sys, numpy as np
from safetensors.numpy import save_file
d, ref = sys.argv[1], sys.argv[2]
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(5)
tensors = {
    "model.emb": rng.standard_normal((11, 6)).astype(np.float32),
    "model.w": rng.standard_normal((7, 5)),
    "model.b": rng.standard_normal(5),
    "model.ids": rng.integers(-9, 9, (9, 2)).astype(np.int64),
    "model.mask": rng.integers(0, 255, (4, 3)).astype(np.uint8),
    "model.half": rng.standard_normal((6, 2)).astype(np.float16),
    "model.flag": rng.integers(0, 2, (3, 3)).astype(bool),
}
files = {"model-00001-of-00003.safetensors": ["model.emb", "model.b"],
         "model-00002-of-00003.safetensors": ["model.w", "model.ids", "model.flag"],
         "model-00003-of-00003.safetensors": ["model.mask", "model.half"]}
weight_map, total = {}, 0
for f, names in files.items():
    save_file({k: tensors[k] for k in names}, d + "/" + f, metadata={"format": "pt"})
    for k in names:
        weight_map[k] = f
        total += tensors[k].nbytes
json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, open(d + "/model.safetensors.index.json", "w"), indent=2)
save_file(tensors, ref)
print("python wrote %d tensors" % len(tensors))
]]

describe("the Python safetensors package", function()
  it("reads a dtlua checkpoint and its consolidated file; dtlua loads the package's sharded checkpoint", function()
    local py, why = python()
    if not py then
      print("skip: the Python safetensors package is not available and could not be installed: " ..
            tostring(why):sub(1, 200))
      return
    end
    local dir, ref, one = tmpdir(), os.tmpname() .. ".safetensors", os.tmpname() .. ".safetensors"
    local save_lua, script = os.tmpname() .. ".lua", os.tmpname() .. ".py"
    write(save_lua, SAVE .. [==[
dt.checkpoint.save(state, dir)
local full = {}
for _, sp in ipairs(SPECS) do full["model." .. sp[1]] = state.model[sp[1]]:full_tensor() end -- in one order on every rank
if dt.rank() == 0 then dt.save(full, arg[3]) end
dt.checkpoint.consolidate(dir, arg[4])
]==])
    local out, rc = launch.run("-n 4 " .. save_lua .. " " .. q(dir) .. " 2x2 " .. q(ref) .. " " .. q(one))
    assert.are.equal(0, rc, out)
    write(script, READ_PY)
    out, rc = launch.capture(py .. " " .. script .. " " .. q(dir) .. " " .. q(one) .. " " .. q(ref))
    assert.are.equal(0, rc, out)
    assert.matches("python read 7 tensors, all equal", out, 1, true)
    rmtree(dir)
    -- the other way: the package writes, dtlua loads into DTensors on 3 ranks
    write(script, WRITE_PY)
    out, rc = launch.capture(py .. " " .. script .. " " .. q(dir) .. " " .. q(ref))
    assert.are.equal(0, rc, out)
    local load_lua = os.tmpname() .. ".lua"
    write(load_lua, LOAD)
    out, rc = launch.run("-n 3 " .. load_lua .. " " .. q(dir) .. " 3 " .. q(ref))
    assert.are.equal(0, rc, out)
    assert.matches("loaded 7 tensors, 0 differ", out, 1, true)
    rmtree(dir)
    for _, p in ipairs {ref, one, save_lua, script, load_lua} do os.remove(p) end
  end)
end)
