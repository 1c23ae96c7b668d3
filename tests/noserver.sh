#!/bin/sh
# liboffkv must configure and build without the server's libraries
# (libmicrohttpd, cJSON): configures a second tree with pkg-config unable
# to see them (only PCRE2's .pc is left visible) and checks that CMake says
# so, that the tree has no server target and no serve tests, and that the
# offkv program's own files (its stub `serve` included) compile with
# -Werror.  OKV_NOSERVER_FULL=1 also builds the program (the whole library:
# minutes) and checks that `offkv serve` says it was built without the
# server.  usage: noserver.sh SOURCE_DIR
set -u
src=$1
fail() { echo "noserver: FAIL: $*"; exit 1; }
command -v pkg-config >/dev/null || { echo "noserver: SKIP: no pkg-config"; exit 77; }
pcre_dir=$(pkg-config --variable=pcfiledir libpcre2-8) || { echo "noserver: SKIP: no libpcre2-8.pc"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/pc"
ln -s "$pcre_dir/libpcre2-8.pc" "$tmp/pc/libpcre2-8.pc"
for m in libmicrohttpd libcjson; do
    PKG_CONFIG_LIBDIR="$tmp/pc" PKG_CONFIG_PATH= pkg-config --exists $m && fail "$m still visible"
done
PKG_CONFIG_LIBDIR="$tmp/pc" PKG_CONFIG_PATH= cmake -S "$src" -B "$tmp/b" -G "Unix Makefiles" \
    -DCMAKE_BUILD_TYPE=Release >"$tmp/cfg.log" 2>&1 || { cat "$tmp/cfg.log"; fail "configure failed without the server's libraries"; }
# (CMake wraps a warning's lines: read the log as one line)
said=$(tr -s ' \n' '  ' <"$tmp/cfg.log")
case $said in *"WITHOUT the HTTP server"*) ;; *) cat "$tmp/cfg.log"; fail "configure did not say the server is left out" ;; esac
case $said in *"libmicrohttpd (Debian: libmicrohttpd-dev) and cJSON (Debian: libcjson-dev) not found"*) ;;
    *) cat "$tmp/cfg.log"; fail "configure did not name the missing libraries" ;; esac
echo "noserver: configure says: ${said#*CMake Warning}" | cut -c1-300
make -C "$tmp/b" help | grep -q offkv_serve && fail "an offkv_serve target exists"
ctest --test-dir "$tmp/b" -N | grep -E ': (serve|fuzz_serve)' && fail "serve tests are registered"
for f in main cli run; do
    make -C "$tmp/b" -s "tools/offkv/$f.c.o" >"$tmp/mk.log" 2>&1 || { cat "$tmp/mk.log"; fail "tools/offkv/$f.c does not compile"; }
done
grep -q OKV_NO_SERVER "$tmp/b/CMakeFiles/tool_offkv.dir/flags.make" || fail "tool_offkv is not built with OKV_NO_SERVER"
if [ "${OKV_NOSERVER_FULL:-0}" = 1 ]; then
    cmake --build "$tmp/b" -j2 --target tool_offkv >"$tmp/mk.log" 2>&1 || { tail -30 "$tmp/mk.log"; fail "offkv does not build"; }
    out=$("$tmp/b/offkv" serve -m /nonexistent 2>&1); rc=$?
    [ $rc = 1 ] || fail "offkv serve exited $rc, expected 1"
    echo "$out" | grep -q "built without the HTTP server" || fail "offkv serve said: $out"
    echo "noserver: offkv serve says: $out"
fi
echo "noserver: ok"
