# Thin wrapper: `make run` and `make test` install what is missing, build,
# then generate text / run the whole suite.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps build run test clean
all: build

deps:
	@sh scripts/setup.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

run: build
	$(BUILD)/clinfer devices

test: build
	cd $(BUILD) && ctest --output-on-failure -j 1

clean:
	rm -rf $(BUILD)
