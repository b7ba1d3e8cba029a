-- dt.nn.Dropout (torch.nn.Dropout): Dropout(p = 0.5) zeroes elements with probability p and
-- scales the rest by 1/(1-p) while training (F.dropout with the module's training flag; the
-- same mask on any mesh: doc/random.md); the identity in eval mode.
local F = require "dtensor.nn.functional"
local Module = require("dtensor.nn.module").nn.Module
local C = require "dtensor.nn.checks"

local Dropout = Module:extend("Dropout")

function Dropout:init(p)
  if p == nil then p = 0.5 end
  if type(p) ~= "number" or not (p >= 0 and p <= 1) then
    C.fail("Dropout: p must be a number in [0, 1], got " .. (type(p) == "number" and tostring(p) or C.type_name(p)))
  end
  self.p = p
end

function Dropout:forward(x) return F.dropout(x, self.p, self.training) end

function Dropout:extra_repr() return "p=" .. tostring(self.p) end

return {nn = {Dropout = Dropout}}
