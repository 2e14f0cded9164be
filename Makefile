# fusebox: one-command entry points. Everything goes through CMakePresets.json.
#
#   make deps    install missing Debian packages (apt-get; sudo if not root)
#   make build   configure + build the release preset (gcc, -O2, -Werror)
#   make test    format-check, then release, the Node package (test-node), asan, tsan in turn:
#                configure, build, test; stops at the first failure
#   make test-node  npm ci in bindings/node (its install script builds the addon with CMake),
#                then npm test; needs Node.js >= 20 with its headers and npm (docs/node.md)
#   make tidy    clang-tidy (the repo's .clang-tidy) on the library, the modules and the Node
#                addon's sources; warnings fail
#   make build-debug  configure + build the debug preset (gcc -O0, libstdc++ assertions)
#   make demo    build release, then `fusebox sim default`, `fusebox compare` (the five presets)
#                and seed 000's story through two gateways (apps/gateway/demo.sh)
#   make bench   build release and run the benchmarks
#   make mutation  plant the one-line bugs of tools/mutation/mutants.json one at a time in a
#                scratch copy and report which the tests catch (not in CI; about an hour;
#                MUTATION_ARGS="--only gw-" for a subset; docs/testing.md)
#   make format  clang-format -i every C++ file git knows about (tracked or not ignored)
#   make clean   remove build/

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

DEB_PACKAGES := cmake ninja-build g++ clang libclang-rt-14-dev libgtest-dev libgmock-dev \
                libbenchmark-dev make git clang-format clang-tidy libcli11-dev nlohmann-json3-dev libyaml-cpp-dev chromium \
                libspdlog-dev prometheus libhiredis-dev redis-server redis-sentinel libboost-dev wrk nginx-light python3 \
                libssl-dev openssl libcurl4-openssl-dev libgrpc++-dev libprotobuf-dev protobuf-compiler \
                protobuf-compiler-grpc
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
APT := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get

# Parallelism for builds and tests: one job per core (2 on the CI box).
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

ASAN_ENV := ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
TSAN_ENV := TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1

CLANG_FORMAT ?= clang-format

.PHONY: deps build build-debug test test-release test-node test-asan test-tsan demo bench format format-check \
        tidy clean mutation

deps:
	@missing=""; \
	for pkg in $(DEB_PACKAGES); do \
	  dpkg -s "$$pkg" 2>/dev/null | grep -q '^Status: install ok installed' || missing="$$missing $$pkg"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "deps: installing$$missing"; \
	  $(APT) update; \
	  $(APT) install -y --no-install-recommends $$missing; \
	else \
	  echo "deps: all packages present"; \
	fi

build: deps
	cmake --preset release
	cmake --build --preset release -j $(JOBS)

# Each preset: configure, build, ctest. Run one by one so that the first failure stops make.
test: deps
	$(MAKE) --no-print-directory format-check
	$(MAKE) --no-print-directory test-release
	$(MAKE) --no-print-directory test-node
	$(MAKE) --no-print-directory test-asan
	$(MAKE) --no-print-directory test-tsan

test-release:
	cmake --preset release
	cmake --build --preset release -j $(JOBS)
	ctest --preset release -j $(JOBS)

# The Node package (bindings/node, docs/node.md). Node.js is not in DEB_PACKAGES: Debian 12's
# nodejs is 18 (the package needs >= 20) and its npm conflicts with NodeSource's nodejs, which
# bundles npm and ships the Node-API headers in /usr/include/node. `npm ci` fetches the two
# pinned packages of package-lock.json from the npm registry and runs the install script (CMake
# against the local headers, ccache if CMAKE_CXX_COMPILER_LAUNCHER says so).
test-node:
	@command -v node >/dev/null && command -v npm >/dev/null \
	  && node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' \
	  || { echo "test-node: needs Node.js >= 20 and npm on PATH (NodeSource's nodejs 20 deb," \
	            "which also ships /usr/include/node); Debian 12's nodejs is 18" >&2; exit 1; }
	cd bindings/node && FUSEBOX_NODE_JOBS=$(JOBS) npm ci --no-audit --no-fund
	cd bindings/node && npm test

test-asan:
	cmake --preset asan
	cmake --build --preset asan -j $(JOBS)
	$(ASAN_ENV) ctest --preset asan -j $(JOBS)

test-tsan:
	cmake --preset tsan
	cmake --build --preset tsan -j $(JOBS)
	$(TSAN_ENV) ctest --preset tsan -j $(JOBS)

# The simulator's story (one breaker, seed 004), then the gateway's (seed 000:
# Redis, a fake Graph API, two gateways, a client walking the sequence diagram).
demo: build
	./build/release/bin/fusebox sim default
	@echo
	./build/release/bin/fusebox compare
	@echo
	apps/gateway/demo.sh ./build/release/bin/fusebox

bench: build
	./build/release/bench/fusebox_bench --benchmark_repetitions=5 \
	  --benchmark_report_aggregates_only=true

MUTATION_ARGS ?=
mutation: deps
	nice -n 10 python3 tools/mutation/run.py $(MUTATION_ARGS)

format:
	git ls-files -z --cached --others --exclude-standard -- '*.h' '*.cc' \
	  | xargs -0 -r $(CLANG_FORMAT) -i

format-check:
	git ls-files -z --cached --others --exclude-standard -- '*.h' '*.cc' \
	  | xargs -0 -r $(CLANG_FORMAT) --dry-run --Werror

# The library and the modules, not tests, apps, benchmarks or fuzzers, against the release
# preset's compile_commands.json (configured, not built: nothing here needs generated files).
# One file per clang-tidy process, $(JOBS) at a time.
CLANG_TIDY ?= clang-tidy
TIDY_SOURCES = $(shell git ls-files -- 'src/*.cc' 'modules/*/src/*.cc' \
                 | grep -v -e '_test\.cc$$' -e '_test_fixture\.cc$$' -e '_main\.cc$$')
# The Node addon's sources are checked against a compile database of their own
# (configured, not built: build/node-tidy), which needs node-addon-api's headers.
NODE_TIDY_SOURCES = $(shell git ls-files -- 'bindings/node/src/*.cc')
tidy:
	cmake --preset release >/dev/null
	printf '%s\n' $(TIDY_SOURCES) \
	  | xargs -r -P $(JOBS) -n 1 $(CLANG_TIDY) -p build/release --quiet --warnings-as-errors='*'
	test -d bindings/node/node_modules/node-addon-api || (cd bindings/node && npm ci --ignore-scripts)
	cmake -S bindings/node -B build/node-tidy -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
	printf '%s\n' $(NODE_TIDY_SOURCES) \
	  | xargs -r -P $(JOBS) -n 1 $(CLANG_TIDY) -p build/node-tidy --quiet --warnings-as-errors='*'

build-debug: deps
	cmake --preset debug
	cmake --build --preset debug -j $(JOBS)

clean:
	rm -rf build
