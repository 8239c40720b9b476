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

# make test also runs: the suite again built with ASan+UBSan (ASAN_BUILD),
# where a test that fails is run once more: LeakSanitizer's exit-time
# tracer now and then dies itself ("Tracer caught signal 11", after every
# test passed; 1 of 4 test_batch runs here) while PoCL's threads live, and a
# real finding fails both runs;
# then each libFuzzer harness for FUZZ_SECONDS (FUZZ_BUILD, clang).
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 30
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

model: deps
	@sh models/fetch.sh $(MODEL) >/dev/null

test-models: deps
	@for m in $(TEST_MODELS); do sh models/fetch.sh $$m >/dev/null || exit 1; done

run: build model
	$(BUILD)/clinfer run $(if $(MODEL),-m $(MODEL)) --chat -n 160 -p "$(PROMPT)"

test: build test-models
	cd $(BUILD) && ctest --output-on-failure -j 1
	@$(MAKE) --no-print-directory test-asan test-fuzz

test-asan: deps test-models
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLINFER_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS) -- --no-print-directory
	cd $(ASAN_BUILD) && $(SAN_ENV) ctest --output-on-failure -j 1 --repeat until-pass:2

test-fuzz: build
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLINFER_FUZZ=ON >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_gguf fuzz_tokenizer fuzz_kv_blocks fuzz_grammar $$(cmake --build $(FUZZ_BUILD) --target help | grep -o fuzz_request) -- --no-print-directory
	@sh tests/fuzz/run.sh $(FUZZ_BUILD) $(BUILD)/tiny_gguf $(FUZZ_SECONDS)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
