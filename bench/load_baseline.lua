-- Loads the C baselines (bench/baseline.c, built by make, not installed) that every
-- benchmark measures against in the same run:
--   local baseline = dofile((arg and arg[0] or ""):match("^(.*)/") or "bench") .. "/load_baseline.lua")
local here = (arg and arg[0] or ""):match("^(.*)/") or "bench"
package.cpath = here .. "/.libs/?.so;bench/.libs/?.so;" .. package.cpath
return require "baseline"
