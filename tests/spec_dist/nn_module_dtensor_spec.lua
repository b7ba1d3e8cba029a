-- dt.nn modules with DTensor parameters, SPMD (dtlua -n 1..4, mpirun -np 2/4): parameters
-- swapped for DTensors of several placements by assignment (`m.weight = distribute_tensor(..)`,
-- as the parallel styles do) give the plain module's forward and gradients on every mesh;
-- dt.nn.init on DTensors draws the single-device numbers bit for bit; the state_dict of a
-- sharded module round trips (through dt.save/dt.load, and across placements).
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local nn = dt.nn
local R, S, P = dt.Replicate, dt.Shard, dt.Partial

-- every rank holds the same global tensors: H.dist chunks them locally
local function replicated(x, mesh)
  local p = {}
  for m = 1, mesh.ndim do p[m] = R() end
  return H.dist(x, mesh, p)
end

local function same(a, b, tol, what) -- plain tensors
  assert.are.same(b:size(), a:size(), what)
  local err = a:numel() == 0 and 0 or (a:to("float64") - b:to("float64")):abs():max():item()
  assert(err <= (tol or 1e-5) * (1 + b:abs():max():item()), (what or "") .. ": max error " .. err)
end

-- placement lists for a [out, in] weight on mesh, and its bias's (Shard(1) where the
-- weight shards its rows, else Replicate): every combination on a 1-d mesh, a few per
-- mesh otherwise (the same on every rank: H.prng is seeded alike)
local function weight_cases(mesh, rng)
  local choices = {R(), S(1), S(2)}
  local cases = {}
  if mesh.ndim == 1 then
    for _, c in ipairs(choices) do cases[#cases + 1] = {c} end
  else
    for _ = 1, 4 do
      local p = {}
      for m = 1, mesh.ndim do p[m] = rng.pick(choices) end
      cases[#cases + 1] = p
    end
  end
  local out = {}
  for i, w in ipairs(cases) do
    local b = {}
    for m, p in ipairs(w) do b[m] = p:is_shard(1) and S(1) or R() end
    out[i] = {w, b}
  end
  return out
end

-- m's parameters swapped for DTensors: placements by name
local function distribute(m, mesh, placements)
  for _, p in ipairs(m:named_parameters()) do
    local path, name = p[1]:match("^(.*)%.([^.]*)$")
    local owner = path and m:get_submodule(path) or m
    owner[name or p[1]] = H.dist(p[2]:detach(), mesh, placements[p[1]])
  end
  return m
end

describe("nn modules with DTensor parameters", function()
  local rng = H.prng(20240611)

  for _, mm in ipairs(H.meshes()) do
    local mesh_name, mesh = mm[1], mm[2]
    local on_mesh = mesh:get_coordinate() ~= nil

    it("Linear: forward and gradients equal the plain module's on " .. mesh_name, function()
      for _, case in ipairs(weight_cases(mesh, rng)) do
        dt.manual_seed(3)
        local plain = nn.Linear(5, 6)
        dt.manual_seed(3)
        local d = distribute(nn.Linear(5, 6), mesh, {weight = case[1], bias = case[2]})
        local what = mesh_name .. " " .. H.placement_string(case[1])
        assert.is_true(dt.is_dtensor(d.weight) and d.weight.requires_grad and d.weight.is_leaf, what)
        assert.are.equal(H.placement_string(case[1]), H.placement_string(d.weight.placements))
        local x = H.values({3, 5})
        local y = plain(x)
        local dy = d(replicated(x, mesh))
        H.close(dy, y, what)
        y:sum():backward()
        dy:sum():backward()
        assert.are.equal(H.placement_string(case[1]), H.placement_string(d.weight.grad.placements), what)
        local gw, gb = d.weight.grad:full_tensor(), d.bias.grad:full_tensor()
        if on_mesh then
          same(gw, plain.weight.grad, 1e-5, what .. " weight grad")
          same(gb, plain.bias.grad, 1e-5, what .. " bias grad")
        end
      end
    end)

    it("an MLP of Sequential, LayerNorm, GELU and Embedding equals the plain one on " .. mesh_name, function()
      local function model()
        dt.manual_seed(8)
        return nn.Sequential({{"emb", nn.Embedding(7, 4)}, {"fc1", nn.Linear(4, 8)}, {"act", nn.GELU()},
                              {"norm", nn.LayerNorm(8)}, {"fc2", nn.Linear(8, 3)}})
      end
      local plain, d = model(), model()
      local rep = {}
      for m = 1, mesh.ndim do rep[m] = R() end
      local col, row = {}, {} -- fc1 column-wise, fc2 row-wise on the last mesh dim
      for m = 1, mesh.ndim do col[m], row[m] = R(), R() end
      col[mesh.ndim], row[mesh.ndim] = S(1), S(2)
      distribute(d, mesh, {["emb.weight"] = col, ["fc1.weight"] = col, ["fc1.bias"] = col, ["norm.weight"] = rep,
                           ["norm.bias"] = rep, ["fc2.weight"] = row, ["fc2.bias"] = rep})
      local ids = dt.tensor({{1, 7, 3}, {2, 2, 5}})
      local y = plain(ids)
      local dy = d(replicated(ids, mesh))
      H.close(dy, y, mesh_name)
      y:sum():backward()
      dy:sum():backward()
      for _, p in ipairs(plain:named_parameters()) do
        local g = d:get_parameter(p[1]).grad:full_tensor()
        if on_mesh then same(g, p[2].grad, 1e-5, mesh_name .. " " .. p[1]) end
      end
    end)

    it("init on DTensors draws the single-device numbers bit for bit on " .. mesh_name, function()
      local init = nn.init
      local fns = {
        {"uniform_", function(t) return init.uniform_(t, -2, 1) end}, {"normal_", function(t) return init.normal_(t, 1, 3) end},
        {"xavier_uniform_", init.xavier_uniform_}, {"xavier_normal_", init.xavier_normal_},
        {"kaiming_uniform_", function(t) return init.kaiming_uniform_(t, math.sqrt(5)) end},
        {"kaiming_normal_", function(t) return init.kaiming_normal_(t, 0, "fan_out", "relu") end},
        {"trunc_normal_", function(t) return init.trunc_normal_(t, 0.5, 2, -1, 3) end},
        {"constant_", function(t) return init.constant_(t, 0.25) end}, {"ones_", init.ones_}, {"zeros_", init.zeros_},
      }
      local partial = {} -- Partial(sum) then Partial(max): written into the local shards
      for m = 1, mesh.ndim do partial[m] = m == 1 and P("sum") or P("max") end
      for _, f in ipairs(fns) do
        for _, case in ipairs {{"float32", H.placements(rng, mesh, 2, true)}, {"float64", H.placements(rng, mesh, 2, true)},
                               {"float32", partial}} do
          local dtype, placements = case[1], case[2]
          local shape = H.shape_of(rng, 2, 1, 7)
          local what = f[1] .. " " .. dtype .. " {" .. table.concat(shape, ",") .. "} " .. H.placement_string(placements)
          dt.manual_seed(77)
          local want = f[2](dt.empty(shape, {dtype = dtype}))
          local after = dt.get_rng_state()
          dt.manual_seed(77)
          local d = H.dist(dt.zeros(shape, {dtype = dtype}), mesh, placements)
          d:requires_grad_()
          assert.are.equal(d, f[2](d))
          assert.are.same(after, dt.get_rng_state(), what .. ": generator state")
          assert.is_true(d.is_leaf and d.requires_grad)
          assert.are.equal(H.placement_string(placements), H.placement_string(d.placements), what)
          local got = d:full_tensor()
          if on_mesh then assert(H.same(got, want), what) end
        end
      end
      assert.is_true(H.rng_states_agree())
    end)

    it("state_dict of a sharded module round trips on " .. mesh_name, function()
      local function model()
        local m = nn.Sequential(nn.Linear(5, 6), nn.RMSNorm(6), nn.Linear(6, 2))
        m[2]:register_buffer("count", dt.zeros(3, {dtype = "int64"}))
        return m
      end
      local last = {}
      for m = 1, mesh.ndim do last[m] = m == mesh.ndim and S(1) or R() end
      dt.manual_seed(1)
      local plain_src = model()
      plain_src[2].count:fill_(4)
      dt.manual_seed(1)
      local src = distribute(model(), mesh, {["1.weight"] = last, ["1.bias"] = last, ["2.weight"] = last,
                                            ["3.weight"] = weight_cases(mesh, rng)[1][1], ["3.bias"] = last})
      src[2].count:fill_(4)
      local sd, full = src:state_dict(), plain_src:state_dict()
      for k, v in pairs(sd) do
        assert.is_false(v.requires_grad, k)
        local g = dt.is_dtensor(v) and v:full_tensor() or v
        if on_mesh then assert(H.same(g, full[k]), k) end
      end
      assert.is_true(dt.is_dtensor(sd["1.weight"]))
      -- the plain module's state through a file (every rank its own), into other placements
      local path = os.tmpname()
      dt.save(full, path)
      local loaded = dt.load(path)
      os.remove(path)
      dt.manual_seed(2)
      local other, first = {}, {} -- other placements for the weights, and for the 1-d tensors
      for m = 1, mesh.ndim do other[m], first[m] = m == 1 and S(2) or R(), m == 1 and S(1) or R() end
      local dst = distribute(model(), mesh, {["1.weight"] = other, ["1.bias"] = last, ["2.weight"] = first,
                                            ["3.weight"] = other, ["3.bias"] = first})
      dst:load_state_dict(loaded)
      local xp = H.values({4, 5})
      local x = replicated(xp, mesh)
      local want = plain_src(xp)
      H.close(src(x), want, mesh_name .. ": the sharded source")
      H.close(dst(x), want, mesh_name .. ": loaded from the file")
      assert.are.equal(H.placement_string(other), H.placement_string(dst[1].weight.placements))
      assert.is_true(dst[1].weight.requires_grad and dst[1].weight.is_leaf)
      assert.are.equal(4, dst[2].count[1]:item())
      -- DTensor values, redistributed to the targets' placements; and into a plain module
      dt.manual_seed(3)
      local dst2 = distribute(model(), mesh, {["1.weight"] = other, ["1.bias"] = first, ["2.weight"] = last,
                                             ["3.weight"] = last, ["3.bias"] = last})
      dst2:load_state_dict(sd)
      H.close(dst2(x), want, mesh_name .. ": loaded from DTensors")
      local plain = model()
      plain:load_state_dict(sd)
      local y = plain(xp)
      if on_mesh then same(y, want, 1e-6, mesh_name .. ": plain module") end
    end)

    it("tostring shows placements and the mesh's shape on " .. mesh_name, function()
      local m = nn.Linear(4, 4)
      local p = {}
      for d = 1, mesh.ndim do p[d] = d == 1 and S(1) or R() end
      m.weight = H.dist(m.weight:detach(), mesh, p)
      m.bias = replicated(m.bias:detach(), mesh)
      local line = tostring(m):match("weight: [^\n]*")
      assert.are.equal("weight: [4, 4] float32 " .. "(" .. H.placement_string(p):sub(2, -2) .. ") on mesh [" ..
                       table.concat(mesh:shape(), ", ") .. "]", line)
      -- to(dtype) keeps the placements; zero_grad clears DTensor gradients
      m:to("float64")
      assert.is_true(dt.is_dtensor(m.weight) and m.weight.dtype == "float64" and m.weight.is_leaf)
      assert.are.equal(H.placement_string(p), H.placement_string(m.weight.placements))
      m(replicated(dt.ones(2, 4, {dtype = "float64"}), mesh)):sum():backward()
      assert.is_true(dt.is_dtensor(m.weight.grad))
      m:zero_grad()
      assert.is_nil(m.weight.grad)
    end)
  end

  it("hooks convert plain inputs and outputs around a module with DTensor parameters", function()
    local mesh = dt.init_device_mesh("cpu", {dt.world_size()})
    dt.manual_seed(4)
    local plain = nn.Linear(3, 5)
    dt.manual_seed(4)
    local m = nn.Linear(3, 5)
    m.weight = H.dist(m.weight:detach(), mesh, {S(1)})
    m.bias = H.dist(m.bias:detach(), mesh, {S(1)})
    m:register_forward_pre_hook(function(_, inputs) return {replicated(inputs[1], mesh)} end)
    m:register_forward_hook(function(_, _, out) return out:full_tensor() end)
    local x = H.values({2, 3})
    local y = m(x)
    assert.is_false(dt.is_dtensor(y))
    same(y, plain(x), 1e-6, "hooked")
  end)
end)
