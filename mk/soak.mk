# Durability soak and I/O-fault injection (docs/server.md "Durability soak",
# "I/O faults").
#
#   make soak [KILLS=1000] [SEED=1] [SOAK_ARGS=...]
#        tests/soak/soak.py: clients create, upload (whole and per view),
#        start, cancel, download and delete while the daemon is kill -9'd
#        KILLS times at random moments; after each restart it checks every
#        acknowledged view, job state and volume on disk and counts orphans.
#        Prints kills, acks, losses, corruptions, orphans; fails on any.
#        `make test` runs the short form (tests/integration/test_soak.py).
#   $(BUILD)/lib/iofault.so
#        tests/faults/iofault.c, an LD_PRELOAD shim that fails chosen
#        open/write/pwrite/fsync/fdatasync/rename/fallocate/mkdir calls with
#        a chosen errno (tests/integration/test_iofault.py); built with the
#        tests.

# SEED has no default here (mk/contract.mk reads it too): the soak's is 1.
KILLS ?= 1000
SOAK_ARGS ?=
IOFAULT_SO := $(BUILD)/lib/iofault.so

.PHONY: soak _soak
tests: $(IOFAULT_SO)

$(IOFAULT_SO): tests/faults/iofault.c mk/soak.mk
	@mkdir -p $(@D)
	$(CC) -O2 -g -std=c11 $(WARN) -fPIC -shared $< -o $@ -ldl -lpthread

soak: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all && $(MAKE) --no-print-directory _soak
_soak: all
	@RECOND_BUILD=$(abspath $(BUILD)) /usr/bin/python3 tests/soak/soak.py --kills $(KILLS) --seed $(or $(SEED),1) $(SOAK_ARGS)
