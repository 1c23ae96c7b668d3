#!/bin/sh
# make bench-peer: offkv beside llama.cpp on the same synthetic GGUF files.
#
# llama.cpp twice: today's, as its own llama-bench (../shared/llama.cpp/,
# built from source with llama.cpp's run-time CPU variants; LLAMA_BENCH),
# and node-llama-cpp from npm (pinned below) with its prebuilt CPU
# libraries, installed into a cache folder outside the source tree on first
# use; nothing is compiled.  The TinyLlama-1.1B-shaped models
# are written by `offkv synth` into the same cache folder when missing.
# bench/peer/llama.mjs then times offkv and node-llama-cpp, taking turns
# run by run, runs llama-bench after each type, and prints the tables (also
# written to $BUILD/bench-peer.md), prefill also as a share of the compute
# peak that build/bench/peak measures first (and again after each type:
# the table keeps each figure's best reading).
#
# Knobs (environment):
#   BENCH_TYPES   weight types (default "f16 q8_0 q4_0 q4_k_m q6_k"); a type
#                 that offkv synth refuses is skipped, saying so
#   BENCH_REPS    measured runs per engine and test, after a warm-up; the
#                 table shows the median (default 3)
#   BENCH_THREADS threads for both engines and the bandwidth measure (default 2)
#   BENCH_QUICK=1 pp64, tg16, depth 512: checks that the script works
#   BENCH_SHAPE   tinyllama-1.1b (default), gemma3-1b (Gemma 3 1B's: rows of
#                 1152 values, which end in a part of a 512-value group in
#                 offkv's layouts, a 262144-token tied output, 5 of 6 layers
#                 sliding over 512 positions), llama3-8b (Llama 3 8B's shape
#                 cut to 4 of its 32 layers, with a 32000-token vocabulary:
#                 rows of 14336 values in the FFN down, wider than one sweep
#                 of the block passes takes in L1) or small (4 layers, n_embd
#                 512: for working on the script; its numbers mean little)
#   BENCH_FA      llama.cpp flash attention: auto (default, llama.cpp's CPU
#                 default), on or off
#   BENCH_MOE     1 (default): also two mixture-of-experts rows, cut to a
#                 size a 24 GB machine holds: Qwen3-30B-A3B's shape with 12
#                 of its 48 layers in Q4_K_M (about 4.6 GB) and gpt-oss-20b's
#                 with 8 of its 24 layers in MXFP4_MOE (about 4 GB), both
#                 with a 32000-token vocabulary; 0 leaves them out.  Their
#                 roofline counts the active experts' bytes only
#   BENCH_NLC     1 (default): node-llama-cpp takes turns with offkv; 0 leaves
#                 it out (its prefill at depth 4096 takes most of the time),
#                 uninstalled, and gives llama-bench the turns at depth 0 instead
#   LLAMA_BENCH   llama.cpp's llama-bench (default ../shared/llama.cpp/bin/llama-bench
#                 beside this checkout; when missing, its columns say –)
#   LLAMA_VARIANT the CPU variant llama.cpp may load (x64, haswell, icelake,
#                 zen4): its binary and libraries are copied into the cache
#                 folder without the other variants' libraries, because ggml
#                 loads the best one it finds beside the program.  Default:
#                 haswell when OKV_ISA=avx2 or avxvnni, so both engines run
#                 AVX2 code on an AVX-512 machine (this snapshot has no
#                 AVX-VNNI variant); otherwise llama.cpp's own choice
#   BUILD         offkv's build folder (default ./build)
set -eu

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/offkv/bench-peer
NLC_VERSION=3.22.1
TYPES=${BENCH_TYPES:-f16 q8_0 q4_0 q4_k_m q6_k}
SHAPE=${BENCH_SHAPE:-tinyllama-1.1b}

say() { echo "bench-peer: $*" >&2; }
die() { say "error: $*"; exit 1; }

[ -x "$BUILD/offkv" ] || die "$BUILD/offkv not built (run make bench-peer, which builds first)"
[ -x "$BUILD/bench/membw" ] || die "$BUILD/bench/membw not built"
[ -x "$BUILD/bench/peak" ] || die "$BUILD/bench/peak not built"
LLAMA_BENCH=${LLAMA_BENCH:-$ROOT/../shared/llama.cpp/bin/llama-bench}
[ -x "$LLAMA_BENCH" ] || say "no llama-bench at $LLAMA_BENCH: its columns stay empty (set LLAMA_BENCH)"
variant=${LLAMA_VARIANT:-}
[ -z "$variant" ] && { [ "${OKV_ISA:-}" = avx2 ] || [ "${OKV_ISA:-}" = avxvnni ]; } && variant=haswell
if [ -n "$variant" ] && [ -x "$LLAMA_BENCH" ]; then
    src=$(dirname "$LLAMA_BENCH")
    [ -f "$src/libggml-cpu-$variant.so" ] ||
        die "LLAMA_VARIANT '$variant': no $src/libggml-cpu-$variant.so (have: $(cd "$src" && ls libggml-cpu-*.so | sed 's/libggml-cpu-//; s/\.so//' | tr '\n' ' '))"
    dst=$CACHE/llama-$variant
    rm -rf "$dst" && mkdir -p "$dst"
    # Copies, not links: ggml looks for its variants beside the resolved program.
    for f in "$src"/*; do
        case $(basename "$f") in
        libggml-cpu-*.so) [ "$(basename "$f")" = "libggml-cpu-$variant.so" ] || continue ;;
        esac
        cp "$f" "$dst/"
    done
    LLAMA_BENCH=$dst/$(basename "$LLAMA_BENCH")
    say "llama.cpp limited to its $variant variant ($dst)"
fi
command -v node >/dev/null || die "node (Node.js >= 20) not found: it runs bench/peer/llama.mjs"

# --- llama.cpp: node-llama-cpp from npm, once (not for BENCH_NLC=0) -------
installed=$(cd "$CACHE" 2>/dev/null && node -p 'require("./node_modules/node-llama-cpp/package.json").version' 2>/dev/null || true)
if [ "${BENCH_NLC:-1}" != 0 ] && [ "$installed" != "$NLC_VERSION" ]; then
    command -v npm >/dev/null || die "npm not found: it installs node-llama-cpp (BENCH_NLC=0 runs without it)"
    # Only the prebuilt binaries for this machine: node-llama-cpp lists every
    # platform's (CUDA and Vulkan builds too, ~700 MB) as optional
    # dependencies, so those are omitted and this one is named.
    platform=$(node -p 'process.platform + "-" + process.arch')
    say "installing node-llama-cpp@$NLC_VERSION (+ @node-llama-cpp/$platform) from npm into $CACHE"
    mkdir -p "$CACHE"
    # Its postinstall would look for (and may try to download or compile)
    # llama.cpp; the prebuilt package makes that unnecessary, so it is
    # switched off with node-llama-cpp's own settings.
    NODE_LLAMA_CPP_SKIP_DOWNLOAD=true NODE_LLAMA_CPP_POSTINSTALL=skip \
        npm install --prefix "$CACHE" --save-exact --omit=optional --no-audit --no-fund \
        "node-llama-cpp@$NLC_VERSION" "@node-llama-cpp/$platform@$NLC_VERSION" >&2 ||
        die "npm install node-llama-cpp@$NLC_VERSION failed"
fi

# --- models --------------------------------------------------------------
case $SHAPE in
tinyllama-1.1b) shape="--n-embd 2048 --n-layer 22 --n-head 32 --n-head-kv 4 --n-ff 5632 --n-vocab 32000" ;;
gemma3-1b) shape="--arch gemma3 --n-embd 1152 --n-layer 26 --n-head 4 --n-head-kv 1 --head-dim 256 --n-ff 6912
                  --n-vocab 262144 --sliding-window 512 --rope-base 1000000 --rope-base-swa 10000 --ctx 32768" ;;
llama3-8b) shape="--n-embd 4096 --n-layer 4 --n-head 32 --n-head-kv 8 --n-ff 14336 --n-vocab 32000 --rope-base 500000 --ctx 8192" ;;
small) shape="--n-embd 512 --n-layer 4 --n-head 8 --n-head-kv 4 --n-ff 1408 --n-vocab 32000" ;;
*) die "BENCH_SHAPE '$SHAPE': expected tinyllama-1.1b, gemma3-1b, llama3-8b or small" ;;
esac
mkdir -p "$CACHE/models"
models=""
for t in $TYPES; do
    f=$CACHE/models/$SHAPE-$t.gguf
    if [ ! -f "$f" ]; then
        say "writing $f (offkv synth --type $t)"
        rc=0
        # shellcheck disable=SC2086 # $shape is a list of flags
        "$BUILD/offkv" synth $shape --type "$t" --seed 1 -o "$f.tmp" 2>"$CACHE/synth.err" || rc=$?
        if [ $rc -ne 0 ]; then
            rm -f "$f.tmp"
            if [ $rc -eq 2 ] && grep -q -- "--type" "$CACHE/synth.err"; then
                say "skipping $t: offkv synth does not write that type ($(tail -n 1 "$CACHE/synth.err"))"
                continue
            fi
            cat "$CACHE/synth.err" >&2
            die "offkv synth --type $t failed"
        fi
        mv "$f.tmp" "$f"
    fi
    models="$models $t=$f"
done
if [ "${BENCH_MOE:-1}" = 1 ]; then
    for m in "qwen3moe-q4_k_m:--preset qwen3-30b-a3b --n-layer 12 --n-vocab 32000 --type q4_k_m" \
             "gpt-oss-mxfp4_moe:--preset gpt-oss-20b --n-layer 8 --n-vocab 32000 --type mxfp4_moe"; do
        name=${m%%:*} flags=${m#*:}
        f=$CACHE/models/$name.gguf
        if [ ! -f "$f" ]; then
            say "writing $f (offkv synth $flags)"
            # shellcheck disable=SC2086 # $flags is a list of flags
            "$BUILD/offkv" synth $flags --seed 1 -o "$f.tmp" || die "offkv synth $flags failed"
            mv "$f.tmp" "$f"
        fi
        models="$models $name=$f"
    done
fi
[ -n "$models" ] || die "no model to measure (BENCH_TYPES='$TYPES')"

# --- memory read bandwidth, with the engines' thread count ----------------
bw=$("$BUILD/bench/membw" "${BENCH_THREADS:-2}" 5 | sed -n 's/^read GB\/s: //p')
[ -n "$bw" ] || die "build/bench/membw gave no bandwidth"

# --- the cores' compute peak, with the engines' thread count --------------
"$BUILD/bench/peak" "${BENCH_THREADS:-2}" >"$BUILD/bench-peak.txt" || die "build/bench/peak failed"

exec env OFFKV="$BUILD/offkv" NLC_DIR="$CACHE/node_modules/node-llama-cpp" BENCH_MODELS="$models" \
    BENCH_BW_GBS="$bw" BENCH_MEMBW="$BUILD/bench/membw" BENCH_OUT="$BUILD/bench-peer.md" BENCH_SHAPE="$SHAPE" \
    BENCH_PEAK="$BUILD/bench-peak.txt" BENCH_PEAK_BIN="$BUILD/bench/peak" LLAMA_BENCH="$LLAMA_BENCH" \
    OFFKV_COMMIT="$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)" \
    node "$ROOT/bench/peer/llama.mjs"
