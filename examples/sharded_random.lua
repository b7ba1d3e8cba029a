-- Random numbers that do not depend on the mesh, and indexing on DTensors.
--   dtlua -n 4 examples/sharded_random.lua      (any number of ranks works)
-- Every rank draws only its own shard, yet the full tensor is the single-device draw bit for
-- bit; dropout of a sharded activation keeps its mask for the backward; t[k] and t[k] = v
-- take global indices.
local n = dt.world_size()
local mesh = n % 2 == 0 and dt.init_device_mesh("cpu", {2, n // 2}, {"dp", "tp"})
                         or dt.init_device_mesh("cpu", {n}, {"tp"})
local shard_rows = mesh.ndim == 2 and {"S1", "S2"} or {"S1"}

-- the reference: one device, seed 7
dt.manual_seed(7)
local ref = dt.randn(6, 10)
local ref_out, ref_keep = dt._dropout(ref, 0.25)

-- the same calls on the mesh (uneven shards: 6 rows over the mesh, 10 columns)
dt.manual_seed(7)
local x = dt.randn({6, 10}, {device_mesh = mesh, placements = shard_rows})
local out, keep = dt._dropout(x, 0.25)
dt.print0("local shard on rank 0:", table.concat(x:to_local():size(), "x"), "of", table.concat(x:size(), "x"))
dt.print0("randn equals the single-device draw:", dt.equal(x:full_tensor(), ref))
dt.print0("dropout equals the single-device dropout:", dt.equal(out:full_tensor(), ref_out))

-- the backward reuses the forward's mask
local grad = dt.ones({6, 10}, {device_mesh = mesh, placements = shard_rows})
local g = dt._dropout_backward(grad, keep, 0.25)
dt.print0("backward mask equals the forward mask:", dt.equal(g:full_tensor():ne(0), ref_keep))

-- every rank's generator moved alike
local st = dt.get_rng_state()
dt.print0("generator state after the draws:", st.seed, st.offset)

-- indexing with global indices: row 5 (held by one rank), a column range, and an assignment
dt.print0("x[5] equals ref[5]:", dt.equal(x[5]:full_tensor(), ref[5]))
dt.print0("x[{{}, {2, 9, 3}}] equals ref's:", dt.equal(x[{{}, {2, 9, 3}}]:full_tensor(), ref[{{}, {2, 9, 3}}]))
x[{{2, 5}, 1}] = 0
ref[{{2, 5}, 1}] = 0
dt.print0("after x[{{2, 5}, 1}] = 0, equal to the same assignment on one device:", dt.equal(x:full_tensor(), ref))
