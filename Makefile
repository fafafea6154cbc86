# lagless — one non-recursive Makefile. Objects under build/, automatic dependencies.
#   make            build build/lagless and build/lagless-load (the load generator, load/)
#   make run        install missing Debian packages, build, start on 0.0.0.0:8080
#   make test       install missing Debian packages, build, run unit + integration tests,
#                   then the same suite again under ASan+UBSan
#   make SAN=1 ...  build with AddressSanitizer and UndefinedBehaviorSanitizer (into build/san)
#   make bench      install missing Debian packages, build, run the benchmark suite (bench/,
#                   docs/BENCHMARKS.md); BENCH_STRICT=0 reports without failing on a missed target
#   make fuzz       libFuzzer harnesses (clang) for the request path, the wire decoder and the
#                   response parser, each run FUZZ_SECONDS (default 60) from a seed corpus

CC      ?= cc
PYTHON  ?= /usr/bin/python3
SAN     ?= 0
DEBUG   ?= 0

ifeq ($(SAN),1)
OBJDIR  := build/san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
OBJDIR  := build
SANFLAGS :=
endif

OPT     := $(if $(filter 1,$(DEBUG) $(SAN)),-O1 -g,-O2 -g)
# The release build is optimized across files (gcc -flto, its link step then compiles): the
# request path crosses http/, worker/, shm/ and common/ through small functions (the framing
# state tests, the stats counters, the timer arming), each a call without it. The debug and
# sanitizer builds are not, so their objects stay what each file compiles to.
LTO     := $(if $(filter 1,$(DEBUG) $(SAN)),,-flto=auto)
CFLAGS  += -std=gnu11 $(OPT) $(LTO) -Wall -Wextra -Werror -Wmissing-prototypes -Wshadow \
           -Wno-unused-parameter -I. -Iinclude -MMD -MP $(SANFLAGS) -D_GNU_SOURCE
LDFLAGS += $(SANFLAGS) $(if $(LTO),$(LTO) $(OPT))
LDLIBS  := -lev -lhiredis -lmsgpackc -lzstd -lxxhash -lz -largon2 -linih -lsystemd -lm -ldl -pthread
# http-parser is no part of the server: http/frame.c is its one request parser. The load
# generator parses responses with it, and the tests keep it as a differential oracle of the
# request parser (tests/oracle/http_oracle.c: fuzz_http, build/tests/http_oracle).
ORACLE_LIBS := -lhttp_parser

# The Debian packages (Debian 12) that build the binaries and modules: the image's build stage
# installs exactly these (make print-build-pkgs), and so does CI, with the rest of DEB_PKGS.
BUILD_PKGS := build-essential pkg-config libev-dev libmsgpack-dev libhttp-parser-dev libzstd-dev \
              libxxhash-dev zlib1g-dev libargon2-dev libinih-dev libsystemd-dev libvips-dev libpython3.11-dev \
              libhiredis-dev libyajl-dev
# What the built binaries and modules need to run: the image's runtime stage installs exactly
# these (make print-runtime-pkgs; curl for its HEALTHCHECK; python3.11-minimal for the python3
# executable the python module runs the calls in, docs/MODULES.md "Which interpreter").
# tests/integration/test_image.py
# checks that every shared library they link comes from one of them (or from libc6).
RUNTIME_PKGS := libev4 libmsgpackc2 libhttp-parser2.9 libzstd1 libxxhash0 zlib1g libargon2-1 \
                libinih1 libsystemd0 libvips42 libglib2.0-0 libpython3.11 python3.11-minimal libhiredis0.14 \
                libyajl2 curl
# The Debian packages the build, the tests and `make run` need (FastAPI and uvicorn: the app the
# upstream routes' tests proxy to, tests/integration/fastapi_app.py, and benchmark 10's
# Python reference).
DEB_PKGS := $(BUILD_PKGS) libcmocka-dev gzip argon2 libvips-tools zstd python3 python3-pytest \
            python3-pytest-timeout curl systemd prometheus haproxy wrk clang libclang-rt-dev \
            gnuplot-nox mmdebstrap python3-yaml python3-pil python3-numpy redis-server \
            python3-fastapi python3-uvicorn python3-wsproto
# Only make bench needs these (nginx: throughput and cache reference; varnish: cache reference;
# valgrind: the instructions per request of 6c); CI does not install them.
BENCH_PKGS := nginx varnish valgrind

LIB_SRC  := $(filter-out master/main.c,$(wildcard common/*.c shm/*.c http/*.c stats/*.c sizing/*.c redis/*.c master/*.c worker/*.c worker/*/*.c cpupool/*.c kinds/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(OBJDIR)/%.o)
MAIN_OBJ := $(OBJDIR)/master/main.o
BIN      := $(OBJDIR)/lagless

# lagless-load, the open-loop load generator: its own folder, its own binary. Its modules
# depend only on common/ headers; its unit tests (tests/unit/test_load_<module>.c, a prefix of
# their own so they never take a server module's test name) link its objects, not the server's.
LOAD_SRC  := $(filter-out load/main.c,$(wildcard load/*.c))
LOAD_OBJ  := $(LOAD_SRC:%.c=$(OBJDIR)/%.o)
LOAD_BIN  := $(OBJDIR)/lagless-load
LOAD_UNIT := $(wildcard tests/unit/test_load_*.c)
# yajl (libyajl-dev) writes its JSON report (load/jw.h); the server does not link it
LOAD_LIBS := -lev -lhttp_parser -lyajl -lm

# Job modules the integration tests load (tests/modules/, built against include/ only).
TEST_MOD_SRC := $(wildcard tests/modules/*.c)
TEST_MODS    := $(TEST_MOD_SRC:tests/modules/%.c=$(OBJDIR)/tests/modules/%.so)
# The same 1.0 sources built against today's header: a 1.0 module's source must still compile.
TEST_MODS    += $(patsubst tests/modules/abi10_%.c,$(OBJDIR)/tests/modules/src10_%.so,\
    $(filter tests/modules/abi10_%.c,$(TEST_MOD_SRC)))

UNIT_SRC := $(filter-out $(LOAD_UNIT),$(wildcard tests/unit/test_*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(OBJDIR)/tests/%)
LOAD_UNIT_BIN := $(LOAD_UNIT:tests/unit/%.c=$(OBJDIR)/tests/%)

.PHONY: all run test check lint unit integration deps clean print-deps install bench fuzz fuzz-build \
        modules print-build-pkgs print-runtime-pkgs image image-python-example \
        image-fastapi-example example-fastapi
all: $(BIN) $(LOAD_BIN) modules

$(BIN): $(MAIN_OBJ) $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(LOAD_BIN): $(OBJDIR)/load/main.o $(LOAD_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LOAD_LIBS)

$(LOAD_UNIT_BIN): $(OBJDIR)/tests/%: tests/unit/%.c $(LOAD_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LOAD_OBJ) $(LOAD_LIBS) -lcmocka

$(OBJDIR)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

# The example modules (modules/): shared objects built against include/lagless/module.h alone,
# with the flags `pkg-config --cflags lagless` gives an installed copy, and no lagless symbol.
MOD_CFLAGS := -std=gnu11 $(OPT) -Wall -Wextra -Werror -Wno-unused-parameter -fPIC -shared \
              -Iinclude $(SANFLAGS)
MODULES    := $(OBJDIR)/modules/upper.so $(OBJDIR)/modules/thumbnail.so
# The python job module (modules/python/, docs/MODULES.md "Python kinds") where the embeddable
# CPython is installed (Debian libpython3.11-dev: pkg-config python3-embed).
PY_EMBED   := $(shell pkg-config --exists python3-embed 2>/dev/null && echo yes)
ifeq ($(PY_EMBED),yes)
MODULES    += $(OBJDIR)/modules/python.so
endif
# python.so: the module, with libpython for an embedded interpreter and the checks, carrying
# python-exec.so (.incbin): the extension the python3 executable loads to run the calls
# (interpreter =, modules/python/relay.h), with no libpython: its Python is the executable's.
# The python3 executable is not built with AddressSanitizer, so neither is its extension.
PY_SHARED  := modules/python/interp.c modules/python/call.c modules/python/error.c \
              modules/python/helper.c modules/python/wire.c
PY_MOD_SRC := modules/python/python.c modules/python/relay.c $(PY_SHARED)
PY_EXE_SRC := modules/python/serve.c $(PY_SHARED)
PY_HDRS    := modules/python/pymod.h modules/python/error.h modules/python/relay.h \
              include/lagless/module.h
PY_EXEC    := $(shell pkg-config --variable=exec_prefix python3-embed 2>/dev/null)/bin/python$(shell \
              pkg-config --modversion python3-embed 2>/dev/null)

modules: $(MODULES)

$(OBJDIR)/modules/upper.so: modules/upper/upper.c include/lagless/module.h
	@mkdir -p $(dir $@)
	$(CC) $(MOD_CFLAGS) -o $@ $<

$(OBJDIR)/modules/thumbnail.so: modules/thumbnail/thumbnail.c include/lagless/module.h
	@mkdir -p $(dir $@)
	$(CC) $(MOD_CFLAGS) $$(pkg-config --cflags vips) -o $@ $< $$(pkg-config --libs vips)

$(OBJDIR)/modules/python.so: $(PY_MOD_SRC) $(PY_HDRS) $(OBJDIR)/modules/python/python-exec.so
	@mkdir -p $(dir $@)
	$(CC) $(MOD_CFLAGS) -fvisibility=hidden -DLG_PY_EXECUTABLE='"$(PY_EXEC)"' \
	    -DLG_PY_EXEC_SO='"$(OBJDIR)/modules/python/python-exec.so"' \
	    $$(pkg-config --cflags python3-embed) -o $@ $(PY_MOD_SRC) $$(pkg-config --libs python3-embed)

$(OBJDIR)/modules/python/python-exec.so: $(PY_EXE_SRC) $(PY_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out $(SANFLAGS),$(MOD_CFLAGS)) -fvisibility=hidden \
	    $$(pkg-config --cflags python3-embed) -o $@ $(PY_EXE_SRC)

# A module of ABI 1.0 against the frozen 1.0 header: a newer host must keep loading it.
$(OBJDIR)/tests/modules/abi10_%.so: tests/modules/abi10_%.c tests/modules/abi1_0/lagless/module.h
	@mkdir -p $(dir $@)
	$(CC) -std=c99 -pedantic -O1 -g -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden \
	    -Itests/modules/abi1_0 $(SANFLAGS) -o $@ $<

# A 1.0 source (its positional LAGLESS_MODULE_HOOKS) against the current header.
$(OBJDIR)/tests/modules/src10_%.so: tests/modules/abi10_%.c include/lagless/module.h
	@mkdir -p $(dir $@)
	$(CC) -std=c99 -pedantic -O1 -g -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden \
	    -Iinclude $(SANFLAGS) -o $@ $<

$(OBJDIR)/tests/modules/%.so: tests/modules/%.c include/lagless/module.h
	@mkdir -p $(dir $@)
	$(CC) -std=c99 -pedantic -O1 -g -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden \
	    -Iinclude $(SANFLAGS) -o $@ $<

$(UNIT_BIN): $(OBJDIR)/tests/%: tests/unit/%.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB_OBJ) $(LDLIBS) -lcmocka

# The differential oracle of the request parser (tests/oracle/): the server's objects against
# http-parser, over files of request bytes (tests/integration/test_http_oracle.py).
ORACLE_SRC := tests/oracle/http_oracle.c tests/oracle/http_oracle_hp.c
ORACLE_BIN := $(OBJDIR)/tests/http_oracle

$(ORACLE_BIN): tests/oracle/replay.c $(ORACLE_SRC) tests/oracle/http_oracle.h $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ tests/oracle/replay.c $(ORACLE_SRC) $(LIB_OBJ) $(LDLIBS) \
	    $(ORACLE_LIBS)

# The response parser over files of upstream bytes
# (tests/integration/test_corpus_llhttp_responses.py replays llhttp's response vectors with it).
RESP_REPLAY := $(OBJDIR)/tests/resp_replay

$(RESP_REPLAY): tests/oracle/resp_replay.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB_OBJ) $(LDLIBS)

# Installs only what dpkg says is missing; needs root (or sudo) the first time.
deps:
	@missing=$$(for p in $(DEB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
	    | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	    echo "installing missing Debian packages: $$missing"; \
	    if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	    $$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y $$missing; \
	fi

# The defaults listen on 0.0.0.0:8080; ARGS="-p 9090" (or LAGLESS_* variables) change anything.
run: deps
	$(MAKE) all
	./$(BIN) $(ARGS)

# examples/fastapi/: the background article's FastAPI app supervised by lagless, its CPU route in
# the compute pool (examples/fastapi/README.md), in the foreground on port 8080 (ARGS="-p 9000"
# for another); Ctrl-C stops both.
example-fastapi: all
	./$(BIN) -c examples/fastapi/lagless.conf $(ARGS)

unit: $(UNIT_BIN) $(LOAD_UNIT_BIN) $(ORACLE_BIN) $(RESP_REPLAY)
	@set -e; for t in $(UNIT_BIN) $(LOAD_UNIT_BIN); do echo "== $$t"; $$t; done

integration: $(BIN) $(LOAD_BIN) $(MODULES) $(TEST_MODS) $(ORACLE_BIN) $(RESP_REPLAY)
	LAGLESS_BIN=$(abspath $(BIN)) LAGLESS_MODULES=$(abspath $(OBJDIR)/modules) \
	    LAGLESS_TEST_MODULES=$(abspath $(OBJDIR)/tests/modules) \
	    LAGLESS_LOAD_BIN=$(abspath $(LOAD_BIN)) $(PYTHON) -m pytest -q -p no:cacheprovider tests/integration tests/regress

LINT_INC = grep -nE '^[[:space:]]*\#[[:space:]]*include[[:space:]]*"'
# worker/'s rooms (docs/ARCHITECTURE.md "The rooms"): worker/core/ includes nothing of
# worker/job, flight, route, upstream or the loop's top-level headers; worker/job/ nothing of
# flight, route or upstream; worker/flight/ nothing of route or upstream; worker/upstream/
# nothing of worker/ but the core and itself; only the loop (worker/*.c) includes the loop's
# headers. A room's part of a connection is reached only in the room: the job part (LG_JOB,
# part_job) in worker/job, the flight part (LG_FLIGHT) in worker/flight, the upstream part
# (LG_UP, LG_WUP, part_up) in worker/upstream, the router's (LG_RT, LG_WRT) in worker/route and
# the loop. worker/upstream/ includes of the project only worker/core/, worker/upstream/,
# http/, shm/, common/, stats/ and kinds/ (the registry it proxies by). The includes known to
# cross, each to be removed rather than added to: observe.h (the loop's metrics, called from
# every room) is still a top-level header; cluster.c, inline.c and routes.c include loop.h.
LINT_KNOWN_OBS := ^worker/[a-z]+/[a-z_]+\.c:[0-9]+:\#include "worker/observe\.h"
LINT_KNOWN_ENV := ^worker/(flight/cluster|route/inline|route/routes)\.c:[0-9]+:\#include "worker/loop\.h"
LINT_WORKER_KNOWN := $(LINT_KNOWN_OBS)|$(LINT_KNOWN_ENV)

# The rooms' one-way dependencies (docs/ARCHITECTURE.md "The rooms"): http/ and stats/ include
# no worker/, master/ or cpupool/ header, shm/ includes nothing of the project but common/ and
# shm/, sizing/ nothing but common/ and sizing/, redis/ nothing but common/, shm/ and redis/.
# A grep over the #include lines; any hit fails the build.
lint:
	@bad=$$(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"(worker|master|cpupool)/' \
	    http/*.[ch] stats/*.[ch]; \
	    grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' shm/*.[ch] \
	    | grep -vE '#[[:space:]]*include[[:space:]]*"(common|shm)/'; \
	    grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' sizing/*.[ch] \
	    | grep -vE '#[[:space:]]*include[[:space:]]*"(common|sizing)/'; \
	    grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' redis/*.[ch] \
	    | grep -vE '#[[:space:]]*include[[:space:]]*"(common|shm|redis)/'); \
	if [ -n "$$bad" ]; then echo "lint: an include crosses a room's rule:"; echo "$$bad"; exit 1; fi
	@echo "lint: http/, stats/, shm/, sizing/ and redis/ include only what their rooms allow"
	@bad=$$($(LINT_INC) worker/core/*.[ch] | grep -E '"worker/([^/"]+\.h|(job|flight|route|upstream)/)' \
	    | grep -vE '$(LINT_WORKER_KNOWN)'; \
	    $(LINT_INC) worker/job/*.[ch] | grep -E '"worker/([^/"]+\.h|(flight|route|upstream)/)' \
	    | grep -vE '$(LINT_WORKER_KNOWN)'; \
	    $(LINT_INC) worker/flight/*.[ch] | grep -E '"worker/([^/"]+\.h|(route|upstream)/)' \
	    | grep -vE '$(LINT_WORKER_KNOWN)'; \
	    $(LINT_INC) worker/upstream/*.[ch] \
	    | grep -vE '"(worker/(core|upstream)|http|shm|common|stats|kinds)/' \
	    | grep -vE '$(LINT_WORKER_KNOWN)'; \
	    $(LINT_INC) worker/route/*.[ch] | grep -E '"worker/[^/"]+\.h' \
	    | grep -vE '$(LINT_WORKER_KNOWN)'); \
	if [ -n "$$bad" ]; then echo "lint: an include crosses worker/'s rooms:"; echo "$$bad"; exit 1; fi
	@bad=$$(grep -nE -- '->job\.|LG_W?JOB\(|part_job' $$(find worker -name '*.[ch]' \
	    ! -path 'worker/job/*' ! -path worker/core/conn.h); \
	    grep -nE -- '->flight\.|LG_FLIGHT\(|part_flight' $$(find worker -name '*.[ch]' \
	    ! -path 'worker/flight/*' ! -path worker/core/conn.h); \
	    grep -nE -- 'LG_W?UP\(|part_up' $$(find worker -name '*.[ch]' \
	    ! -path 'worker/upstream/*' ! -path worker/core/conn.h); \
	    grep -nE -- 'LG_W?RT\(|part_rt' $$(find worker -mindepth 2 -name '*.[ch]' \
	    ! -path 'worker/route/*' ! -path worker/core/conn.h)); \
	if [ -n "$$bad" ]; then echo "lint: a connection's part used outside its room (call a verb):"; \
	    echo "$$bad"; exit 1; fi
	@echo "lint: worker/ rooms include one way (loop -> route -> flight -> job -> core; route -> \
	upstream -> core), and a connection's parts stay in their rooms"

check: lint unit integration

# The whole suite, then again under ASan+UBSan. The last line is the summary CI reads.
test: deps
	$(MAKE) check
	$(MAKE) SAN=1 check
	@echo "test: all suites passed (normal and ASan+UBSan builds)"

# The benchmark suite: ratios measured in one run against a reference (docs/BENCHMARKS.md).
# Not part of `make test`: its targets are speed promises, not correctness.
BENCH_CLIENT := $(OBJDIR)/bench/latency
BENCH_STRICT ?= 1

BENCH_MODCALL := $(OBJDIR)/bench/modcall
BENCH_BARE    := $(OBJDIR)/bench/bare

$(BENCH_BARE): bench/bare.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $<

$(BENCH_MODCALL): bench/modcall.c include/lagless/module.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< -ldl

$(BENCH_CLIENT): bench/latency.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $<

# bench/python_speed.py's C-API ways: one call of a pure-Python function in three interpreter
# builds (bench/pycall.c says which), built on demand (libpython3.11-dev, BUILD_PKGS). The
# static one links libpython3.11.a, whose objects are not PIC: non-PIE.
PY_LIBPL     = $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("LIBPL"))')
PY_STATIC_LIBS = $(shell $(PYTHON) -c 'import sysconfig as s; \
    print(*(s.get_config_var(k) for k in ("MODLIBS", "LIBS", "SYSLIBS")))')

$(OBJDIR)/bench/pycall.so: bench/pycall.c
	@mkdir -p $(dir $@)
	$(CC) $(MOD_CFLAGS) $$(pkg-config --cflags python3-embed) -o $@ $<

$(OBJDIR)/bench/pycall: bench/pycall.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DPYCALL_MAIN $$(pkg-config --cflags python3-embed) \
	    $(LDFLAGS) -o $@ $< $$(pkg-config --libs python3-embed)

$(OBJDIR)/bench/pycall-static: bench/pycall.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fno-pie -DPYCALL_MAIN $$(pkg-config --cflags python3-embed) $(LDFLAGS) \
	    -no-pie -o $@ $< -Wl,--whole-archive $(PY_LIBPL)/libpython3.11.a -Wl,--no-whole-archive \
	    $(PY_STATIC_LIBS) -lpthread -lutil

bench:
	$(MAKE) deps DEB_PKGS="$(DEB_PKGS) $(BENCH_PKGS)"
	$(MAKE) $(BIN) $(BENCH_CLIENT) $(BENCH_MODCALL) $(BENCH_BARE) $(TEST_MODS) $(LOAD_BIN) \
	    $(MODULES)
	BENCH_STRICT=$(BENCH_STRICT) $(PYTHON) bench/run.py --bin $(abspath $(BIN)) \
	    --load $(abspath $(LOAD_BIN)) \
	    --client $(abspath $(BENCH_CLIENT)) --out $(abspath $(OBJDIR)/bench/results.json) \
	    --modcall $(abspath $(BENCH_MODCALL)) --test-modules $(abspath $(OBJDIR)/tests/modules) \
	    --bare $(abspath $(BENCH_BARE))

# libFuzzer: the library objects again, built by clang with coverage and ASan+UBSan.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_DIR     := build/fuzz
FUZZ_CFLAGS  := -std=gnu11 -O1 -g -Wall -Wextra -Werror -Wmissing-prototypes -Wshadow \
                -Wno-unused-parameter -I. -Iinclude -MMD -MP -D_GNU_SOURCE -fno-omit-frame-pointer \
                -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
FUZZ_OBJ     := $(LIB_SRC:%.c=$(FUZZ_DIR)/%.o)
FUZZERS      := $(FUZZ_DIR)/fuzz_http $(FUZZ_DIR)/fuzz_wire $(FUZZ_DIR)/fuzz_resp

$(FUZZ_DIR)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJ) $(LDLIBS)

# fuzz_http also runs the differential oracle (tests/oracle/), linked with http-parser
$(FUZZ_DIR)/fuzz_http: tests/fuzz/fuzz_http.c $(ORACLE_SRC) tests/oracle/http_oracle.h $(FUZZ_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(ORACLE_SRC) $(FUZZ_OBJ) $(LDLIBS) \
	    $(ORACLE_LIBS)

# fuzz_resp: the response parser (http/resp.c) against http-parser in HTTP_RESPONSE mode
$(FUZZ_DIR)/fuzz_resp: tests/fuzz/fuzz_resp.c $(FUZZ_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJ) $(LDLIBS) $(ORACLE_LIBS)

fuzz-build: $(FUZZERS)

# Each fuzzer runs FUZZ_SECONDS from its seeds; a crash stops make and leaves the input in
# build/fuzz/artifacts/ (turn it into a tests/regress/ case).
fuzz: deps
	$(MAKE) fuzz-build
	$(PYTHON) tests/fuzz/seeds.py $(FUZZ_DIR)/seeds/http $(FUZZ_DIR)/seeds/wire $(FUZZ_DIR)/seeds/resp
	@mkdir -p $(FUZZ_DIR)/corpus/http $(FUZZ_DIR)/corpus/wire $(FUZZ_DIR)/corpus/resp \
	    $(FUZZ_DIR)/artifacts
	$(FUZZ_DIR)/fuzz_http -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -timeout=10 \
	    -artifact_prefix=$(FUZZ_DIR)/artifacts/http- $(FUZZ_DIR)/corpus/http $(FUZZ_DIR)/seeds/http
	$(FUZZ_DIR)/fuzz_wire -max_total_time=$(FUZZ_SECONDS) -max_len=256 -timeout=10 \
	    -artifact_prefix=$(FUZZ_DIR)/artifacts/wire- $(FUZZ_DIR)/corpus/wire $(FUZZ_DIR)/seeds/wire
	$(FUZZ_DIR)/fuzz_resp -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -timeout=10 \
	    -artifact_prefix=$(FUZZ_DIR)/artifacts/resp- $(FUZZ_DIR)/corpus/resp $(FUZZ_DIR)/seeds/resp
	@echo "fuzz: the three fuzzers ran $(FUZZ_SECONDS) s each without a finding"

clean:
	rm -rf build

# (not into build/image-rootfs/, the root filesystems test_image.py keeps, with their rc2.d)
-include $(shell find build -path build/image-rootfs -prune -o -name '*.d' -type f -print 2>/dev/null)

# The package list, for .ci/run's apt-get install.
print-deps:
	@echo $(DEB_PKGS)

# The image's two package lists (deploy/Dockerfile's BUILD_PKGS and RUNTIME_PKGS arguments).
print-build-pkgs:
	@echo $(BUILD_PKGS)

print-runtime-pkgs:
	@echo $(RUNTIME_PKGS)

# The container image, with the package lists from here (needs a Docker engine; none is needed
# to test it: tests/integration/test_image.py). APP_PKGS: an application's own Debian packages
# (the python3-* packages its Python kinds import), added to the runtime stage:
#   make image APP_PKGS="python3-pil python3-numpy"
# (not RUNTIME_PKGS+=...: on make's command line that replaces the list above, it does not
# append to it). image-python-example: the image of examples/python/ (its code, configuration
# and packages) built FROM $(IMAGE).
IMAGE ?= lagless:$(LG_VERSION)
APP_PKGS ?=
EXAMPLE_IMAGE ?= lagless-python-example:$(LG_VERSION)
FASTAPI_IMAGE ?= lagless-fastapi-example:$(LG_VERSION)
image:
	docker build -f deploy/Dockerfile --build-arg BUILD_PKGS="$(BUILD_PKGS)" \
	    --build-arg RUNTIME_PKGS="$(RUNTIME_PKGS)" --build-arg APP_PKGS="$(APP_PKGS)" \
	    -t $(IMAGE) .

image-python-example: image
	docker build -f examples/python/Dockerfile --build-arg BASE=$(IMAGE) -t $(EXAMPLE_IMAGE) .

# examples/fastapi/: lagless + the FastAPI app it supervises, one image FROM $(IMAGE)
image-fastapi-example: image
	docker build -f examples/fastapi/Dockerfile --build-arg BASE=$(IMAGE) -t $(FASTAPI_IMAGE) .

PREFIX  ?= /usr/local
DESTDIR ?=

LG_VERSION := $(shell sed -n 's/^\#define LG_VERSION "\(.*\)"/\1/p' common/version.h)

# Binaries, man pages, systemd units (with this PREFIX's path), the job modules the image ships
# (every one this build makes: upper, thumbnail, and python where python3-embed exists) in
# PREFIX/lib/lagless/modules, the module ABI header with its pkg-config file (share/pkgconfig: a
# module links no lagless library), and the example configuration, which never overwrites an
# existing one.
install: $(BIN) $(LOAD_BIN) $(MODULES)
	install -D -m 0755 $(BIN) $(DESTDIR)$(PREFIX)/bin/lagless
	install -D -m 0755 $(LOAD_BIN) $(DESTDIR)$(PREFIX)/bin/lagless-load
	install -D -m 0644 include/lagless/module.h $(DESTDIR)$(PREFIX)/include/lagless/module.h
	install -d $(DESTDIR)$(PREFIX)/lib/lagless/modules
	install -m 0755 $(MODULES) $(DESTDIR)$(PREFIX)/lib/lagless/modules/
	install -d $(DESTDIR)$(PREFIX)/share/pkgconfig
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(LG_VERSION)|g' include/lagless.pc.in \
	    > $(DESTDIR)$(PREFIX)/share/pkgconfig/lagless.pc
	install -D -m 0644 man/lagless.8 $(DESTDIR)$(PREFIX)/share/man/man8/lagless.8
	install -D -m 0644 man/lagless-load.1 $(DESTDIR)$(PREFIX)/share/man/man1/lagless-load.1
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/system
	sed 's|/usr/local/bin/lagless|$(PREFIX)/bin/lagless|g' deploy/lagless.service \
	    > $(DESTDIR)$(PREFIX)/lib/systemd/system/lagless.service
	install -m 0644 deploy/lagless.socket $(DESTDIR)$(PREFIX)/lib/systemd/system/lagless.socket
	install -d $(DESTDIR)/etc/lagless
	[ -e $(DESTDIR)/etc/lagless/lagless.conf ] || \
	    install -m 0644 deploy/lagless.conf $(DESTDIR)/etc/lagless/lagless.conf
