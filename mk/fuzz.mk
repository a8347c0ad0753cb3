# libFuzzer harnesses (tests/fuzz/fuzz_NAME.c, seeds in tests/fuzz/corpus/NAME/,
# dictionaries tests/fuzz/NAME.dict; docs/server.md "Fuzzing").
#
#   make fuzz                  each harness for FUZZ_SECONDS (60) in turn; prints
#                              execs/s, coverage, corpus size and crashes per harness
#   make fuzz FUZZ_TARGETS="range sse" FUZZ_SECONDS=300
#   make fuzz-build            only build them ($(BUILD)/fuzz/fuzz_NAME)
#   make fuzz-regress          each seed corpus once (what `make test` runs, through
#                              tests/integration/test_fuzz_corpus.sh)
#
# Built with clang apart from the release and ASan builds: the sources the
# harnesses link are compiled again into $(BUILD)/fuzz/obj with
# -fsanitize=fuzzer-no-link,address,undefined (libFuzzer's coverage and
# comparison hooks plus the sanitizers), archived into $(BUILD)/fuzz/lib, and
# each harness is linked with -fsanitize=fuzzer (libFuzzer's main).  Without
# CUDA: core's CUDA engine takes its no-CUDA branch, as with NVCC=false (no
# harness reaches a device).  New corpus entries land in
# $(BUILD)/fuzz/corpus/NAME, crashes in $(BUILD)/fuzz/artifacts/NAME/.

FUZZ_CC      ?= clang
FUZZ_CXX     ?= clang++
FUZZ_SECONDS ?= 60
FUZZ_DIR      = $(BUILD)/fuzz
FUZZ_SRC     := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES   := $(patsubst tests/fuzz/fuzz_%.c,%,$(FUZZ_SRC))
FUZZ_TARGETS ?= $(FUZZ_NAMES)
FUZZERS       = $(patsubst %,$(FUZZ_DIR)/fuzz_%,$(FUZZ_NAMES))

FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# Deferred (=): mk/server.mk, included after this file, adds -Iserver to CPPFLAGS.
FUZZ_CPPFLAGS = $(filter-out -DRC_HAVE_CUDA=1 -I$(CUDA_HOME)/include,$(CPPFLAGS))
# GCC's optimize attributes and target pragmas (core's projectors tune
# vectorisation with them) are unknown to clang: it ignores them, and so may we.
FUZZ_CFLAGS   = -O1 -g -std=c11 -ffp-contract=off $(WARN) -Wno-unknown-attributes -Wno-unknown-pragmas -pthread $(ARCHFLAGS) $(FUZZ_SAN)
# vptr would need clang++'s C++ UBSan runtime at link time; the harnesses link with clang.
FUZZ_CXXFLAGS = -O1 -g -std=c++17 -ffp-contract=off $(WARN) -pthread $(ARCHFLAGS) $(FUZZ_SAN) -fno-sanitize=vptr
FUZZ_LDLIBS   = $(filter-out $(CUDA_LDLIBS),$(LDLIBS)) -lstdc++

fuzz_obj = $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(patsubst %.cc,$(FUZZ_DIR)/obj/%.o,$(1)))
FUZZ_LIBS := $(BUILD)/fuzz/lib/libreconserver.a $(BUILD)/fuzz/lib/libreconclient.a \
             $(BUILD)/fuzz/lib/libreconworker.a $(BUILD)/fuzz/lib/libreconcore.a

.PHONY: fuzz _fuzz fuzz-build _fuzz-build fuzz-regress
fuzz: deps
	@$(MAKE) --no-print-directory fuzz-build && $(MAKE) --no-print-directory _fuzz
_fuzz:
	@bash scripts/run-fuzz.sh fuzz $(BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)
fuzz-regress: fuzz-build
	@bash scripts/run-fuzz.sh regress $(BUILD) 0 $(FUZZ_TARGETS)
# The generated headers first (GEN_HEADERS is complete only once every
# mk/*.mk is read, i.e. in a recipe), then the harnesses.
fuzz-build:
	@$(MAKE) --no-print-directory $(GEN_HEADERS) && $(MAKE) --no-print-directory _fuzz-build
_fuzz-build: $(FUZZERS)

$(BUILD)/fuzz/obj/server/worker/%.o: FUZZ_CPPFLAGS = $(filter-out -DRC_HAVE_CUDA=1 -I$(CUDA_HOME)/include,$(WORKER_CPPFLAGS))
$(BUILD)/fuzz/obj/%_avx2.o: %_avx2.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(AVX2_FLAGS) -MMD -MP -c $< -o $@
$(BUILD)/fuzz/obj/%_avx512.o: %_avx512.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(AVX512_FLAGS) -MMD -MP -c $< -o $@
$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@
$(BUILD)/fuzz/obj/%.o: %.cc
	@mkdir -p $(@D)
	$(FUZZ_CXX) $(FUZZ_CPPFLAGS) $(FUZZ_CXXFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(BUILD)/fuzz/lib/libreconcore.a: $(call fuzz_obj,$(CORE_SRC))
	@mkdir -p $(@D); rm -f $@; ar rcs $@ $^
$(BUILD)/fuzz/lib/libreconworker.a: $(call fuzz_obj,$(WORKER_SRC))
	@mkdir -p $(@D); rm -f $@; ar rcs $@ $^
$(BUILD)/fuzz/lib/libreconserver.a: $(call fuzz_obj,$(SERVER_SRC) $(SERVER_CXX_SRC))
	@mkdir -p $(@D); rm -f $@; ar rcs $@ $^
$(BUILD)/fuzz/lib/libreconclient.a: $(call fuzz_obj,$(CLIENT_SRC))
	@mkdir -p $(@D); rm -f $@; ar rcs $@ $^

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIBS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer $< -o $@ $(FUZZ_LIBS) $(FUZZ_LDLIBS)
