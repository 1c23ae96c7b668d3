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

# The whole suite, then the whole suite again under ASan + UBSan, then the
# threaded tests under TSan, valgrind on the CLI and the cache tests, and
# each fuzzer for a few seconds.
test: test-fast test-san test-tsan test-valgrind test-fuzz test-arm

test-fast: build
	ctest --test-dir build --output-on-failure -j $(JOBS)

test-san: build-san
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir build-san --output-on-failure -j $(JOBS)

bench: build
	./build/bench/attend

# offkv beside llama.cpp (node-llama-cpp from npm, installed on first use
# into ~/.cache/offkv/bench-peer, unless BENCH_NLC=0) on synthetic 1.1B models; knobs BENCH_TYPES,
# BENCH_REPS, BENCH_QUICK=1, BENCH_THREADS: see bench/peer/run.sh.
bench-peer: build
	sh bench/peer/run.sh

# The server under 1, 4 and 8 concurrent streams on a synthetic
# TinyLlama-1.1B-shaped Q4_0 model (written once into build/).
BENCH_MODEL ?= build/bench-models/tinyllama-1.1b-q4_0.gguf
bench-serve: build
	@mkdir -p "$(dir $(BENCH_MODEL))"
	@test -f "$(BENCH_MODEL)" || ./build/offkv synth --n-embd 2048 --n-layer 22 --n-head 32 --n-head-kv 4 \
	  --n-ff 5632 --n-vocab 32000 --type q4_0 --seed 1 -o "$(BENCH_MODEL)"
	node bench/serve.mjs build "$(BENCH_MODEL)" 2

clean:
	rm -rf build build-san build-tsan build-fuzz build-arm

# ---- aarch64 under emulation: make test-arm (build-arm/, in make test) ----
# Cross-compiles with Debian's gcc-aarch64-linux-gnu (cmake/aarch64-linux-gnu.cmake)
# and runs the plain ctest suite under qemu-aarch64 -cpu max, which has
# every ARM level offkv uses (neon, dotprod, i8mm).  The kernel tests
# (matmul, x16, quant) try every level in one run against the scalar bits;
# the others run at the best one (i8mm), then the model goldens again with
# OKV_ISA=neon and OKV_ISA=dotprod (kquant_golden runs the best level only
# there: OKV_TEST_EMULATED).  Emulation is 10-50x slower, so these stay out
# (each runs natively in make test-fast, none has ARM-specific code):
# ARM_SKIP_TESTS.  About 10 minutes on 2 busy cores (x16, every layout at
# every level, is half of it).  Skipped, saying so, without the cross compiler or qemu
# (scripts/install-deps.sh installs them; OKV_NO_ARM=1 leaves them out).
ARM_SKIP_TESTS := cli cli_spec cache_attend batch ring_memory prompt_cache quantize_ggml \
  fuzz_alloc_fail fuzz_alloc_fail_bpe fuzz_cli fuzz_cli_logits_output fuzz_cli_synth_window \
  fuzz_context_alloc fuzz_eval fuzz_model_bytes fuzz_replay_model speculative probe_cli cli_chat cli_tty
ARM_GOLDEN_TESTS := llama_golden swa_golden kquant_golden dense_golden attend_kernel kv_q8 f16
ARM_LEVELS := neon dotprod
arm_skip_re = ^($(subst $() ,|,$(strip $(ARM_SKIP_TESTS))))$$
arm_golden_re = ^($(subst $() ,|,$(strip $(ARM_GOLDEN_TESTS))))$$
have_arm = command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && command -v qemu-aarch64 >/dev/null 2>&1
.PHONY: build-arm test-arm
build-arm: deps
	@if $(have_arm); then \
	  cmake -S . -B build-arm -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release && \
	  cmake --build build-arm -j $(JOBS); \
	else echo "make build-arm: skipped: no aarch64-linux-gnu-gcc or qemu-aarch64 (scripts/install-deps.sh installs them)"; fi

test-arm: build-arm
	@if [ -f build-arm/CTestTestfile.cmake ] && $(have_arm); then \
	  ctest --test-dir build-arm --output-on-failure -j $(JOBS) --timeout 900 -E '$(arm_skip_re)' && \
	  $(foreach l,$(ARM_LEVELS),echo "== OKV_ISA=$(l)" && \
	    OKV_ISA=$(l) ctest --test-dir build-arm --output-on-failure -j $(JOBS) --timeout 900 -R '$(arm_golden_re)' &&) true; fi

# ---- Fuzzing: libFuzzer targets in fuzz/ (clang; build-fuzz/) ----------
# make fuzz FUZZ_SECONDS=N runs every target N seconds; make test-fuzz runs
# each for FUZZ_SMOKE_SECONDS.  New inputs go to build-fuzz/corpus/NAME,
# crashes to build-fuzz/crashes/; fuzz/corpus/NAME seeds every run, and the
# shared tiny models seed the model and GGUF targets when ../shared exists.
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 12
FUZZ_TARGETS := gguf model tokenizer cache jinja grammar chat
FUZZ_CC ?= clang
SHARED ?= ../shared
fuzz_seeds_gguf := fuzz/corpus/model
fuzz_seeds_model := $(wildcard $(SHARED)/models)
fuzz_seeds_jinja := $(wildcard $(SHARED)/templates/src)
# Inputs past these sizes are cut; a cut model is just a refused file.
fuzz_max_len_gguf := 65536
fuzz_max_len_model := 3000000
fuzz_max_len_tokenizer := 4096
fuzz_max_len_cache := 1024
fuzz_max_len_grammar := 8192
fuzz_max_len_jinja := 16384
fuzz_max_len_chat := 2049
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
  ./build-fuzz/fuzz/fuzz_$(1) -max_total_time=$(2) -print_final_stats=1 -rss_limit_mb=3072 -timeout=30 \
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

# ---- ThreadSanitizer: make test-tsan (build-tsan/) -----------------------
# The tests that run the thread pool, share caches through the registry or
# run several contexts and batches; each must finish without a report.
TSAN_TESTS := threads attend_kernel cache_attend cache_sequence ring_memory matmul batch \
  model_rewind probe_api fuzz_context_alloc llama_golden cli serve_sched model_load_threads
# The server's node tests drive build-tsan's offkv (built above) over HTTP.
TSAN_NODE_TESTS := serve_hostile serve_openai serve_load
.PHONY: build-tsan test-tsan
build-tsan: deps
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
	  -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread
	cmake --build build-tsan -j $(JOBS) --target tool_offkv $(addprefix test_,$(TSAN_TESTS))

test-tsan: build-tsan
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 allocator_may_return_null=1" \
	  ctest --test-dir build-tsan --output-on-failure -j $(JOBS) -R '^($(subst $() ,|,$(strip $(TSAN_TESTS) $(TSAN_NODE_TESTS))))$$'

# ---- valgrind memcheck: make test-valgrind (in make test), make check-deep ----
# 0 errors and 0 bytes definitely lost, or the target fails.  test-valgrind
# runs what fits make test's time; check-deep adds the slow ones (minutes).
VALGRIND := valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite
VALGRIND_TESTS := cache_sequence cache_property
VALGRIND_DEEP_TESTS := cache_attend ring_memory
.PHONY: test-valgrind check-deep
test-valgrind: build
	@if ! command -v valgrind >/dev/null 2>&1; then echo "make test-valgrind: skipped: valgrind not installed (scripts/install-deps.sh installs it)"; else \
	  echo "valgrind: offkv run" && \
	  $(VALGRIND) ./build/offkv run -m models/stories260K.gguf -p "Once upon a time" -n 64 --temp 0 -t 2 >/dev/null 2>build/valgrind-run.log || \
	    { cat build/valgrind-run.log; false; } && \
	  echo "valgrind: offkv chat" && \
	  printf '%s\n' "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}" >build/valgrind-chat.jinja && \
	  rm -f build/valgrind-chat.json build/valgrind-chat.seq && \
	  printf 'Once upon a time\nThe cat\\\nsat\n/clear\nThe dog\n' | $(VALGRIND) ./build/offkv chat -m models/stories260K.gguf \
	    --chat-template-file build/valgrind-chat.jinja --history build/valgrind-chat.json --temp 0 -n 16 -c 160 -t 2 \
	    --prompt-cache build/valgrind-chat.seq >/dev/null 2>build/valgrind-chat.log || { cat build/valgrind-chat.log; false; } && \
	  echo "valgrind: offkv chat, the conversation goes on from its history and prompt cache, past -c" && \
	  printf 'A bird\nThe sun\nThe moon\n' | $(VALGRIND) ./build/offkv chat -m models/stories260K.gguf \
	    --chat-template-file build/valgrind-chat.jinja --history build/valgrind-chat.json --temp 0 -n 40 -c 160 -t 2 \
	    --prompt-cache build/valgrind-chat.seq \
	    >/dev/null 2>build/valgrind-chat.log || { cat build/valgrind-chat.log; false; } && \
	  $(foreach t,$(VALGRIND_TESTS),echo "valgrind: test_$(t)" && (cd build && OKV_SHARED=$(abspath $(SHARED)) OKV_BIN=$(CURDIR)/build \
	    $(VALGRIND) ./tests/test_$(t) >/dev/null) &&) true; fi

# check-deep also runs the server's request fuzzer (bodies and request
# heads, test_fuzz_serve_request) under ASan + UBSan for ten minutes
# (DEEP_SERVE_FUZZ_SECONDS).
check-deep: test-valgrind build-san
	@$(foreach t,$(VALGRIND_DEEP_TESTS),echo "valgrind: test_$(t)" && (cd build && OKV_SHARED=$(abspath $(SHARED)) OKV_BIN=$(CURDIR)/build \
	  $(VALGRIND) ./tests/test_$(t) >/dev/null) &&) true
	@echo "fuzz_serve_request: $(or $(DEEP_SERVE_FUZZ_SECONDS),600) s under ASan + UBSan" && \
	  OKV_FUZZ_SECONDS=$(or $(DEEP_SERVE_FUZZ_SECONDS),600) ./build-san/tests/test_fuzz_serve_request | tail -n 2
	$(MAKE) fuzz FUZZ_SECONDS=$(or $(DEEP_FUZZ_SECONDS),300)
