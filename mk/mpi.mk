# recond-worker-mpi (docs/cluster.md): the worker built from the same
# main_recond-worker.c, linked with server/worker/mpi/*.c (the ranks over
# MPI_COMM_WORLD and the view-splitting backend) in place of
# server/worker/ranks_none.c, and with Open MPI's libmpi.  A separate binary
# so that recond-worker (every single-process job, the ASan tests) loads no
# MPI library; the daemon runs this one under mpirun for execution.ranks > 1.
# Built only where mpicc is (openmpi-bin, libopenmpi-dev: install-deps.sh).
MPI_CFLAGS  := $(shell mpicc --showme:compile 2>/dev/null)
MPI_LDLIBS  := $(shell mpicc --showme:link 2>/dev/null)
MPI_SRC     := $(wildcard server/worker/mpi/*.c)
MPI_OBJS    := $(patsubst %.c,$(BUILD)/mpi/%.o,$(MPI_SRC))
ifneq ($(MPI_LDLIBS),)
all: $(BUILD)/bin/recond-worker-mpi
install: install-mpi
endif
.PHONY: install-mpi
install-mpi: $(BUILD)/bin/recond-worker-mpi
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $< $(DESTDIR)$(PREFIX)/bin/

$(BUILD)/mpi/server/worker/mpi/%.o: server/worker/mpi/%.c
	@mkdir -p $(@D)
	$(CC) $(WORKER_CPPFLAGS) -Iserver/worker $(MPI_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@
# (the libraries by name: this file is read before the Makefile sets
# WORKER_LIBS_REL, and prerequisites expand as they are read)
$(BUILD)/bin/recond-worker-mpi: server/worker/main_recond-worker.c $(MPI_OBJS) $(BUILD)/lib/libreconworker.a \
		$(BUILD)/lib/libreconcore.a
	@mkdir -p $(@D)
	$(CC) $(WORKER_CPPFLAGS) $(CFLAGS) $< $(MPI_OBJS) -o $@ $(WORKER_LIBS_REL) $(WORKER_LDLIBS) $(MPI_LDLIBS)

# One job across ranks on this machine: FDK and CGLS through recond-worker and
# mpirun -np N recond-worker-mpi (scripts/bench-mpi.py; docs/cluster.md).
.PHONY: bench-mpi
bench-mpi: all
	@/usr/bin/python3 scripts/bench-mpi.py --build $(BUILD)  # Debian's python3-numpy
