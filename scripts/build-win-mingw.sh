#!/usr/bin/env bash
# Cross-compiles the Windows addon and anchor helper with mingw-w64 (Linux
# host), into build-win/Release/{cordon.node,cordon-anchor.exe}:
#
#   scripts/build-win-mingw.sh [outdir]
#
# Needs g++-mingw-w64-x86-64-posix and binutils-mingw-w64-x86-64 (apt). The
# addon links against node.exe through an import library made from the .def
# that node-api-headers ships; -static bundles the C++ runtime, so the
# binaries import only system DLLs (and node.exe). On Windows itself,
# binding.gyp / CMakeLists.txt build the same sources with MSVC.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${1:-build-win/Release}
CXX=${CORDON_MINGW_CXX:-x86_64-w64-mingw32-g++-posix}
DLLTOOL=${CORDON_MINGW_DLLTOOL:-x86_64-w64-mingw32-dlltool}
mkdir -p "$OUT" build-win/obj
HEADERS=$(node -p "require('node-api-headers').include_dir")
ADDON_API=$(node -p "require('node-addon-api').include_dir")
DEF=$(node -p "require('node-api-headers').def_paths.node_api_def")
"$DLLTOOL" -d "$DEF" -l build-win/obj/libnode_api.a -D node.exe
FLAGS=(-std=c++17 -O2 -Wall -Wextra -DUNICODE -D_UNICODE -D_WIN32_WINNT=0x0A00 -static -static-libgcc -static-libstdc++)
"$CXX" "${FLAGS[@]}" -shared -o "$OUT/cordon.node" \
  -DNAPI_VERSION=8 -DNAPI_DISABLE_CPP_EXCEPTIONS -DNODE_ADDON_API_DISABLE_DEPRECATED \
  -I"$HEADERS" -I"$ADDON_API" \
  native/binding.cc native/win/host.cc native/win/job_object.cc \
  build-win/obj/libnode_api.a -ladvapi32
"$CXX" "${FLAGS[@]}" -o "$OUT/cordon-anchor.exe" native/win/anchor.cc native/win/lease.cc native/protocol.cc native/win/job_object.cc -lshell32 -ladvapi32
echo "built $OUT/cordon.node and $OUT/cordon-anchor.exe"
