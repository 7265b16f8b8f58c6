# Thin wrapper: every target installs what is missing, configures, builds.
#   make demo   run posenc's main job on its built-in defaults: the quick lab run
#   make test   build and run every test (CTest)
BUILD ?= build
JOBS  ?= $(shell nproc)

.PHONY: deps configure build corpus demo test sanitize fuzz clean

deps:
	./scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

build: configure
	cmake --build $(BUILD) -j$(JOBS)

data/kjv.txt data/fortunes.txt:
	./scripts/make-corpus.sh $@

corpus: deps data/kjv.txt data/fortunes.txt

demo: build corpus
	./scripts/demo.sh $(BUILD)/cli/posenc

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# The framework-free layers (core, plot, CLI without the libtorch commands) under ASan + UBSan.
sanitize: deps
	cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPOSENC_WITH_TORCH=OFF -DPOSENC_SANITIZE=address,undefined
	cmake --build $(BUILD)-asan -j$(JOBS)
	ctest --test-dir $(BUILD)-asan --output-on-failure -j$(JOBS)

# libFuzzer (clang) on the config parser and the CLI's freqs/table arguments, FUZZ_SECONDS each,
# from the seed corpora (real configs; sample argument lists). A crash leaves crash-* files.
FUZZ_SECONDS ?= 60
fuzz: deps
	CXX=clang++ cmake -S . -B $(BUILD)-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPOSENC_WITH_TORCH=OFF -DPOSENC_BUILD_TESTS=OFF \
	  -DPOSENC_FUZZ=ON -DPOSENC_SANITIZE=fuzzer-no-link,address,undefined
	cmake --build $(BUILD)-fuzz -j$(JOBS) --target config_fuzzer cli_fuzzer gguf_fuzzer result_fuzzer
	mkdir -p $(BUILD)-fuzz/corpus/config $(BUILD)-fuzz/corpus/cli
	$(BUILD)-fuzz/fuzz/config_fuzzer -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -artifact_prefix=$(BUILD)-fuzz/ \
	  $(BUILD)-fuzz/corpus/config tests/data/real-configs examples/configs
	$(BUILD)-fuzz/fuzz/cli_fuzzer -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -artifact_prefix=$(BUILD)-fuzz/ -close_fd_mask=3 \
	  $(BUILD)-fuzz/corpus/cli fuzz/corpus/cli
	mkdir -p $(BUILD)-fuzz/corpus/gguf
	$(BUILD)-fuzz/fuzz/gguf_fuzzer -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -artifact_prefix=$(BUILD)-fuzz/ \
	  $(BUILD)-fuzz/corpus/gguf fuzz/corpus/gguf
	mkdir -p $(BUILD)-fuzz/corpus/results
	$(BUILD)-fuzz/fuzz/result_fuzzer -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -artifact_prefix=$(BUILD)-fuzz/ \
	  $(BUILD)-fuzz/corpus/results fuzz/corpus/results

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-fuzz
