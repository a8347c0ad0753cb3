# server/: its headers are included by the unit tests and the programs;
# nettle (a dependency of libmicrohttpd's GnuTLS) hashes the bearer tokens.
CPPFLAGS += -Iserver
LDLIBS   += $(shell pkg-config --libs nettle 2>/dev/null || echo -lnettle)
