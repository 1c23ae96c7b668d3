#!/bin/sh
# Installs, from Debian's packages, whatever the build needs and the machine
# lacks.  Safe to run repeatedly: it does nothing when all is present.
set -e
need=""
command -v cmake >/dev/null 2>&1 || need="$need cmake"
command -v make >/dev/null 2>&1 || need="$need make"
command -v gcc >/dev/null 2>&1 || need="$need gcc"
command -v ctest >/dev/null 2>&1 || need="$need cmake"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
# The BPE tokenizer's pre-tokenizer regexes need Unicode classes: PCRE2.
# Asked of pkg-config, else of dpkg, so a missing pkg-config does not hide it.
pkg-config --exists libpcre2-8 2>/dev/null ||
  dpkg-query -W -f='${Status}' libpcre2-dev 2>/dev/null | grep -q 'install ok installed' ||
  need="$need libpcre2-dev"
# offkv serve: libmicrohttpd (HTTP, threads, chunked responses) and cJSON.
for pkg in libmicrohttpd:libmicrohttpd-dev libcjson:libcjson-dev; do
  pc=${pkg%%:*}; deb=${pkg#*:}
  pkg-config --exists "$pc" 2>/dev/null ||
    dpkg-query -W -f='${Status}' "$deb" 2>/dev/null | grep -q 'install ok installed' ||
    need="$need $deb"
done
# The chat page's browser test drives Debian's chromium headless (the test
# skips, saying so, without it).  OKV_NO_BROWSER=1 leaves it out.
if [ -z "${OKV_NO_BROWSER:-}" ] && ! command -v chromium >/dev/null 2>&1; then need="$need chromium"; fi
# The server's client tests run node scripts (npm installs their pinned
# packages under the build folder; they skip, saying so, without node).
command -v node >/dev/null 2>&1 || need="$need nodejs"
command -v npm >/dev/null 2>&1 || need="$need npm"
# libasan/libubsan/libtsan come with gcc's runtime packages on Debian 12.
# The fuzzers need clang and its libFuzzer runtime, which Debian ships apart
# (libclang-rt-14-dev, only recommended by clang): probed by linking one.
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' |
  clang -fsanitize=fuzzer -x c - -o /dev/null >/dev/null 2>&1 ||
  need="$need clang libclang-rt-14-dev"
# make test runs the CLI and the cache tests under valgrind, and the Python
# binding's tests with the system python3.
command -v valgrind >/dev/null 2>&1 || need="$need valgrind"
command -v python3 >/dev/null 2>&1 || need="$need python3"
# The deploy_yaml test reads deploy/offkv.yaml with PyYAML (it skips without).
python3 -c 'import yaml' >/dev/null 2>&1 || need="$need python3-yaml"
# make test-arm: Debian's aarch64 cross compiler, qemu's user-mode emulator
# and the arm64 PCRE2 (and server libraries) through multiarch
# (dpkg --add-architecture arm64, below).  OKV_NO_ARM=1 leaves them out.
arm=""
if [ -z "${OKV_NO_ARM:-}" ]; then
  command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || arm="$arm gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
  command -v qemu-aarch64 >/dev/null 2>&1 || arm="$arm qemu-user"
  for deb in libpcre2-dev libmicrohttpd-dev libcjson-dev; do
    dpkg-query -W -f='${Status}' "$deb:arm64" 2>/dev/null | grep -q 'install ok installed' || arm="$arm $deb:arm64"
  done
fi
[ -n "$need$arm" ] || exit 0
need="$need$arm"
echo "offkv: installing missing packages:$need"
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "offkv: need root to install:$need (apt-get install$need)" >&2; exit 1
  fi
fi
if [ -n "$arm" ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  ${SUDO:-} dpkg --add-architecture arm64
fi
${SUDO:-} apt-get update -q
DEBIAN_FRONTEND=noninteractive ${SUDO:-} apt-get install -y -q $need
