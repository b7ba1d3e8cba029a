-- Runs busted inside dtlua, so the specs test the dtensor module this build made.
-- usage: dtlua tests/run_specs.lua [busted options] [spec files or folders]
require "busted.runner"({standalone = false})
