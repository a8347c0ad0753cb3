# server/: its headers are included by the unit tests and the programs;
# nettle (a dependency of libmicrohttpd's GnuTLS) hashes the bearer tokens.
# server/worker/ comes first: the daemon includes the worker floor's public
# headers (spec.h, jfield.h, durable.h, device_json.h, worker_proto.h) by
# name; the worker itself is compiled without -Iserver (Makefile).
CPPFLAGS += -Iserver/worker -Iserver
# libpq (server/store/store_pg.c): Debian keeps its header in /usr/include/postgresql.
CPPFLAGS += $(shell pkg-config --cflags libpq 2>/dev/null || echo -I/usr/include/postgresql)
LDLIBS   += $(shell pkg-config --libs nettle 2>/dev/null || echo -lnettle)

# The operator page (docs/operator.md): server/live/www/* become byte arrays in
# $(BUILD)/gen/www_assets.c (scripts/embed-www.py), compiled into recond only,
# with the other .c prerequisites of its link rule (the Makefile's
# $(BUILD)/bin/% compiles $(filter %.c,$^)).  The library keeps the weak
# www_find of server/http/http_www.c that finds nothing, so the programs and tests
# that link libreconserver.a without the page answer 404 at /.
WWW_SRC := server/live/www/index.html server/live/www/app.css server/live/www/app.js
WWW_GEN := $(BUILD)/gen/www_assets.c
$(WWW_GEN): $(WWW_SRC) scripts/embed-www.py mk/server.mk
	@mkdir -p $(@D)
	python3 scripts/embed-www.py $@ $(WWW_SRC)
$(BUILD)/bin/recond: $(WWW_GEN)
