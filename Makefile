# sandboxd: the one build file. Non-recursive; every folder's *.c files are found by wildcard,
# so adding a source file needs no edit here. Outputs go to $(B) (build/ or build-san/).

.DEFAULT_GOAL := all
SHELL := /bin/bash

PREFIX   ?= /usr/local
DESTDIR  ?=
SANITIZE ?= 0
VERSION  := 0.1.0

ifeq ($(SANITIZE),1)
B := build-san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
B := build
SANFLAGS :=
endif

CC      ?= cc
V ?= 0
Q := $(if $(filter 1,$(V)),,@)
PKGS    := libuv libmicrohttpd libcurl jansson libseccomp libcap libnl-route-3.0 libnftables libarchive libcrypto nettle
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN    := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wno-unused-parameter -Wmissing-prototypes \
           -Wstrict-prototypes -Wvla -Wimplicit-fallthrough -Wno-format-truncation
HARDEN  := -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fstack-clash-protection -fPIC
CFLAGS  ?= -O2 -g
ALL_CFLAGS := -std=c17 -D_GNU_SOURCE -DSBX_VERSION=\"$(VERSION)\" $(WARN) $(HARDEN) $(SANFLAGS) \
              $(CFLAGS) -I. -Iclient/include $(PKG_CFLAGS) -MMD -MP
LDHARDEN := -pie -Wl,-z,relro,-z,now -Wl,--as-needed
ALL_LDFLAGS := $(SANFLAGS) $(LDHARDEN) $(LDFLAGS)

src = $(sort $(wildcard $(1)/*.c))
obj = $(patsubst %.c,$(B)/obj/%.o,$(1))

COMMON_OBJ   := $(call obj,$(call src,common))
POLICY_OBJ   := $(call obj,$(call src,policy))
SHIM_OBJ     := $(call obj,$(call src,shim))
DAEMON_OBJ   := $(call obj,$(call src,sandboxd) $(call src,sandboxd/core) $(call src,sandboxd/api) \
                $(call src,sandboxd/net) $(call src,sandboxd/fleet))
LIBSBX_OBJ   := $(call obj,$(call src,client/lib) $(call src,client/grpo))
CLI_OBJ      := $(call obj,$(call src,client/cli))
TESTLIB_OBJ  := $(call obj,$(call src,tests/lib))

LIBCOMMON := $(B)/libcommon.a
LIBPOLICY := $(B)/libpolicy.a
SHIM      := $(B)/sbx-shim
DAEMON    := $(B)/sandboxd
LIBSBX_A  := $(B)/libsbx.a
LIBSBX_SO := $(B)/libsbx.so.0
SBX       := $(B)/sbx

# Shim/daemon: main.c is the entry point; everything else in the folder is a library that
# tests may link (tests link the folder's objects minus main.o).
SHIM_LIB_OBJ   := $(filter-out $(B)/obj/shim/main.o,$(SHIM_OBJ))
DAEMON_LIB_OBJ := $(filter-out $(B)/obj/sandboxd/main.o,$(DAEMON_OBJ))

AS_AGENT  := $(B)/sbx-as-agent
GV_INIT   := $(B)/sbx-gvisor-init
GV_STATX  := $(B)/sbx-gvisor-statx.so

BINS := $(SHIM) $(AS_AGENT) $(GV_INIT) $(GV_STATX) $(DAEMON) $(SBX) $(LIBSBX_A) $(LIBSBX_SO) $(B)/libsbx.pc

all: $(BINS) tests-build

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo '  CC      $<')
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

# The grading helper library is built into the runner (.incbin in gradelib.c).
$(B)/obj/client/grpo/gradelib.o: client/grpo/grading/sbx_grade.py client/grpo/grading/sbx_grade.sh \
                                  client/grpo/grading/sbx_verl.py

$(LIBCOMMON): $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(LIBPOLICY): $(POLICY_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# sbx-shim starts with every sandbox. Linked statically (static-pie: its address stays random)
# it starts in about half the CPU: a dynamic one spends it in the loader, and its forks copy
# more mappings (docs/BENCHMARKS.md "Issue 28: a static sbx-shim"); and a pausable sandbox of an
# image then needs no host libraries (shim/rootfs.h). Sanitized builds link it dynamically (ASan
# cannot link statically). libnl's archive warns of getaddrinfo and getprotoby* in functions the
# shim never calls; shim/image.c (a tarball import, dlopen's libarchive) is its tests' only.
ifeq ($(SANITIZE),1)
SHIM_LINK = $(ALL_LDFLAGS) $^ $(PKG_LIBS)
else
SHIM_LINK = -static-pie -Wl,-z,relro,-z,now -Wl,--gc-sections $(LDFLAGS) \
             $(filter-out $(B)/obj/shim/image.o,$^) \
             $(shell pkg-config --static --libs jansson libseccomp libcap libnl-route-3.0 2>/dev/null)
endif
$(SHIM): $(SHIM_OBJ) $(LIBPOLICY) $(LIBCOMMON)
	$(CC) -o $@ $(SHIM_LINK) -lm

# sbx-as-agent runs inside grading sandboxes, whatever their image: one static binary (never
# sanitized: ASan cannot link statically), bound there by the shim from next to sbx-shim.
AS_AGENT_SRC := shim/agent/sbx_as_agent.c common/shimproto.c common/fdpass.c common/error.c
$(AS_AGENT): $(AS_AGENT_SRC) common/shimproto.h common/fdpass.h common/macro.h
	@mkdir -p $(dir $@)
	$(CC) -std=c17 -D_GNU_SOURCE $(WARN) -O2 -g -I. $(PKG_CFLAGS) -static -o $@ $(AS_AGENT_SRC) \
	  -ljansson

# sbx-gvisor-init is the command runner inside gvisor-class sandboxes (shim/gvisor.h), whatever
# their image: static like sbx-as-agent, the shim's own exec service; unused code is dropped.
GV_INIT_SRC := shim/gvinit/sbx_gvisor_init.c shim/gvinit/tty_relay.c shim/gvinit/cmd_cgroup.c \
               shim/exec.c shim/exec_path.c \
               shim/proctree.c \
               shim/sigdisp.c shim/ipc.c shim/grading.c shim/seccomp.c common/fdpass.c \
               common/fdutil.c policy/seccomp.c
$(GV_INIT): $(GV_INIT_SRC) $(wildcard shim/*.h shim/gvinit/*.h common/*.h policy/*.h)
	@mkdir -p $(dir $@)
	$(CC) -std=c17 -D_GNU_SOURCE $(WARN) -O2 -g -I. $(PKG_CFLAGS) -static -ffunction-sections \
	  -fdata-sections -Wl,--gc-sections -o $@ $(GV_INIT_SRC)
# ... and the statx fix preloaded into its commands (no C library of its own: any image's).
$(GV_STATX): shim/gvinit/statx_preload.c
	@mkdir -p $(dir $@)
	$(CC) -std=c17 $(WARN) -O2 -shared -fPIC -nostdlib -o $@ $<

# The daemon calls other nodes of its fleet through libsbx (fleet/move.c), like any client.
$(DAEMON): $(DAEMON_OBJ) $(LIBSBX_A) $(LIBPOLICY) $(LIBCOMMON)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

# libsbx carries the common objects it uses inside it, so it installs as one library.
$(LIBSBX_A): $(LIBSBX_OBJ) $(COMMON_OBJ)
	rm -f $@ && ar rcs $@ $^

$(LIBSBX_SO): $(LIBSBX_OBJ) $(COMMON_OBJ)
	$(CC) $(ALL_LDFLAGS) -shared -Wl,-soname,libsbx.so.0 -Wl,--version-script=client/lib/libsbx.map \
	  -o $@ $^ $(PKG_LIBS) -lm
	ln -sf libsbx.so.0 $(B)/libsbx.so

$(SBX): $(CLI_OBJ) $(LIBSBX_A)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

$(B)/libsbx.pc: client/lib/libsbx.pc.in Makefile
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' $< > $@

# ---- tests: every tests/<suite>/test_*.c is one executable holding many cases ----
TEST_SRCS := $(sort $(wildcard tests/*/test_*.c))
TEST_BINS := $(patsubst %.c,$(B)/%,$(TEST_SRCS))
# The daemon's and the shim's objects go in as an archive, so that a test links only what it
# uses (a libsbx test must not pull in the daemon's fleet code and with it libcurl).
TEST_ARCH := $(B)/libsdtest.a
TEST_LINK := $(TESTLIB_OBJ) $(TEST_ARCH) $(LIBSBX_A) $(LIBPOLICY) $(LIBCOMMON)

$(TEST_ARCH): $(DAEMON_LIB_OBJ) $(SHIM_LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(B)/tests/%: $(B)/obj/tests/%.o $(TESTLIB_OBJ) $(TEST_ARCH) $(LIBSBX_A) $(LIBPOLICY) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $< -Wl,--start-group $(TEST_LINK) -Wl,--end-group $(PKG_LIBS) -lm

tests-build: $(TEST_BINS)

# ---- the README's commands ----
deps:
	@./tests/deps.sh

check: deps
	$(MAKE) -j$$(nproc) all
	./tests/run --build $(B)

demo: deps
	$(MAKE) -j$$(nproc) all
	./tests/demo.sh $(B)

# ---- install ----
install: $(BINS)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/libexec/sandboxd $(DESTDIR)$(PREFIX)/lib \
	  $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/share/sandboxd \
	  $(DESTDIR)/lib/systemd/system
	install -m755 $(DAEMON) $(SBX) $(DESTDIR)$(PREFIX)/bin/
	install -m755 $(SHIM) $(AS_AGENT) $(GV_INIT) $(GV_STATX) $(DESTDIR)$(PREFIX)/libexec/sandboxd/
	install -m644 $(LIBSBX_A) $(DESTDIR)$(PREFIX)/lib/
	install -m755 $(LIBSBX_SO) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libsbx.so.0 $(DESTDIR)$(PREFIX)/lib/libsbx.so
	install -m644 client/include/sbx.h client/include/sbx_grpo.h $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' client/lib/libsbx.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/libsbx.pc # PREFIX of this install, not of the build
	$(if $(wildcard policy/*.json),install -m644 $(wildcard policy/*.json) $(DESTDIR)$(PREFIX)/share/sandboxd/)
	install -d $(DESTDIR)$(PREFIX)/share/sandboxd/grading # the graders' helpers (also built into the runner)
	install -m644 client/grpo/grading/sbx_grade.py client/grpo/grading/sbx_grade.sh client/grpo/grading/sbx_verl.py $(DESTDIR)$(PREFIX)/share/sandboxd/grading/
	install -d $(DESTDIR)/etc/sandboxd
	[ -e $(DESTDIR)/etc/sandboxd/sandboxd.json ] || install -m644 systemd/sandboxd.json $(DESTDIR)/etc/sandboxd/sandboxd.json
	$(if $(wildcard systemd/*.service systemd/*.socket),install -m644 $(wildcard systemd/*.service systemd/*.socket) $(DESTDIR)/lib/systemd/system/)
	install -d $(DESTDIR)$(PREFIX)/lib/python3/dist-packages/sandboxd # the Python SDK (python/)
	install -m644 python/sandboxd/*.py python/sandboxd/py.typed $(DESTDIR)$(PREFIX)/lib/python3/dist-packages/sandboxd/

# ---- a self-contained bundle for hosts that lack the shared libraries (see build-aux/bundle.sh) ----
static: $(SHIM) $(DAEMON) $(SBX) $(AS_AGENT) $(GV_INIT) $(GV_STATX)
	./build-aux/bundle.sh $(B) build-static

# ---- style ----
C_FILES = $(shell find common policy shim sandboxd client tests bench -name '*.[ch]' -not -path '*/corpus*' 2>/dev/null)
format:
	clang-format -i $(C_FILES)
format-check:
	clang-format --dry-run --Werror $(C_FILES)

bench: all
	./bench/run.sh $(B)

# ---- fuzzing: libFuzzer targets tests/fuzz/fuzz_<name>.c -> build-fuzz/fuzz_<name> (clang,
# ASan+UBSan). `make fuzz-build`; `make fuzz-run FUZZ_TIME=600` runs each target that long,
# seeded from tests/fuzz/corpus/<name>, keeping new inputs in build-fuzz/corpus/<name>. ----
FZ          := build-fuzz
FUZZ_CC     ?= clang
FUZZ_TIME   ?= 600
FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS := -std=c17 -D_GNU_SOURCE -DSBX_VERSION=\"$(VERSION)\" -g -O1 -Wall -Wno-unused-parameter \
               $(FUZZ_SAN) -I. -Iclient/include $(PKG_CFLAGS) -MMD -MP
FUZZ_SRCS   := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS   := $(patsubst tests/fuzz/%.c,$(FZ)/%,$(FUZZ_SRCS))
FUZZ_LIB    := $(patsubst %.c,$(FZ)/obj/%.o,$(call src,common) $(call src,policy) \
               $(filter-out shim/main.c,$(call src,shim)) $(wildcard client/grpo/taskset.c client/grpo/envserver_task.c client/grpo/verlset.c) \
               client/lib/ws.c \
               sandboxd/core/image_archive.c)

$(FZ)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FZ)/fuzz_%: $(FZ)/obj/tests/fuzz/fuzz_%.o $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -o $@ $^ $(PKG_LIBS) -lm

.SECONDARY: $(FUZZ_LIB) $(patsubst tests/fuzz/%.c,$(FZ)/obj/tests/fuzz/%.o,$(FUZZ_SRCS))
fuzz-build: $(FUZZ_BINS)

fuzz-run: fuzz-build
	@set -o pipefail; for f in $(FUZZ_BINS); do n=$$(basename $$f); mkdir -p $(FZ)/corpus/$${n#fuzz_}; \
	  echo "== $$n ($(FUZZ_TIME) s)"; \
	  $$f -max_total_time=$(FUZZ_TIME) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix=$(FZ)/$$n- $(FZ)/corpus/$${n#fuzz_} tests/fuzz/corpus/$${n#fuzz_} \
	    2>&1 | tail -n 12 || exit 1; done

fuzz-clean:
	rm -rf $(FZ)

.PHONY: fuzz-build fuzz-run fuzz-clean
-include $(shell find $(FZ) -name '*.d' 2>/dev/null)

clean:
	rm -rf build build-san build-static

.PHONY: all deps check demo install static format format-check bench clean tests-build

-include $(shell find $(B) -name '*.d' 2>/dev/null)
