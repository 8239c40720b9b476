# Thin wrapper: `make run` and `make test` install what is missing, build,
# fetch the default model, then generate text / run the whole suite.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PROMPT ?= What are three good reasons to learn the C programming language?

.PHONY: all deps build model run test clean
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

clean:
	rm -rf $(BUILD)
