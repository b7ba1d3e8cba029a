-- dt.nn.Embedding (torch.nn.Embedding): Embedding(num_embeddings, embedding_dim,
-- {dtype = "float32"}); weight [num, dim] drawn from N(0, 1) as torch.  forward(ids): the
-- rows of the 1-based ids (F.embedding, which takes DTensor ids and weights).
local core = require "dtensor.core"
local dtensor_nn = require("dtensor.dtensor_nn").functional -- F.embedding on DTensors too
local Module = require("dtensor.nn.module").nn.Module
local init = require("dtensor.nn.initializers").nn.init
local C = require "dtensor.nn.checks"

local Embedding = Module:extend("Embedding")

local options = {dtype = true}
function Embedding:init(num_embeddings, embedding_dim, opts)
  C.positive_int("Embedding", "num_embeddings", num_embeddings)
  C.positive_int("Embedding", "embedding_dim", embedding_dim)
  opts = C.options("Embedding", opts, options)
  self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
  local weight = core.empty({num_embeddings, embedding_dim}, {dtype = C.float_dtype("Embedding", opts.dtype)})
  self:register_parameter("weight", init.normal_(weight))
end

function Embedding:forward(ids) return dtensor_nn.embedding(ids, self.weight) end

function Embedding:extra_repr() return self.num_embeddings .. ", " .. self.embedding_dim end

return {nn = {Embedding = Embedding}}
