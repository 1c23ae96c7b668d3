#!/bin/sh
# ctest install: installs the build into a temporary prefix, then builds
# tests/embed/embed.c as an outside program would, with nothing but
# `pkg-config offkv` (static and shared), and runs both.  Also checks that
# the shared library is versioned and exports only public okv_ functions.
# Usage: install.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
p=$tmp/prefix
for f in lib/liboffkv.a lib/pkgconfig/offkv.pc include/offkv/offkv.h include/offkv/version.h bin/offkv; do
  [ -e "$p/$f" ] || fail "$f not installed"
done
so=$(cd "$p/lib" && ls liboffkv.so.*.*.* 2>/dev/null | head -n 1)
[ -n "$so" ] || fail "no liboffkv.so.X.Y.Z installed"
soname=$(readelf -d "$p/lib/$so" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
case $soname in liboffkv.so.[0-9]*) ;; *) fail "soname '$soname' is not liboffkv.so.MAJOR" ;; esac
[ -L "$p/lib/$soname" ] && [ -L "$p/lib/liboffkv.so" ] || fail "$soname or liboffkv.so symlink missing"
echo "installed $so, soname $soname"

# Exported: only functions the public headers declare.
nm -D --defined-only "$p/lib/$so" | awk '$2 ~ /^[TtWDdBbRrVvi]$/ {print $3}' | sort >"$tmp/exported"
cat "$p"/include/offkv/*.h | grep -o 'okv_[A-Za-z0-9_]*[ 	]*(' | sed 's/[ 	]*($//' | sort -u >"$tmp/public"
n=$(wc -l <"$tmp/exported")
[ "$n" -gt 50 ] || fail "only $n symbols exported"
extra=$(comm -23 "$tmp/exported" "$tmp/public")
[ -z "$extra" ] || fail "exported but not public: $extra"
echo "exports $n public functions and nothing else"

export PKG_CONFIG_PATH="$p/lib/pkgconfig"
pkg-config --exists offkv || fail "pkg-config does not find offkv"
want=$(sed -n 's/^#define OKV_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$src/include/offkv/version.h" | paste -sd.)
[ "$(pkg-config --modversion offkv)" = "$want" ] || fail "offkv.pc says $(pkg-config --modversion offkv), version.h $want"

model=""
[ -f "$src/../shared/models/stories260K.gguf" ] && model="$src/../shared/models/stories260K.gguf"
[ -n "$model" ] || model="$src/models/stories260K.gguf"

# Shared: found through the rpath here; an installed one through ldconfig.
# shellcheck disable=SC2046
$cc -o "$tmp/embed-shared" "$src/tests/embed/embed.c" $(pkg-config --cflags --libs offkv) -Wl,-rpath,"$p/lib" ||
  fail "building against liboffkv.so"
ldd "$tmp/embed-shared" | grep -q "$p/lib/$soname" || fail "embed-shared does not load $p/lib/$soname"
out_shared=$("$tmp/embed-shared" "$model") || fail "embed-shared failed"
echo "shared: $out_shared" | tr '\n' ' '; echo

# Static: the whole program static, so -loffkv can only be liboffkv.a.
# shellcheck disable=SC2046
$cc -static -o "$tmp/embed-static" "$src/tests/embed/embed.c" $(pkg-config --static --cflags --libs offkv) ||
  fail "building against liboffkv.a"
out_static=$("$tmp/embed-static" "$model") || fail "embed-static failed"
echo "static: $out_static" | tr '\n' ' '; echo
[ "$out_static" = "$out_shared" ] || fail "static and shared programs disagree"

# Every global name liboffkv.a defines is okv_-prefixed: none of its
# internal helpers or of PCRE2's (linked in, made local) can clash with a
# program's own (issue 15, item 10).
nm -g --defined-only "$p/lib/liboffkv.a" 2>/dev/null | awk 'NF == 3 && $2 ~ /^[A-Z]$/ {print $3}' | sort -u >"$tmp/globals"
[ "$(wc -l <"$tmp/globals")" -gt 50 ] || fail "liboffkv.a defines only $(wc -l <"$tmp/globals") global names"
strays=$(grep -v '^okv_' "$tmp/globals" | head -n 20 | tr '\n' ' ')
[ -z "$strays" ] || fail "liboffkv.a defines global names without the okv_ prefix: $strays"
echo "liboffkv.a: $(wc -l <"$tmp/globals") global names, all okv_"
# A program that defines those names itself links statically and runs; its
# own pcre2_compile_8 is not the one the library's pre-tokenizer calls.
# shellcheck disable=SC2046
$cc -static -o "$tmp/clash" "$src/tests/embed/clash.c" $(pkg-config --static --cflags --libs offkv) \
  >"$tmp/clash.log" 2>&1 || { cat "$tmp/clash.log"; fail "a program with its own heap_push, pcre2_compile_8, ... does not link"; }
vocab="$src/../shared/vocab/ggml-vocab-gpt-2.gguf"
if [ -f "$vocab" ]; then
  "$tmp/clash" "$vocab" || fail "clash: the library's BPE pre-tokenizer with the program's own PCRE2 names"
else
  "$tmp/clash" || fail "clash"
  echo "clash: ../shared not found: the BPE pre-tokenizer run skipped"
fi

"$p/bin/offkv" run -m "$model" -p "Once upon a time" -n 4 --temp 0 >/dev/null 2>&1 || fail "installed offkv run"
echo "install: ok"
