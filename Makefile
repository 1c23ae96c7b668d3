# The two commands a newcomer types: `make run` and `make test`.
# Everything else (CMake configure, sanitizer build) hangs off them.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build build-san run test test-fast test-san bench bench-peer clean

all: build

deps:
	@sh scripts/install-deps.sh

build: deps
	cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
	cmake --build build -j $(JOBS)

build-san: deps
	cmake -S . -B build-san -DCMAKE_BUILD_TYPE=Debug -DOKV_SANITIZE=ON
	cmake --build build-san -j $(JOBS)

# make run MODEL=path.gguf generates from a real model; without MODEL it
# makes a small random-weight model first, whose text is gibberish.
PROMPT ?= Once upon a time
run: build
ifdef MODEL
	./build/offkv run -m "$(MODEL)" -p "$(PROMPT)" -n 64
else
	./build/offkv synth --seed 1 -o build/synth-demo.gguf
	@echo
	@echo "*** No MODEL=path.gguf given: running build/synth-demo.gguf, a synthetic model with"
	@echo "*** RANDOM weights. Its text is gibberish; only the machinery is real."
	@echo
	./build/offkv run -m build/synth-demo.gguf -p "$(PROMPT)" -n 64
endif

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

clean:
	rm -rf build build-san
