# hakmem — build, test, bench, install. `make help` lists the targets.
CC      ?= cc
PREFIX  ?= /usr/local
BUILD   := build
CFLAGS_BASE := -std=c11 -O2 -g -fPIC -Wall -Wextra -Wno-unused-parameter -fvisibility=hidden \
               -fno-builtin-malloc -fno-builtin-free -fno-builtin-calloc -fno-builtin-realloc \
               -ftls-model=initial-exec -fno-plt -fno-semantic-interposition -fexceptions -D_GNU_SOURCE -Iinclude -Isrc
CFLAGS  ?=
LDLIBS  := -lpthread

SRCS    := $(sort $(wildcard src/*.c))
HDRS    := $(wildcard src/*.h) include/hakmem.h
OBJS    := $(SRCS:src/%.c=$(BUILD)/obj/%.o)
SOBJS   := $(SRCS:src/%.c=$(BUILD)/obj-secure/%.o)

.PHONY: all lib test bench install uninstall clean help
VERSION := $(shell sed -n 's/^\#define HAKMEM_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)/\2/p' include/hakmem.h | paste -sd.)

all: lib $(BUILD)/hakmem

lib: $(BUILD)/libhakmem.so $(BUILD)/libhakmem.a $(BUILD)/libhakmem-secure.so

$(BUILD)/obj/%.o: src/%.c $(HDRS) Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -c $< -o $@

$(BUILD)/obj-secure/%.o: src/%.c $(HDRS) Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(CFLAGS) -DHAK_SECURE=1 -c $< -o $@

$(BUILD)/libhakmem.so: $(OBJS)
	$(CC) -shared -Wl,-soname,libhakmem.so -Wl,-z,now -Wl,-z,nodelete -Wl,--no-undefined -o $@ $^ $(LDLIBS)

$(BUILD)/libhakmem-secure.so: $(SOBJS)
	$(CC) -shared -Wl,-soname,libhakmem-secure.so -Wl,-z,now -Wl,-z,nodelete -Wl,--no-undefined -o $@ $^ $(LDLIBS)

$(BUILD)/libhakmem.a: $(OBJS)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/hakmem: tools/hakmem
	@mkdir -p $(BUILD)
	cp $< $@ && chmod +x $@

# The whole test suite (C programs, real programs under LD_PRELOAD, the lab, the Rust crate) runs under
# pytest, whose last line is the summary.
test: all
	$(MAKE) -C tests
	python3 -m pytest -q tests lab/tests

bench: all
	$(MAKE) -C bench
	python3 -m lab quick

# PREFIX must be an absolute path and, with DESTDIR, free of blanks and of the characters the recipes and
# hakmem.pc cannot carry: make cannot quote such paths, and a half-installed tree is worse than a refusal.
define check_prefix
	@case '$(PREFIX)' in /*) ;; *) echo "make: PREFIX must be an absolute path, got '$(PREFIX)'" >&2; exit 1 ;; esac
	@case '$(DESTDIR)$(PREFIX)' in *[[:space:]\|\&\\\"]*) \
	  echo "make: DESTDIR/PREFIX '$(DESTDIR)$(PREFIX)' has a blank or one of | & \\ \"" >&2; exit 1 ;; esac
endef

install: all
	$(check_prefix)
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(BUILD)/libhakmem.so $(BUILD)/libhakmem-secure.so $(DESTDIR)$(PREFIX)/lib/
	install -m 644 $(BUILD)/libhakmem.a $(DESTDIR)$(PREFIX)/lib/
	install -m 644 include/hakmem.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(BUILD)/hakmem $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' tools/hakmem.pc.in > $(BUILD)/hakmem.pc
	install -m 644 $(BUILD)/hakmem.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/

uninstall:
	$(check_prefix)
	rm -f $(DESTDIR)$(PREFIX)/lib/libhakmem.so $(DESTDIR)$(PREFIX)/lib/libhakmem-secure.so \
	      $(DESTDIR)$(PREFIX)/lib/libhakmem.a $(DESTDIR)$(PREFIX)/include/hakmem.h \
	      $(DESTDIR)$(PREFIX)/bin/hakmem $(DESTDIR)$(PREFIX)/lib/pkgconfig/hakmem.pc

clean:
	rm -rf $(BUILD)
	-$(MAKE) -C tests clean
	-$(MAKE) -C bench clean

help:
	@echo "make            build build/libhakmem.so, build/libhakmem.a, build/libhakmem-secure.so, build/hakmem"
	@echo "make test       build and run every test (pytest summary at the end)"
	@echo "make bench      quick lab comparison: hakmem vs glibc, jemalloc, mimalloc, tcmalloc"
	@echo "make install    PREFIX=/usr/local: library, header, launcher, hakmem.pc"
