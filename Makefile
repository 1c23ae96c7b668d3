# The two commands a newcomer types: `make run` and `make test`.
# Everything else (CMake configure, sanitizer build) hangs off them.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build build-san run test test-fast test-san bench bench-peer bench-serve clean

all: build

deps:
	@sh scripts/install-deps.sh

build: deps
	cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
	cmake --build build -j $(JOBS)

build-san: deps
	cmake -S . -B build-san -DCMAKE_BUILD_TYPE=Debug -DOKV_SANITIZE=ON
	cmake --build build-san -j $(JOBS)

# make run generates a story with the small real model shipped in models/
# (see models/README.md); MODEL=path.gguf runs any other model instead.
MODEL ?= models/stories260K.gguf
PROMPT ?= Once upon a time
run: build
	./build/offkv run -m "$(MODEL)" -p "$(PROMPT)" -n 64

# The whole suite, then the whole suite again under ASan + UBSan.
test: test-fast test-san

test-fast: build
	ctest --test-dir build --output-on-failure -j $(JOBS)

test-san: build-san
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir build-san --output-on-failure -j $(JOBS)

bench: build
	./build/bench/attend

# offkv beside llama.cpp (node-llama-cpp from npm, installed on first use
# into ~/.cache/offkv/bench-peer) on synthetic 1.1B models; knobs BENCH_TYPES,
# BENCH_REPS, BENCH_QUICK=1, BENCH_THREADS: see bench/peer/run.sh.
bench-peer: build
	sh bench/peer/run.sh

# The server under 1, 4 and 8 concurrent streams on a synthetic
# TinyLlama-1.1B-shaped Q4_0 model (written once into build/).
BENCH_MODEL ?= build/bench-models/tinyllama-1.1b-q4_0.gguf
bench-serve: build
	@test -f "$(BENCH_MODEL)" || ./build/offkv synth --n-embd 2048 --n-layer 22 --n-head 32 --n-head-kv 4 \
	  --n-ff 5632 --n-vocab 32000 --type q4_0 --seed 1 -o "$(BENCH_MODEL)"
	node bench/serve.mjs build "$(BENCH_MODEL)" 2

clean:
	rm -rf build build-san
