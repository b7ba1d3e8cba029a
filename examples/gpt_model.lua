-- The demo's GPT (examples/train_gpt.lua, bench/train.lua): token + position embeddings, causal
-- self-attention and MLP blocks with LayerNorm and dropout, a final norm and a language-model
-- head, written once with dt.nn modules; `partition` is the tensor-parallel plan for
-- dt.distribute_module on a dp x tp mesh (q/k/v, the MLP's first layer and the head split by
-- output features over tp, the attention output and the MLP's second layer by input features,
-- every parameter replicated over dp).
-- Load it with dofile: `local gpt = dofile(dir .. "/gpt_model.lua")`; it returns
-- {Attention = ..., Block = ..., GPT = ..., partition = ...}.
local nn, F = dt.nn, dt.F
local R, S = dt.Replicate(), dt.Shard

local Attention = nn.Module:extend("CausalSelfAttention")
function Attention:init(width, heads, p)
  self.heads, self.p = heads, p
  self.q = nn.Linear(width, width, {bias = false})
  self.k = nn.Linear(width, width, {bias = false})
  self.v = nn.Linear(width, width, {bias = false})
  self.out = nn.Linear(width, width)
  self.drop = nn.Dropout(p)
end
function Attention:forward(x)
  local b, l, c = table.unpack(x:size())
  local h = self.heads
  local function split(t) return t:view(b, l, h, c // h):transpose(2, 3) end
  local y = F.scaled_dot_product_attention(split(self.q(x)), split(self.k(x)), split(self.v(x)), {is_causal = true})
  return self.drop(self.out(y:transpose(2, 3):reshape(b, l, c)))
end

local Block = nn.Module:extend("Block")
function Block:init(width, heads, p)
  self.norm1 = nn.LayerNorm(width)
  self.attn = Attention(width, heads, p)
  self.norm2 = nn.LayerNorm(width)
  self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width), nn.Dropout(p))
end
function Block:forward(x)
  x = x + self.attn(self.norm1(x))
  return x + self.mlp(self.norm2(x))
end

local GPT = nn.Module:extend("GPT")
function GPT:init(vocab, context, opts)
  self.tokens = nn.Embedding(vocab, opts.width)
  self.positions = nn.Embedding(context, opts.width)
  self.drop = nn.Dropout(opts.dropout)
  local blocks = {}
  for i = 1, opts.layers do blocks[i] = Block(opts.width, opts.heads, opts.dropout) end
  self.blocks = nn.ModuleList(blocks)
  self.norm = nn.LayerNorm(opts.width)
  self.head = nn.Linear(opts.width, vocab, {bias = false})
  self.context = context
end
function GPT:forward(ids, pos_ids)
  local x = self.drop(self.tokens(ids) + self.positions(pos_ids))
  for _, block in ipairs(self.blocks:children()) do x = block(x) end
  return self.head(self.norm(x))
end

-- Tensor parallel over mesh dim 2, replicated over dim 1: Linear weights are [out, in].
local function partition(name, m, mesh)
  local cols = name:match("%.q$") or name:match("%.k$") or name:match("%.v$") or name:match("mlp%.1$") or name == "head"
  local rows = name:match("attn%.out$") or name:match("mlp%.3$")
  local function place(pname, p) m[pname] = dt.distribute_tensor(m[pname]:detach(), mesh, p):requires_grad_() end
  if cols then
    place("weight", {R, S(1)})
    if m._parameters.bias then place("bias", {R, S(1)}) end
  elseif rows then
    place("weight", {R, S(2)})
  end
end

-- The demo's training step in full precision (train_gpt.lua adds autocast and loss scaling):
-- cross_entropy over every position, backward, gradients clipped to norm 1, opt's step.
local function train_step(model, opt, pos_ids)
  return function(input, target)
    local logits = model(input, pos_ids)
    local n, vocab = input:numel(), logits:size(3)
    local loss = dt.F.cross_entropy(logits:reshape(n, vocab), target:reshape(n))
    loss:backward()
    dt.nn.utils.clip_grad_norm_(model:parameters(), 1.0)
    opt:step()
    opt:zero_grad()
    return loss
  end
end

return {Attention = Attention, Block = Block, GPT = GPT, partition = partition, train_step = train_step}
