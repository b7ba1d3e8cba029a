-- The training step's pieces, one rank: forward / backward / optimizer of the demo's GPT
-- (bench/train.lua's sizes) and its non-GEMM ops forward + backward at the step's shapes, each
-- against PyTorch on the same thread count (dt.get_num_threads(): DTLUA_NUM_THREADS or every
-- core), in the same run where PyTorch is installed.  Best of 5 after a warm-up, in ms.
-- usage (from the build dir): ./dtlua bench/train_ops.lua [quick|cpu]
--   quick: tiny sizes, no PyTorch; cpu: CPU time of the process (os.clock, Python's
--   time.process_time) instead of wall clock, steadier on a shared machine (with 1 thread:
--   DTLUA_NUM_THREADS=1; more threads add their CPU time up)
local here = (arg and arg[0] or ""):match("^(.*)/") or "bench"
local gpt = dofile(here .. "/../examples/gpt_model.lua")
local baseline = dofile(here .. "/load_baseline.lua")
local F, now = dt.F, baseline.now
local quick, cpu = arg and arg[1] == "quick", arg and arg[1] == "cpu"
if cpu then now = os.clock end
local C = {layers = 4, width = 256, heads = 4, context = 128, batch = 16, vocab = 256, dropout = 0.1}
if quick then C = {layers = 1, width = 32, heads = 4, context = 16, batch = 4, vocab = 32, dropout = 0.1} end
local threads = dt.get_num_threads()
local B, L, W, H, V = C.batch, C.context, C.width, C.heads, C.vocab

local function best(f)
  f()
  local b = math.huge
  for _ = 1, quick and 2 or 5 do
    collectgarbage()
    local t0 = now()
    local r = f() -- a function may time its own part and return it (seconds)
    b = math.min(b, type(r) == "number" and r or now() - t0)
  end
  return b * 1e3
end

local rows = {}
local function add(name, ms) rows[#rows + 1] = {name, ms} end

-- the bare step, split
dt.manual_seed(1)
local model = gpt.GPT(V, L, C):to("float32")
local opt = dt.optim.AdamW(model:parameters(), {lr = 3e-3, weight_decay = 0.01})
local pos = dt.arange(1, L + 1):reshape(1, L)
local ids, target = dt.randint(1, V + 1, {B, L}), dt.randint(1, V + 1, {B * L})
local loss
add("step: forward + loss", best(function() loss = F.cross_entropy(model(ids, pos):reshape(B * L, V), target) end))
add("step: backward", best(function()
  opt:zero_grad()
  loss = F.cross_entropy(model(ids, pos):reshape(B * L, V), target)
  local t0 = now()
  loss:backward()
  return now() - t0
end))
add("step: clip + AdamW", best(function()
  dt.nn.utils.clip_grad_norm_(model:parameters(), 1.0)
  opt:step()
end))

-- the ops, forward + backward at the step's shapes
local function fb(f, ...)
  local xs = {...}
  return function()
    local y = f(table.unpack(xs))
    y:backward(dt.ones(y:size()))
    for _, x in ipairs(xs) do x.grad = nil end
  end
end
local function leaf(...) return dt.randn(...):requires_grad_() end
add("gelu [B,L,4W]", best(fb(F.gelu, leaf(B, L, 4 * W))))
add("layer_norm [B,L,W]", best(fb(function(x, w, b) return F.layer_norm(x, {W}, w, b) end, leaf(B, L, W), leaf(W), leaf(W))))
add("sdpa causal [B,H,L,W/H]", best(fb(function(q, k, v) return F.scaled_dot_product_attention(q, k, v, {is_causal = true}) end,
                                      leaf(B, H, L, W // H), leaf(B, H, L, W // H), leaf(B, H, L, W // H))))
add("cross_entropy [B*L,V]", best(fb(function(x) return F.cross_entropy(x, target) end, leaf(B * L, V))))
add("dropout 0.1 [B,L,W]", best(fb(function(x) return F.dropout(x, 0.1, true) end, leaf(B, L, W))))
add("embedding [V,W]", best(fb(function(w) return F.embedding(ids, w) end, leaf(V, W))))
add("softmax [B,H,L,L]", best(fb(function(x) return x:softmax(-1) end, leaf(B, H, L, L))))

local TORCH = [[
import sys, time, torch
import torch.nn as nn, torch.nn.functional as F
torch.set_num_threads(int(sys.argv[1]))
quick = sys.argv[2] == "1"
clock = time.process_time if sys.argv[3] == "1" else time.perf_counter
B, L, W, H, V, NL = (4, 16, 32, 4, 32, 1) if quick else (16, 128, 256, 4, 256, 4)
class Attn(nn.Module):
    def __init__(s):
        super().__init__(); s.q, s.k, s.v = (nn.Linear(W, W, bias=False) for _ in range(3)); s.out = nn.Linear(W, W); s.drop = nn.Dropout(0.1)
    def forward(s, x):
        sp = lambda t: t.view(B, L, H, W // H).transpose(1, 2)
        y = F.scaled_dot_product_attention(sp(s.q(x)), sp(s.k(x)), sp(s.v(x)), is_causal=True)
        return s.drop(s.out(y.transpose(1, 2).reshape(B, L, W)))
class Block(nn.Module):
    def __init__(s):
        super().__init__(); s.n1, s.a, s.n2 = nn.LayerNorm(W), Attn(), nn.LayerNorm(W)
        s.mlp = nn.Sequential(nn.Linear(W, 4 * W), nn.GELU(), nn.Linear(4 * W, W), nn.Dropout(0.1))
    def forward(s, x):
        x = x + s.a(s.n1(x)); return x + s.mlp(s.n2(x))
class GPT(nn.Module):
    def __init__(s):
        super().__init__(); s.tok, s.pos = nn.Embedding(V, W), nn.Embedding(L, W); s.drop = nn.Dropout(0.1)
        s.blocks = nn.ModuleList([Block() for _ in range(NL)]); s.norm = nn.LayerNorm(W); s.head = nn.Linear(W, V, bias=False)
    def forward(s, ids, pos):
        x = s.drop(s.tok(ids) + s.pos(pos))
        for b in s.blocks: x = b(x)
        return s.head(s.norm(x))
def best(f):
    f(); b = 1e30
    for _ in range(2 if quick else 5):
        t0 = clock(); r = f(); b = min(b, r if isinstance(r, float) else clock() - t0)
    return b * 1e3
torch.manual_seed(1)
m = GPT(); opt = torch.optim.AdamW(m.parameters(), lr=3e-3, weight_decay=0.01)
ids = torch.randint(0, V, (B, L)); pos = torch.arange(L).reshape(1, L); tgt = torch.randint(0, V, (B * L,))
fwd = best(lambda: F.cross_entropy(m(ids, pos).reshape(B * L, V), tgt))
print("step:_forward_+_loss", fwd)
def bwd():
    opt.zero_grad(); l = F.cross_entropy(m(ids, pos).reshape(B * L, V), tgt); t0 = clock(); l.backward(); return clock() - t0
print("step:_backward", best(bwd))
print("step:_clip_+_AdamW", best(lambda: (torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0), opt.step()) and None))
def fb(f, *xs):
    def run():
        y = f(*xs); y.backward(torch.ones_like(y))
        for x in xs: x.grad = None
    return run
leaf = lambda *s: torch.randn(*s, requires_grad=True)
print("gelu_[B,L,4W]", best(fb(F.gelu, leaf(B, L, 4 * W))))
print("layer_norm_[B,L,W]", best(fb(lambda x, w, b: F.layer_norm(x, (W,), w, b), leaf(B, L, W), leaf(W), leaf(W))))
print("sdpa_causal_[B,H,L,W/H]", best(fb(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), leaf(B, H, L, W // H), leaf(B, H, L, W // H), leaf(B, H, L, W // H))))
print("cross_entropy_[B*L,V]", best(fb(lambda x: F.cross_entropy(x, tgt), leaf(B * L, V))))
print("dropout_0.1_[B,L,W]", best(fb(lambda x: F.dropout(x, 0.1, True), leaf(B, L, W))))
print("embedding_[V,W]", best(fb(lambda w: F.embedding(ids, w), leaf(V, W))))
print("softmax_[B,H,L,L]", best(fb(lambda x: x.softmax(-1), leaf(B, H, L, L))))
]]
local torch = {}
if not quick and baseline.torch_available() then
  torch = baseline.run_python(TORCH, "python3", {threads, quick and 1 or 0, cpu and 1 or 0},
                              string.format("OMP_NUM_THREADS=%d OPENBLAS_NUM_THREADS=%d", threads, threads))
end
print(string.format("one rank, %d threads (dtlua and PyTorch); ms%s, best of %d", threads, cpu and " of CPU time" or "",
                    quick and 2 or 5))
print(string.format("%-28s %10s %10s %8s", "piece", "dtlua", "PyTorch", "ratio"))
for _, r in ipairs(rows) do
  local t = torch[(r[1]:gsub(" ", "_"))]
  print(string.format("%-28s %10.2f %10s %8s", r[1], r[2], t and string.format("%.2f", t) or "n/a",
                      t and string.format("%.2f", t / r[2]) or "n/a"))
end
if quick then print("(quick: tiny sizes, no PyTorch)")
elseif not torch["gelu_[B,L,4W]"] then print("(PyTorch not importable or failed: its column is n/a)") end
