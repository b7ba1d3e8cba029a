-- dt.nn.functional (dt.F): neural-network functions over tensors.
local core = require "dtensor.core"
local F = {}

return F
