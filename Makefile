# RoomKit developer entry points. `make run` and `make test` are the two
# commands the README opens with; both install what they need first.
SWIFT ?= swift
SHELL := /bin/bash

.PHONY: run test build release bootstrap clean bench fuzz check-sanitizers soak install check-install test-browser fleet-sim scale-bot bench-ab test-python

# Where `make install` puts things; DESTDIR stages the tree (packaging).
PREFIX ?= /usr/local
DESTDIR ?=

bootstrap:
	@scripts/bootstrap.sh

build: bootstrap
	$(SWIFT) build

release: bootstrap
	$(SWIFT) build -c release

# The main job: builds, then runs the example multi-room bot (embedded roomd,
# participants in five rooms, the bot with its plugins, a live view and a tour).
# Flags pass through ARGS: make run ARGS=--forever
run: bootstrap
	@scripts/run.sh $(ARGS)

# The whole test suite: the Python SDK's own tests (sdk/python/tests, a few
# seconds), then XCTest. Its closing line is XCTest's own summary.
test: bootstrap
	$(SWIFT) build --build-tests
	$(MAKE) --no-print-directory test-python
	$(SWIFT) test --skip-build --disable-swift-testing

# The Python plugin SDK's unit and wire tests alone (standard library only).
test-python:
	cd sdk/python && python3 -m unittest discover -s tests -t .

# roombot's dashboard in a real headless Chromium (not part of `make test`):
# a real roomd and roombot, the page loaded with no console errors, the bot's
# rooms on screen, a kick shown within 1 s; screenshot in .build/browser/.
# Installs Debian's chromium and python3-websocket when missing; the script
# exits 77 when they cannot be installed (.ci/run treats that as skipped).
test-browser: bootstrap
	@scripts/browser-test.sh

# libFuzzer targets (protocol messages, tokens, manifest, request bodies,
# edge numbers at every numeric entry point),
# each for FUZZ_SECONDS (default 60) from the seed corpus in Fuzz/corpus.
fuzz: bootstrap
	@scripts/fuzz.sh

# The soak test (not part of `make test`): SOAK_SESSIONS (default 5000)
# sessions through the fault proxy to a real roomd for SOAK_MINUTES (default
# 30) with random faults; nothing acknowledged may be lost and the client's
# RSS and descriptors must stay flat. The report goes to SOAK_REPORT.
soak: bootstrap
	$(SWIFT) build --build-tests
	SOAK_MINUTES=$${SOAK_MINUTES:-30} SOAK_SESSIONS=$${SOAK_SESSIONS:-5000} \
	SOAK_REPORT=$${SOAK_REPORT:-$(CURDIR)/.build/soak-report.txt} \
	$(SWIFT) test --skip-build --disable-swift-testing --filter SoakTests

# Benchmarks side by side with two peers, Python and SwiftNIO (not part of
# `make test`; separate packages in Benchmarks/). Rewrites docs/BENCHMARKS.md
# and Benchmarks/.build/results.json. BENCH_RUNS (default 3) runs, each
# figure their median and min-max; BENCH_QUICK=1 make bench: a smoke run of
# a few minutes (one run, small sizes); BENCH_PIN=0: no taskset pinning;
# BENCH_MILLION_RUNS (default 1): how many runs include workload 9 (1M rooms).
bench: bootstrap
	@SWIFT=$(SWIFT) Benchmarks/run.sh

# Whether a change is a regression: the firehose (workload 6), logins
# (workload 1) and dispatch latency (workload 2) with BASE's build and the
# working tree's, alternating on the
# same machine (Benchmarks/ab.py; AB_ROUNDS, AB_WORKLOADS, AB_LOGINS).
# Pages of `make bench` days apart cannot say it on a shared machine.
bench-ab: bootstrap
	@test -n "$(BASE)" || { echo "usage: make bench-ab BASE=<revision>" >&2; exit 2; }
	@SWIFT=$(SWIFT) python3 Benchmarks/ab.py $(BASE)

# roombot itself at scale (not part of `make test`; issue #26): a release
# roomd with its defaults and a release roombot with a serviceToken and
# SCALE_ROOMS (default 300000) rooms in bot.json; then roomd kill -9. Prints
# JSON: time until all are LOGINED and back, RSS per room, failed login
# attempts, log lines (Benchmarks/roombot_scale.py).
scale-bot: bootstrap
	$(SWIFT) build -c release
	python3 Benchmarks/roombot_scale.py --rooms $${SCALE_ROOMS:-300000} --kill-roomd --bin .build/release

# A fleet at scale (docs/FLEET.md; not part of `make test`): FLEET_HOSTS
# (default 10) roombot processes share FLEET_ROOMS (default 20000) rooms
# through a private redis-server; cold start, kill -9 of FLEET_KILL (2)
# hosts, and the measured cost of every Lua script. Prints JSON.
fleet-sim: bootstrap
	$(SWIFT) build
	python3 scripts/fleet-sim.py

# The whole suite under ThreadSanitizer, then AddressSanitizer (own build
# folders; not part of `make test`). --export-dynamic lets instrumented
# plugin libraries resolve the sanitizer runtime in the test process.
# LeakSanitizer runs at the exit of the test process and of every roomd,
# roombot and example it spawns (they inherit LSAN_OPTIONS); any leak fails
# the run. scripts/lsan.supp suppresses only XCTest's and Foundation's own
# leaks, each entry with its reason (docs/RELIABILITY.md).
# SWIFT_BACKTRACE=enable=no: a Swift process that traps on purpose (a test
# checks a precondition in a forked child) would run the Swift runtime's
# backtracer, whose memory server reads the trapping thread's stack whole,
# which AddressSanitizer reports as a stack-buffer-underflow inside the
# runtime; under a sanitizer its own reports are the diagnostics.
check-sanitizers: bootstrap
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path .build-tsan -Xlinker --export-dynamic
	SWIFT_BACKTRACE=enable=no ROOMKIT_SANITIZED=1 $(SWIFT) test --skip-build --sanitize=thread --scratch-path .build-tsan --disable-swift-testing
	$(SWIFT) build --build-tests --sanitize=address --scratch-path .build-asan -Xlinker --export-dynamic
	SWIFT_BACKTRACE=enable=no ROOMKIT_SANITIZED=1 LSAN_OPTIONS="suppressions=$(CURDIR)/scripts/lsan.supp:print_suppressions=0$${LSAN_OPTIONS:+:$$LSAN_OPTIONS}" \
		$(SWIFT) test --skip-build --sanitize=address --scratch-path .build-asan --disable-swift-testing

# Release binaries, the shipped plugins (lib/roomkit/plugins/), the plugin
# header and roomkit-plugin.pc, man pages (swift-argument-parser's
# GenerateManual plugin) and the systemd units of deploy/systemd/, under
# $(DESTDIR)$(PREFIX). See scripts/install.sh for the layout.
install: bootstrap
	SWIFT=$(SWIFT) PREFIX=$(PREFIX) DESTDIR=$(DESTDIR) scripts/install.sh

# `make install` into a temporary DESTDIR, then checks the tree: files in
# place, --version, the shipped plugins load, a C plugin builds with
# pkg-config, man pages render, `systemd-analyze verify` on the units.
check-install: bootstrap
	SWIFT=$(SWIFT) PREFIX=$(PREFIX) scripts/check-install.sh

clean:
	rm -rf .build
