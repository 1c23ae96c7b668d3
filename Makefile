# The two commands a newcomer types: `make run` and `make test`.
# Everything else (CMake configure, sanitizer build) hangs off them.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build build-san run test test-fast test-san bench clean

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

clean:
	rm -rf build build-san

# ---- Fuzzing: libFuzzer targets in fuzz/ (clang; build-fuzz/) ----------
# make fuzz FUZZ_SECONDS=N runs every target N seconds; make test-fuzz runs
# each for FUZZ_SMOKE_SECONDS.  New inputs go to build-fuzz/corpus/NAME,
# crashes to build-fuzz/crashes/; fuzz/corpus/NAME seeds every run, and the
# shared tiny models seed the model and GGUF targets when ../shared exists.
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 12
FUZZ_TARGETS := gguf model tokenizer cache
FUZZ_CC ?= clang
SHARED ?= ../shared
fuzz_seeds_gguf := fuzz/corpus/model $(wildcard $(SHARED)/vocab)
fuzz_seeds_model := $(wildcard $(SHARED)/models)
# Inputs past these sizes are cut; a cut model is just a refused file.
fuzz_max_len_gguf := 2000000
fuzz_max_len_model := 3000000
fuzz_max_len_tokenizer := 4096
fuzz_max_len_cache := 1024
have_libfuzzer = printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' | \
  $(FUZZ_CC) -fsanitize=fuzzer -x c - -o /dev/null >/dev/null 2>&1

.PHONY: build-fuzz fuzz test-fuzz
build-fuzz: deps
	@if $(have_libfuzzer); then \
	  CC=$(FUZZ_CC) cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOKV_SANITIZE=ON -DOKV_FUZZ=ON && \
	  cmake --build build-fuzz -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS)); \
	else echo "make build-fuzz: skipped: $(FUZZ_CC) cannot link libFuzzer (scripts/install-deps.sh installs clang and libclang-rt-14-dev)"; fi

# $(1): target, $(2): seconds
fuzz_run = mkdir -p build-fuzz/corpus/$(1) build-fuzz/crashes && \
  ./build-fuzz/fuzz/fuzz_$(1) -max_total_time=$(2) -print_final_stats=1 -rss_limit_mb=4096 \
    -max_len=$(fuzz_max_len_$(1)) -artifact_prefix=build-fuzz/crashes/$(1)- \
    build-fuzz/corpus/$(1) fuzz/corpus/$(1) $(fuzz_seeds_$(1))

fuzz: build-fuzz
	@if [ -x build-fuzz/fuzz/fuzz_gguf ]; then \
	  $(foreach t,$(FUZZ_TARGETS),echo "== fuzz_$(t): $(FUZZ_SECONDS) s" && $(call fuzz_run,$(t),$(FUZZ_SECONDS)) &&) true; fi

test-fuzz: build-fuzz
	@if [ -x build-fuzz/fuzz/fuzz_gguf ]; then \
	  $(foreach t,$(FUZZ_TARGETS),echo "== fuzz_$(t): $(FUZZ_SMOKE_SECONDS) s smoke" && \
	    $(call fuzz_run,$(t),$(FUZZ_SMOKE_SECONDS)) > build-fuzz/fuzz_$(t).log 2>&1 && \
	    grep -E '^(stat::number_of_executed_units|#[0-9]+.*DONE)' build-fuzz/fuzz_$(t).log | tail -1 || \
	    { tail -n 60 build-fuzz/fuzz_$(t).log; false; } &&) true; fi

# ---- Install: make install PREFIX=DIR ------------------------------------
# liboffkv.a, liboffkv.so.MAJOR, include/offkv/, lib/pkgconfig/offkv.pc and
# bin/offkv under PREFIX (offkv.pc is relocatable: any PREFIX works).
PREFIX ?= /usr/local
.PHONY: install
install: build
	cmake --install build --prefix "$(PREFIX)"
