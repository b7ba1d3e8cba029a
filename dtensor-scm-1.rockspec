-- LuaRocks package of dtlua's Lua library: `luarocks --lua-version=5.4 make` in the source
-- tree configures and builds with the system's Lua 5.4 and BLAS (Debian: liblua5.4-dev,
-- libopenblas-dev, autoconf, automake, libtool), then installs `require "dtensor"` (the C
-- module dtensor.core and the Lua files) into the rock tree, and the dtlua interpreter and
-- the dtlua-busted runner into its bin.
rockspec_format = "3.0"
package = "dtensor"
version = "scm-1"
source = {url = "git+file:///dev/null"} -- `luarocks make` builds the tree it is run in
description = {
  summary = "Distributed tensors for Lua 5.4 (PyTorch DTensor semantics), with the dtlua launcher",
}
dependencies = {"lua >= 5.4, < 5.5"}
build = {
  type = "command",
  build_command = [[test -x configure || autoreconf -fi >/dev/null
./configure -q --prefix="$(PREFIX)" --libdir="$(PREFIX)/clib" --with-lua-cmod-dir="$(LIBDIR)" --with-lua-mod-dir="$(LUADIR)" && make -s -j2]],
  install_command = [[make -s install]],
}
-- libdir is not LIBDIR: LuaRocks deploys LIBDIR into the tree's Lua C path and cannot deploy
-- libdtensor's versioned symlinks; libdtensor, dtensor.pc and headers stay in the rock's dir.
