# recond build.  `make run` and `make test` install missing Debian packages
# first (scripts/install-deps.sh), then re-enter make so that pkg-config sees
# them.  Modules are found by wildcard; a part with extra build steps (CUDA,
# embedded OpenCL kernels) adds them in its own mk/*.mk.
#
#   core/**/*.c              -> build/lib/libreconcore.a   (no HTTP, no SQL)
#   core/**/*_avx2.c, *_avx512.c compiled with those ISA flags; callers
#                               dispatch at run time (__builtin_cpu_supports)
#   server/worker/*.c        -> libreconworker.a: the worker's floor (job spec,
#                               durable writes, protocol); compiled without
#                               -Iserver, so it cannot include the daemon
#   server/**/*.c (not worker/), clients/*.c -> libreconserver.a, libreconclient.a
#   */main_NAME.c            -> build/bin/NAME; recond-worker links only
#                               libreconworker.a + libreconcore.a and
#                               $(WORKER_LDLIBS): no SQLite, no libmicrohttpd
#   tests/unit/test_*.c      -> build/tests/test_* and, with ASan+UBSan,
#                               build/asan/tests/test_*
#   bench/main_*.c           -> build/bin/*, run by `make bench`
#   make check-layout        floors and cycles of includes, and of calls between
#                            the daemon's files (scripts/check-layout.sh, nm on
#                            its objects); `make test` runs it first

.DEFAULT_GOAL := all
SHELL := /bin/bash

BUILD   ?= build
CC      ?= cc
PREFIX  ?= /usr/local
PKGS    := libmicrohttpd jansson uuid sqlite3 libpq fftw3f fftw3 OpenCL libxxhash libcurl libsystemd cmocka libarchive libpng \
           libxml-2.0

# Portable baseline (any x86-64); wider paths are separate files chosen at run time.
ARCHFLAGS ?= -march=x86-64 -mtune=generic
WARN      := -Wall -Wextra -Werror
CPPFLAGS  += -D_GNU_SOURCE -Icore -I$(BUILD)/gen -I/usr/include/nifti
CPPFLAGS  += -DCL_TARGET_OPENCL_VERSION=120
# libxml2: RTK's geometry XML (server/worker/spec_rtk.c)
CPPFLAGS  += $(shell pkg-config --cflags libxml-2.0 2>/dev/null || echo -I/usr/include/libxml2)
CFLAGS    ?= -O3 -g
# `override`: a CFLAGS given on the command line (make CFLAGS=-O2) keeps
# these.  -ffp-contract=off (also implied by -std=c11) keeps a*b+c two
# roundings in C code: the ISA paths of the ray caster and its transpose are
# tested to be bit-identical, which a contracted FMA in one of them breaks.
override CFLAGS += -std=c11 -ffp-contract=off $(WARN) -pthread $(ARCHFLAGS)
# C++ only where a library demands it (server/pacs/dicom_dcmtk.cc: DCMTK behind server/pacs/dicom_dcmtk.h).
CXX       ?= g++
CXXFLAGS  ?= -O3 -g
override CXXFLAGS += -std=c++17 -ffp-contract=off $(WARN) -pthread $(ARCHFLAGS)
ASAN_FLAGS := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
LDLIBS    += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lniftiio -lznz -lz -lm -lpthread
# DCMTK (server/pacs/dicom_dcmtk.cc; its dcmtk.pc asks for more than these) and the
# C++ runtime, as programs and tests are linked by $(CC).
LDLIBS    += -ldcmnet -ldcmdata -loflog -lofstd -lstdc++
# What libreconcore.a needs (mk/cuda.mk adds the CUDA runtime); the worker
# links this, jansson and libxml2, nothing of the daemon's.
CORE_LDLIBS := $(shell pkg-config --libs fftw3f fftw3 OpenCL libxxhash 2>/dev/null) -lm -lpthread
AVX2_FLAGS   := -mavx2 -mfma
AVX512_FLAGS := -mavx512f -mavx512vl -mavx512dq -mavx512bw -mavx2 -mfma

CORE_SRC   := $(sort $(shell find core -name '*.c'))
WORKER_SRC := $(filter-out server/worker/main_%.c,$(wildcard server/worker/*.c))
# The daemon's floors (server/base, store, pacs, live, jobs, http) and its top
# (server/*.c); server/worker/ is the worker's own library.  Objects keep
# their folders (build/rel/server/http/http.o), so names stay unique.
DAEMON_SRC  := $(sort $(shell find server -path server/worker -prune -o -type f -print))
SERVER_SRC := $(filter-out server/main_%.c,$(filter %.c,$(DAEMON_SRC)))
SERVER_CXX_SRC := $(filter %.cc,$(DAEMON_SRC))
CLIENT_SRC := $(filter-out clients/main_%.c,$(wildcard clients/*.c))
PROG_SRC   := $(wildcard server/main_*.c server/worker/main_*.c clients/main_*.c tools/main_*.c)
BENCH_SRC  := $(wildcard bench/main_*.c)
TEST_SRC   := $(wildcard tests/unit/test_*.c)

obj = $(patsubst %.c,$(BUILD)/$(1)/%.o,$(2))
objcc = $(patsubst %.cc,$(BUILD)/$(1)/%.o,$(2))

# Extra objects from mk/*.mk (CUDA, embedded kernels) land in these.
EXTRA_CORE_OBJS :=
GEN_HEADERS :=
-include $(sort $(wildcard mk/*.mk))

CORE_OBJS   := $(call obj,rel,$(CORE_SRC))
WORKER_OBJS := $(call obj,rel,$(WORKER_SRC))
SERVER_OBJS := $(call obj,rel,$(SERVER_SRC)) $(call objcc,rel,$(SERVER_CXX_SRC))
CLIENT_OBJS := $(call obj,rel,$(CLIENT_SRC))
LIBS_REL    := $(BUILD)/lib/libreconserver.a $(BUILD)/lib/libreconclient.a $(BUILD)/lib/libreconworker.a \
               $(BUILD)/lib/libreconcore.a
LIBS_ASAN   := $(BUILD)/asan/lib/libreconserver.a $(BUILD)/asan/lib/libreconclient.a \
               $(BUILD)/asan/lib/libreconworker.a $(BUILD)/asan/lib/libreconcore.a
# The worker is its own floor (docs/architecture.md): core and server/worker,
# compiled without the daemon's -Iserver and linked without its libraries.
WORKER_LIBS_REL := $(BUILD)/lib/libreconworker.a $(BUILD)/lib/libreconcore.a
WORKER_CPPFLAGS := $(filter-out -Iserver,$(CPPFLAGS))
WORKER_LDLIBS   := $(shell pkg-config --libs jansson libxml-2.0 2>/dev/null || echo -ljansson -lxml2) $(CORE_LDLIBS)
PROGS       := $(patsubst main_%,$(BUILD)/bin/%,$(basename $(notdir $(PROG_SRC))))
BENCHES     := $(patsubst main_%,$(BUILD)/bin/%,$(basename $(notdir $(BENCH_SRC))))
TESTS       := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(TEST_SRC))
ASAN_TESTS  := $(patsubst tests/unit/%.c,$(BUILD)/asan/tests/%,$(TEST_SRC))

.PHONY: all deps run test bench install clean check-build check-layout _run _test _bench tests
all: $(LIBS_REL) $(PROGS) $(BENCHES)
tests: $(TESTS) $(ASAN_TESTS)

deps:
	@bash scripts/install-deps.sh

run: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all && $(MAKE) --no-print-directory _run
test: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all tests && $(MAKE) --no-print-directory _test
bench: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all && $(MAKE) --no-print-directory _bench

_test: all tests check-layout
	@bash scripts/run-tests.sh $(BUILD)

# Floors and cycles (docs/architecture.md): an include that goes up a floor
# or closes a cycle fails, resolved with the -I directories above; so does a
# call between the daemon's files that goes up a floor or closes a cycle,
# read with nm from their release objects (built first).
check-layout: $(SERVER_OBJS)
	@bash scripts/check-layout.sh $(filter-out -I/%,$(filter -I%,$(CPPFLAGS))) --calls $(BUILD)/rel

_bench: all
	@bash scripts/run-bench.sh $(BUILD)

# recond against RTK (cone) and ASTRA (fan) on the same projections (docs/peers.md): creates
# $(BUILD)/peers-venv from PyPI on first use (itk-rtk, astra-toolbox, numpy), checks the geometry
# mappings, then prints one table per case.  BENCH_PEERS_QUICK=1: small sizes, no RabbitCT.
.PHONY: bench-peers _bench-peers
bench-peers: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all && $(MAKE) --no-print-directory _bench-peers
_bench-peers: all
	@python3 scripts/bench-peers.py --build $(BUILD)

# Out-of-core FDK under a memory budget (docs/server.md "Memory"): the issue's 2048x2048x1024 from
# 1200 views of 2048x1536 under 8 GiB by default (30 GiB written first); BENCH_LARGE_ARGS="--scale 4"
# divides every size by 4 (scripts/bench-large.py --help).  Not part of make test.
.PHONY: bench-large _bench-large
bench-large: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all && $(MAKE) --no-print-directory _bench-large
_bench-large: all
	@/usr/bin/python3 scripts/bench-large.py --build $(BUILD) $(BENCH_LARGE_ARGS)

# The daemon on 127.0.0.1:8080 with its store in ./var (docs/server.md).
_run: all
	@mkdir -p var && exec $(BUILD)/bin/recond --listen 127.0.0.1:8080 --store ./var

# --- objects --------------------------------------------------------------
$(BUILD)/rel/server/worker/%.o $(BUILD)/asan/server/worker/%.o: CPPFLAGS := $(WORKER_CPPFLAGS)
# Square roots of arguments that are never negative (the TV weights, >=
# eps^2; the splat gain, a squared norm; the cylinder's in-plane distance)
# never set errno: without math-errno GCC vectorises them (tv_host.c,
# proj_splat.c, proj_cyl.c).
NO_ERRNO_OBJS := core/backend/tv_host.o core/projectors/proj_splat.o core/projectors/proj_cyl.o
$(addprefix $(BUILD)/rel/,$(NO_ERRNO_OBJS)) $(addprefix $(BUILD)/asan/,$(NO_ERRNO_OBJS)): CFLAGS += -fno-math-errno
# The guarded inverse (core/backend/elementwise_ops.h) divides under a
# condition; GCC if-converts (vectorises) such a loop only when a division
# may not trap.  -fno-trapping-math changes no value, only what may be
# assumed about floating-point exception flags, which nothing reads.  The
# counts conversion (core/util/counts.c) clamps with float compares, which
# GCC if-converts only under the same flag, as the cylinder's column set-up
# (core/projectors/proj_cyl.c) its selects and float-to-int conversions,
# as the footprint pair's column loops (proj_footprint_col.h) their overlaps.
NO_TRAP_OBJS := core/backend/vec_host.o core/util/counts.o core/util/counts_avx2.o core/util/counts_avx512.o \
	core/projectors/proj_cyl.o
NO_TRAP_OBJS += core/projectors/proj_footprint.o core/projectors/proj_footprint_avx2.o \
	core/projectors/proj_footprint_avx512.o
$(addprefix $(BUILD)/rel/,$(NO_TRAP_OBJS)) $(addprefix $(BUILD)/asan/,$(NO_TRAP_OBJS)): CFLAGS += -fno-trapping-math
$(BUILD)/rel/%_avx2.o: %_avx2.c $(GEN_HEADERS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(AVX2_FLAGS) -MMD -MP -c $< -o $@
$(BUILD)/rel/%_avx512.o: %_avx512.c $(GEN_HEADERS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(AVX512_FLAGS) -MMD -MP -c $< -o $@
$(BUILD)/rel/%.o: %.c $(GEN_HEADERS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/asan/%_avx2.o: %_avx2.c $(GEN_HEADERS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(ASAN_FLAGS) $(AVX2_FLAGS) -MMD -MP -c $< -o $@
$(BUILD)/asan/%_avx512.o: %_avx512.c $(GEN_HEADERS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(ASAN_FLAGS) $(AVX512_FLAGS) -MMD -MP -c $< -o $@
$(BUILD)/asan/%.o: %.c $(GEN_HEADERS)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(ASAN_FLAGS) -MMD -MP -c $< -o $@
$(BUILD)/rel/%.o: %.cc $(GEN_HEADERS)
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -MMD -MP -c $< -o $@
$(BUILD)/asan/%.o: %.cc $(GEN_HEADERS)
	@mkdir -p $(@D)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) $(ASAN_FLAGS) -MMD -MP -c $< -o $@

# --- libraries --------------------------------------------------------------
$(BUILD)/lib/libreconcore.a: $(CORE_OBJS) $(EXTRA_CORE_OBJS)
	@mkdir -p $(@D); rm -f $@; ar rcs $@ $^
$(BUILD)/lib/libreconworker.a: $(WORKER_OBJS)
	@mkdir -p $(@D); rm -f $@; ar rcs $@ $^
$(BUILD)/lib/libreconserver.a: $(SERVER_OBJS)
	@mkdir -p $(@D); rm -f $@; ar rcs $@ $^
$(BUILD)/lib/libreconclient.a: $(CLIENT_OBJS)
	@mkdir -p $(@D); rm -f $@; ar rcs $@ $^
$(BUILD)/asan/lib/libreconcore.a: $(call obj,asan,$(CORE_SRC)) $(EXTRA_CORE_OBJS)
	@mkdir -p $(@D); rm -f $@; ar rcs $@ $^
$(BUILD)/asan/lib/libreconworker.a: $(call obj,asan,$(WORKER_SRC))
	@mkdir -p $(@D); rm -f $@; ar rcs $@ $^
$(BUILD)/asan/lib/libreconserver.a: $(call obj,asan,$(SERVER_SRC)) $(call objcc,asan,$(SERVER_CXX_SRC))
	@mkdir -p $(@D); rm -f $@; ar rcs $@ $^
$(BUILD)/asan/lib/libreconclient.a: $(call obj,asan,$(CLIENT_SRC))
	@mkdir -p $(@D); rm -f $@; ar rcs $@ $^

# --- programs, benchmarks, tests ------------------------------------------------
# The worker: its own libraries and LDLIBS (tests/integration/test_worker_floor.sh
# checks that ldd shows neither SQLite nor libmicrohttpd).
$(BUILD)/bin/recond-worker: server/worker/main_recond-worker.c $(WORKER_LIBS_REL)
	@mkdir -p $(@D)
	$(CC) $(WORKER_CPPFLAGS) $(CFLAGS) $< -o $@ $(WORKER_LIBS_REL) $(WORKER_LDLIBS)
.SECONDEXPANSION:
$(BUILD)/bin/%: $$(wildcard server/main_$$*.c clients/main_$$*.c tools/main_$$*.c bench/main_$$*.c) $(LIBS_REL)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(filter %.c,$^) -o $@ $(LIBS_REL) $(LDLIBS)
$(BUILD)/tests/%: tests/unit/%.c $(LIBS_REL)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $< -o $@ $(LIBS_REL) $(LDLIBS)
$(BUILD)/asan/tests/%: tests/unit/%.c $(LIBS_ASAN)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(ASAN_FLAGS) $< -o $@ $(LIBS_ASAN) $(LDLIBS)

install: all
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(PROGS) $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)/etc/systemd/system $(DESTDIR)/usr/lib/tmpfiles.d $(DESTDIR)/etc/recond
	sed 's|@PREFIX@|$(PREFIX)|g' systemd/recond.service > $(DESTDIR)/etc/systemd/system/recond.service
	chmod 0644 $(DESTDIR)/etc/systemd/system/recond.service
	install -m 0644 systemd/recond-tmpfiles.conf $(DESTDIR)/usr/lib/tmpfiles.d/recond.conf
	sed 's|@PREFIX@|$(PREFIX)|g' systemd/recond.example.json > $(DESTDIR)/etc/recond/recond.example.json
	chmod 0644 $(DESTDIR)/etc/recond/recond.example.json
	[ -e $(DESTDIR)/etc/recond/recond.json ] || install -m 0640 $(DESTDIR)/etc/recond/recond.example.json $(DESTDIR)/etc/recond/recond.json
	install -d $(DESTDIR)$(PREFIX)/share/doc/recond
	install -m 0644 docs/server.md $(DESTDIR)$(PREFIX)/share/doc/recond/

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
