# Thin wrapper: `make run` and `make test` install what is missing, build,
# fetch the default model, then generate text / run the whole suite.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PROMPT ?= What are three good reasons to learn the C programming language?

# make test also runs: the suite again built with ASan+UBSan (ASAN_BUILD),
# then each libFuzzer harness for FUZZ_SECONDS (FUZZ_BUILD, clang).
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 30
# Narrow, commented suppressions for what PoCL/LLVM allocate inside our
# process (tests/sanitizers/); everything else is an error.
SAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitizers/lsan.supp \
	UBSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitizers/ubsan.supp:print_stacktrace=1:halt_on_error=1

# make install PREFIX=/opt/clinfer (DESTDIR= is honoured too)
PREFIX ?= /usr/local

.PHONY: all deps build model run test test-asan test-fuzz install clean
all: build

deps:
	@sh scripts/setup.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

model: deps
	@sh models/fetch_default.sh >/dev/null

run: build model
	$(BUILD)/clinfer run --chat -n 160 -p "$(PROMPT)"

test: build model
	cd $(BUILD) && ctest --output-on-failure -j 1
	@$(MAKE) --no-print-directory test-asan test-fuzz

test-asan: deps model
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLINFER_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS) -- --no-print-directory
	cd $(ASAN_BUILD) && $(SAN_ENV) ctest --output-on-failure -j 1

test-fuzz: build
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLINFER_FUZZ=ON >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_gguf fuzz_tokenizer -- --no-print-directory
	@sh tests/fuzz/run.sh $(FUZZ_BUILD) $(BUILD)/tiny_gguf $(FUZZ_SECONDS)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
