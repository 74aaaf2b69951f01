# Airlock: `make demo` and `make test` work on a fresh Debian 12 machine as root.

BUILD ?= build
ASAN_BUILD ?= build-asan
# make install: where the programs go (PREFIX/bin, PREFIX/share/man, ...), and
# an optional staging root for packaging (DESTDIR).
PREFIX ?= /usr/local
DESTDIR ?=

# Everything the build, the tests, the demo and the benchmarks need.
PKGS := meson ninja-build pkg-config gcc clang libclang-rt-14-dev golang-go \
	libevent-dev libseccomp-dev libssl-dev libsqlite3-dev libjansson-dev \
	libgit2-dev libcriterion-dev python3 python3-pytest python3-pytest-xdist \
	bubblewrap hyperfine iproute2 curl wget git procps util-linux \
	ca-certificates openssl tinyproxy wrk \
	man-db groff-base nodejs \
	runsc chromium chromium-driver python3-selenium openssh-server openssh-client \
	containerd uidmap qemu-system-x86 btrfs-progs

.PHONY: all deps build install uninstall test unit integration asan demo bench fuzz format clean

all: build

deps:
	@if dpkg-query -W -f='$${Status}\n' $(PKGS) 2>/dev/null | grep -qv 'install ok installed' || \
	    [ $$(dpkg-query -W -f='$${Status}\n' $(PKGS) 2>/dev/null | wc -l) -ne $(words $(PKGS)) ]; then \
		if [ $$(id -u) -ne 0 ]; then \
			echo "make deps: missing packages; run as root: apt-get install $(PKGS)" >&2; exit 1; \
		fi; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(PKGS); \
	fi
	@# npm: Debian packages it apart from nodejs; other builds of nodejs bring
	@# their own (and conflict with Debian's).
	@command -v npm >/dev/null || { [ $$(id -u) -eq 0 ] && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends npm; } || \
		{ echo "make deps: npm is missing; run as root: apt-get install npm" >&2; exit 1; }
	@# The official MCP SDK, whose client drives airlock-tool mcp in the tests.
	@test -d tests/integration/mcp/node_modules/@modelcontextprotocol/sdk || \
		(cd tests/integration/mcp && npm ci --no-audit --no-fund)
	@# The microvm tier's guest kernel, unpacked from Debian's linux-image
	@# package into Airlock's share directory (not installed as a host kernel).
	@test -r $(PREFIX)/share/airlock/vm/vmlinuz || \
		{ [ $$(id -u) -eq 0 ] && src/vm/guest-kernel.sh $(PREFIX)/share/airlock/vm; } || \
		echo "make deps: no guest kernel for the microvm tier; run as root: src/vm/guest-kernel.sh $(PREFIX)/share/airlock/vm" >&2

$(BUILD)/build.ninja:
	meson setup $(BUILD)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

# airlock, airlockd and their helpers, a man page per command, bash and zsh
# completion, airlockd.service and airlockd.socket. The build directory is
# set up for PREFIX (it is kept in the build: change it with a new PREFIX).
install: deps $(BUILD)/build.ninja
	meson configure $(BUILD) -Dprefix=$(PREFIX)
	ninja -C $(BUILD)
	meson install -C $(BUILD) --no-rebuild $(if $(DESTDIR),--destdir $(abspath $(DESTDIR)))

# Removes what the last install into the same PREFIX and DESTDIR put there.
uninstall:
	ninja -C $(BUILD) uninstall

# Unit tests, then the integration and escape suites as root and as an
# ordinary user, then all of it again under ASan+UBSan.
test: build
	tests/run-all.sh

unit: build
	meson test -C $(BUILD) --suite unit --print-errorlogs

integration: build
	/usr/bin/python3 -m pytest -q tests/integration tests/escape tests/daemon tests/faults

asan: deps
	test -f $(ASAN_BUILD)/build.ninja || meson setup $(ASAN_BUILD) -Db_sanitize=address,undefined -Db_lundef=false
	ninja -C $(ASAN_BUILD)

demo: build
	examples/demo.sh
	/usr/bin/python3 examples/robot-sim/demo.py
	examples/demo-agent.py

bench: build
	bench/spawn.sh

fuzz: deps
	tests/fuzz/run.sh

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
