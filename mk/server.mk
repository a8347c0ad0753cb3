# server/: its headers are included by the unit tests and the programs;
# nettle (a dependency of libmicrohttpd's GnuTLS) hashes the bearer tokens.
# server/worker/ comes first: the daemon includes the worker floor's public
# headers (spec.h, jfield.h, durable.h, device_json.h, worker_proto.h) by
# name; the worker itself is compiled without -Iserver (Makefile).
CPPFLAGS += -Iserver/worker -Iserver
# libpq (server/store_pg.c): Debian keeps its header in /usr/include/postgresql.
CPPFLAGS += $(shell pkg-config --cflags libpq 2>/dev/null || echo -I/usr/include/postgresql)
LDLIBS   += $(shell pkg-config --libs nettle 2>/dev/null || echo -lnettle)
