#!/usr/bin/env bash
# Cross-compiles the Windows addon and anchor with mingw-w64 (Linux
# host), into build-win/Release/{cordon.node,cordon-anchor.exe}:
#
#   scripts/build-win-mingw.sh [outdir] [anchor]   (anchor: cordon-anchor.exe only)
#
# Needs g++-mingw-w64-x86-64-posix and binutils-mingw-w64-x86-64 (apt). The
# addon links against node.exe through an import library made from the .def
# that node-api-headers ships; -static bundles the C++ runtime, so the
# binaries import only system DLLs (and node.exe). On Windows itself,
# binding.gyp / CMakeLists.txt build the same sources with MSVC.
# CORDON_TEST_HOOKS=1: a test build, whose anchor has the test-only hooks
# (-DCORDON_TEST_HOOKS: CORDON_TEST_FAIL_ASSIGN, CORDON_TEST_JOB_LIMITS); never a build to ship.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${1:-build-win/Release}
CXX=${CORDON_MINGW_CXX:-x86_64-w64-mingw32-g++-posix}
DLLTOOL=${CORDON_MINGW_DLLTOOL:-x86_64-w64-mingw32-dlltool}
WINDRES=${CORDON_MINGW_WINDRES:-x86_64-w64-mingw32-windres}
mkdir -p "$OUT" build-win/obj
HEADERS=$(node -p "require('node-api-headers').include_dir")
ADDON_API=$(node -p "require('node-addon-api').include_dir")
DEF=$(node -p "require('node-api-headers').def_paths.node_api_def")
"$DLLTOOL" -d "$DEF" -l build-win/obj/libnode_api.a -D node.exe
# The one libuv function the addon calls (uv_open_osfhandle: a descriptor of
# Node's C runtime for a handle, native/win/host.cc), which node.exe exports too.
printf 'LIBRARY node.exe\nEXPORTS\nuv_open_osfhandle\nuv_get_osfhandle\n' >build-win/obj/node_uv.def
"$DLLTOOL" -d build-win/obj/node_uv.def -l build-win/obj/libnode_uv.a -D node.exe
FLAGS=(-std=c++17 -O2 -Wall -Wextra -DUNICODE -D_UNICODE -D_WIN32_WINNT=0x0A00 -static -static-libgcc -static-libstdc++)
if [[ ${2:-} != anchor ]]; then
  "$CXX" "${FLAGS[@]}" -shared -o "$OUT/cordon.node" \
    -DNAPI_VERSION=8 -DNAPI_DISABLE_CPP_EXCEPTIONS -DNODE_ADDON_API_DISABLE_DEPRECATED \
    -I"$HEADERS" -I"$ADDON_API" \
    native/binding.cc native/win/host.cc native/win/job_object.cc \
    build-win/obj/libnode_api.a build-win/obj/libnode_uv.a -ladvapi32
fi
# The anchor: the same sources as binding.gyp's cordon-anchor target on Windows.
HOOKS=()
if [[ ${CORDON_TEST_HOOKS:-} == 1 ]]; then HOOKS=(-DCORDON_TEST_HOOKS); fi
# Its manifest (native/win/cordon-anchor.manifest: longPathAware, asInvoker) as a resource.
"$WINDRES" -O coff -I native/win -o build-win/obj/cordon-anchor.res.o native/win/cordon-anchor.rc
"$CXX" "${FLAGS[@]}" "${HOOKS[@]}" -o "$OUT/cordon-anchor.exe" build-win/obj/cordon-anchor.res.o \
  native/win/anchor.cc native/win/channel.cc native/win/control.cc native/win/job.cc native/win/launch.cc native/win/lease.cc native/win/lease_job.cc \
  native/win/pty.cc native/win/relay.cc native/win/released.cc native/win/warm.cc native/protocol.cc native/win/job_object.cc -lshell32 -ladvapi32 -luser32
echo "built $OUT/cordon-anchor.exe${HOOKS[*]:+ (test build: ${HOOKS[*]})}$([[ ${2:-} != anchor ]] && echo " and $OUT/cordon.node")"
