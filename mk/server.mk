# server/: its headers are included by the unit tests and the programs;
# nettle (a dependency of libmicrohttpd's GnuTLS) hashes the bearer tokens.
# server/worker/ comes first: the daemon includes the worker floor's public
# headers (spec.h, jfield.h, durable.h, device_json.h, worker_proto.h) by
# name; the worker itself is compiled without -Iserver (Makefile).
CPPFLAGS += -Iserver/worker -Iserver
LDLIBS   += $(shell pkg-config --libs nettle 2>/dev/null || echo -lnettle)
