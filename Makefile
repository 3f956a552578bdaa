# biomirror: plain GNU Makefile (STYLE.md rule 3).
# Targets: all (./biomirror), deps, check, sanitize, run, install, clean,
# fuzz, fuzz-run, fuzz-smoke (tests/fuzz/README.md).

PREFIX	?= /usr/local
DESTDIR	?=
VERSION	 = 0.1.0

PKGS	 = libcurl sqlite3 inih openssl libxml-2.0 jansson
# What the binary links; libcurl goes to the curl module only (below).
CORE_PKGS = sqlite3 inih openssl libxml-2.0 jansson
CC	?= cc
WARN	 = -std=c11 -Wall -Wextra -Wformat=2 -Wshadow -Wpointer-arith \
	   -Wcast-qual -Wwrite-strings -Wstrict-prototypes \
	   -Wmissing-prototypes -Wmissing-declarations -Wsign-compare
HARDEN	 = -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIE
CFLAGS	?= -O2 -g
ALL_CFLAGS = $(CFLAGS) $(WARN) $(HARDEN) -D_GNU_SOURCE -Iinclude \
	   -DBM_VERSION=\"$(VERSION)\" \
	   $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDFLAGS	?=
ALL_LDFLAGS = $(LDFLAGS) -pie -Wl,-z,relro,-z,now
LIBS	 = $(shell pkg-config --libs $(CORE_PKGS) 2>/dev/null) -ldl -lpthread
# The UDT shim (agent/xfer/udt_shim.cpp), the only C++, is the module
# libbiomirror-udt.so, dlopen()ed by agent/xfer/udt_load.c only when UDT
# is used (libudt's initializer sleeps 100 ms); udt4 has no .pc file
# (STYLE.md rule 3): named directly.  The same hardening, PIC.  Installed
# in $(PREFIX)/lib/biomirror: the loader looks in ../lib/biomirror from
# the binary's directory (and first beside it: the build tree).
UDT_MOD	 = libbiomirror-udt.so
MOD_DIR	 = $(PREFIX)/lib/biomirror
UDT_LIBS = -ludt -lstdc++ -lpthread
# The curl transport (agent/xfer/curl.c, with the two pure files it
# calls) is the module libbiomirror-curl.so, dlopen()ed by
# agent/xfer/curl_load.c when an HTTP, HTTPS, FTP or FTPS source needs it:
# a bm:// run or serve never maps libcurl and the TLS, LDAP, Kerberos and
# IDN libraries it pulls in (about 7 ms of CPU at every start).  Its
# objects are PIC copies (*.pic.o); only xfer_curl_module() is exported.
CURL_MOD = libbiomirror-curl.so
CURL_MOD_SRCS = agent/xfer/curl.c agent/error.c agent/proto/ftp.c
CURL_MOD_OBJS = $(CURL_MOD_SRCS:.c=.pic.o)
CURL_LIBS = $(shell pkg-config --libs libcurl 2>/dev/null) -lpthread
MOD_CFLAGS = $(filter-out -fPIE,$(ALL_CFLAGS)) -fPIC -fvisibility=hidden
CXX	?= g++
CXXWARN	 = -std=c++11 -Wall -Wextra -Wformat=2 -Wshadow -Wpointer-arith \
	   -Wcast-qual -Wwrite-strings -Wmissing-declarations -Wsign-compare
CXXFLAGS ?= $(CFLAGS)
ALL_CXXFLAGS = $(CXXFLAGS) $(CXXWARN) $(HARDEN) -D_GNU_SOURCE -Iinclude \
	   -fPIC -fvisibility=hidden

ifeq ($(CI),true)
ALL_CFLAGS += -Werror
ALL_CXXFLAGS += -Werror
endif

-include Makefile.local

# Every folder of agent/ (agent/lister/, agent/xfer/, ...: README.md,
# Architecture); folder-private headers (*_int.h) sit beside their .c.
LIB_SRCS = $(filter-out agent/main.c agent/xfer/curl.c,$(wildcard agent/*.c \
	   agent/*/*.c)) $(wildcard manifest/*.c)
UDT_CXX_SRCS = agent/xfer/udt_shim.cpp
LIB_OBJS = $(LIB_SRCS:.c=.o)
UNIT_SRCS = $(wildcard tests/unit/test_*.c)
UNIT_BINS = $(UNIT_SRCS:.c=)
HDRS	 = $(wildcard include/biomirror/*.h agent/*/*.h) $(wildcard tests/unit/*.h)

# Debian packages the build, the tests and the demo need.
DEB_PKGS = build-essential pkg-config libcurl4-openssl-dev libsqlite3-dev \
	   libinih-dev libssl-dev libxml2-dev libjansson-dev sqlite3 curl \
	   nginx-light apache2 python3 procps iproute2 openssl \
	   systemd groff-base rsync vsftpd globus-gridftp-server-progs python3-pyftpdlib \
	   clang strace libudt-dev libglobus-xio-udt-driver

# libFuzzer targets (STYLE.md rule 53, tests/fuzz/README.md): built with
# clang into tests/fuzz/obj/, apart from the gcc build.
FUZZ_CC	 = clang
FUZZ_SAN = -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS = -O1 -g -fno-omit-frame-pointer $(FUZZ_SAN) \
	   -std=c11 -Wall -Wextra -D_GNU_SOURCE -Iinclude \
	   -DBM_VERSION=\"$(VERSION)\" \
	   $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
FUZZ_NAMES = path config list_http list_ftp crawl_http crawl_ftp manifest
FUZZ_BINS = $(FUZZ_NAMES:%=tests/fuzz/fuzz_%)
FUZZ_OBJS = $(LIB_SRCS:%.c=tests/fuzz/obj/%.o)
FUZZ_SECONDS ?= 60

.PHONY: all deps check unit functional sanitize torture run install clean \
	lint fuzz fuzz-run fuzz-smoke FORCE

# The compiler and flags of the last build, rewritten only when they
# change: objects, the library and binaries depend on it, so that objects
# of a build with other flags (make sanitize's ASan build) are rebuilt
# instead of being linked into this one.
BUILD_FLAGS = $(CC) $(ALL_CFLAGS) $(CXX) $(ALL_CXXFLAGS) $(ALL_LDFLAGS) $(LIBS) \
	   $(UDT_LIBS) $(CURL_LIBS)
.build-flags: FORCE
	@echo '$(BUILD_FLAGS)' | cmp -s - $@ || echo '$(BUILD_FLAGS)' > $@

all: biomirror $(UDT_MOD) $(CURL_MOD)

biomirror: agent/main.o libbiomirror.a .build-flags
	$(CC) $(ALL_CFLAGS) -o $@ agent/main.o libbiomirror.a $(ALL_LDFLAGS) $(LIBS)

libbiomirror.a: $(LIB_OBJS)
	rm -f $@
	ar rcs $@ $(LIB_OBJS)

%.o: %.c $(HDRS) .build-flags
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

%.o: %.cpp $(HDRS) .build-flags
	$(CXX) $(ALL_CXXFLAGS) -c -o $@ $<

%.pic.o: %.c $(HDRS) .build-flags
	$(CC) $(MOD_CFLAGS) -c -o $@ $<

$(CURL_MOD): $(CURL_MOD_OBJS) .build-flags
	$(CC) $(MOD_CFLAGS) -shared -o $@ $(CURL_MOD_OBJS) \
	    $(LDFLAGS) -Wl,-z,relro,-z,now -Wl,-z,defs $(CURL_LIBS)

# Only udt_shim_module() is exported (-fvisibility=hidden).
$(UDT_MOD): $(UDT_CXX_SRCS:.cpp=.o) .build-flags
	$(CXX) $(ALL_CXXFLAGS) -shared -o $@ $(UDT_CXX_SRCS:.cpp=.o) \
	    $(LDFLAGS) -Wl,-z,relro,-z,now -Wl,-z,defs $(UDT_LIBS)

# They load ./libbiomirror-curl.so (tests/run-unit.sh, tests/run-all.sh
# and tests/torture.sh set BM_CURL_MODULE: tests run from the top).
tests/unit/test_%: tests/unit/test_%.c libbiomirror.a $(CURL_MOD) $(HDRS) \
	    .build-flags
	$(CC) $(ALL_CFLAGS) -Itests/unit -o $@ $< libbiomirror.a \
	    $(ALL_LDFLAGS) $(LIBS)

# It loads ./libbiomirror-udt.so (tests run from the top directory).
tests/unit/test_udt_shim: $(UDT_MOD)

tests/fuzz/obj/%.o: %.c $(HDRS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

tests/fuzz/obj/libbiomirror.a: $(FUZZ_OBJS)
	rm -f $@
	ar rcs $@ $(FUZZ_OBJS)

tests/fuzz/obj/fuzz_listing.o: tests/fuzz/fuzz_listing.c tests/fuzz/fuzz.h $(HDRS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

tests/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h \
	    tests/fuzz/obj/fuzz_listing.o tests/fuzz/obj/libbiomirror.a $(HDRS)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< \
	    tests/fuzz/obj/fuzz_listing.o tests/fuzz/obj/libbiomirror.a $(LIBS)

fuzz: $(FUZZ_BINS)

fuzz-run: fuzz
	@sh tests/fuzz/run.sh run $(FUZZ_SECONDS) $(FUZZ_NAMES)

fuzz-smoke: fuzz
	@sh tests/fuzz/run.sh smoke 0 $(FUZZ_NAMES)

deps:
	@sh tests/deps.sh $(DEB_PKGS)

unit: $(UNIT_BINS)
	@sh tests/run-unit.sh $(UNIT_BINS)

functional: biomirror
	@sh tests/run-all.sh

check: deps
	$(MAKE) all $(UNIT_BINS)
	$(MAKE) lint
	$(MAKE) fuzz-smoke
	@sh tests/run-all.sh $(UNIT_BINS)

lint:
	@sh tests/lint.sh

sanitize: deps
	$(MAKE) clean
	$(MAKE) CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer" \
	    LDFLAGS="-fsanitize=address,undefined" all $(UNIT_BINS)
	$(MAKE) fuzz-smoke
	@sh tests/run-all.sh $(UNIT_BINS)
	$(MAKE) CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer" \
	    LDFLAGS="-fsanitize=address,undefined" torture

# Allocation-failure loop (STYLE.md rule 54): the manifest and config unit
# tests, linked with tests/unit/failmalloc.c, with each allocation failing
# in turn (tests/torture.sh); meant to run under ASan (make sanitize).
FM_WRAP	 = -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup \
	   -Wl,--wrap=strndup,--wrap=asprintf,--wrap=vasprintf
TORTURE_BINS = tests/unit/test_manifest_fm tests/unit/test_config_fm

tests/unit/test_%_fm: tests/unit/test_%.c tests/unit/failmalloc.c libbiomirror.a $(HDRS) \
	    .build-flags
	$(CC) $(ALL_CFLAGS) -Itests/unit -o $@ $< tests/unit/failmalloc.c \
	    libbiomirror.a $(ALL_LDFLAGS) $(FM_WRAP) $(LIBS)

torture: $(TORTURE_BINS)
	@sh tests/torture.sh $(TORTURE_BINS)

run: deps
	$(MAKE) all
	@sh tests/demo/run-demo.sh

install: biomirror $(UDT_MOD) $(CURL_MOD) $(CURL_MOD)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/biomirror/conf \
	    $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5 \
	    $(DESTDIR)$(PREFIX)/share/doc/biomirror $(DESTDIR)/etc/biomirror
	install -m 0755 biomirror $(DESTDIR)$(PREFIX)/bin/biomirror
	install -d $(DESTDIR)$(MOD_DIR)
	install -m 0644 $(UDT_MOD) $(DESTDIR)$(MOD_DIR)/$(UDT_MOD)
	install -m 0644 $(CURL_MOD) $(DESTDIR)$(MOD_DIR)/$(CURL_MOD)
	install -m 0644 conf/biomirror.conf conf/ncbi-blast.conf conf/ftp-example.conf $(DESTDIR)$(PREFIX)/share/biomirror/conf/
	test -e $(DESTDIR)/etc/biomirror/biomirror.conf || \
	    install -m 0644 conf/etc-biomirror.conf $(DESTDIR)/etc/biomirror/biomirror.conf
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/system $(DESTDIR)$(PREFIX)/lib/sysusers.d \
	    $(DESTDIR)$(PREFIX)/lib/tmpfiles.d
	sed 's|@BINDIR@|$(PREFIX)/bin|' systemd/biomirror@.service > $(DESTDIR)$(PREFIX)/lib/systemd/system/biomirror@.service
	chmod 0644 $(DESTDIR)$(PREFIX)/lib/systemd/system/biomirror@.service
	sed 's|@BINDIR@|$(PREFIX)/bin|' systemd/biomirror-serve.service > $(DESTDIR)$(PREFIX)/lib/systemd/system/biomirror-serve.service
	chmod 0644 $(DESTDIR)$(PREFIX)/lib/systemd/system/biomirror-serve.service
	install -m 0644 systemd/biomirror@.timer $(DESTDIR)$(PREFIX)/lib/systemd/system/
	install -m 0644 systemd/biomirror.sysusers $(DESTDIR)$(PREFIX)/lib/sysusers.d/biomirror.conf
	install -m 0644 systemd/biomirror.tmpfiles $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/biomirror.conf
	for m in docs/*.1; do [ -e "$$m" ] && install -m 0644 $$m $(DESTDIR)$(PREFIX)/share/man/man1/ || true; done
	for m in docs/*.5; do [ -e "$$m" ] && install -m 0644 $$m $(DESTDIR)$(PREFIX)/share/man/man5/ || true; done
	install -m 0644 README.md docs/*.md $(DESTDIR)$(PREFIX)/share/doc/biomirror/

clean:
	rm -f biomirror $(UDT_MOD) $(CURL_MOD) agent/*.o agent/*/*.o manifest/*.o libbiomirror.a $(UNIT_BINS) \
	    $(TORTURE_BINS) .build-flags
	rm -rf tests/fuzz/obj tests/fuzz/out
	rm -f $(FUZZ_BINS)

FORCE:
