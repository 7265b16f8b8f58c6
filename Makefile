# Thin wrapper: every target installs what is missing, configures, builds.
#   make demo   run posenc's main job on its built-in defaults: the quick lab run
#   make test   build and run every test (CTest)
BUILD ?= build
JOBS  ?= $(shell nproc)

.PHONY: deps configure build corpus demo test sanitize clean

deps:
	./scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

build: configure
	cmake --build $(BUILD) -j$(JOBS)

data/kjv.txt:
	./scripts/make-corpus.sh data/kjv.txt

corpus: deps data/kjv.txt

demo: build corpus
	./scripts/demo.sh $(BUILD)/cli/posenc

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# The framework-free layers (core, plot, CLI without the libtorch commands) under ASan + UBSan.
sanitize: deps
	cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPOSENC_WITH_TORCH=OFF -DPOSENC_SANITIZE=address,undefined
	cmake --build $(BUILD)-asan -j$(JOBS)
	ctest --test-dir $(BUILD)-asan --output-on-failure -j$(JOBS)

clean:
	rm -rf $(BUILD) $(BUILD)-asan
