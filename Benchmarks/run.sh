#!/usr/bin/env bash
# `make bench`: release-builds roomd and the benchmark executables (the
# separate package in Benchmarks/, so `swift test` never builds them), the
# C bench plugins, the Python peer's virtual environment, then runs every
# workload for RoomKit and for the peers (Benchmarks/bench.py), which
# rewrites docs/BENCHMARKS.md. BENCH_QUICK=1: a smoke run of a few minutes
# (one run); BENCH_RUNS=N: N runs (default 3); BENCH_PIN=0: no taskset.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
SWIFT="${SWIFT:-swift}"

# Sessions are multiplexed over a few connections, but fan-out opens one
# connection per member: raise the open-files limit as far as we may.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || ulimit -n 20000 2>/dev/null || true

echo "== release build (Benchmarks/.build)"
# SwiftPM may keep the build plan of the root package (a path dependency)
# from before files were added to it: drop the plan so it is made anew.
rm -f .build/release.yaml
for product in roomd roombot roomkit-bench plugin-bench isolation-bench roomkit-plugin-host bench-noop-swift; do
    "$SWIFT" build -c release --package-path "$here" --product "$product"
done

echo "== NIO peer (Benchmarks/peers/nio-peer, its own package: never part of RoomKit's products)"
# SwiftNIO, swift-nio-ssl's BoringSSL and websocket-kit: minutes on 2 cores the
# first time. A failed build leaves the NIO column "n/a" rather than no page.
if ! "$SWIFT" build -c release --package-path "$here/peers/nio-peer"; then
    echo "NIO peer did not build: the run goes on without it" >&2
    rm -f "$here/peers/nio-peer/.build/release/NIOPeer"
fi

echo "== C bench plugins"
mkdir -p .build/bench-plugins
cc -shared -fPIC -O2 -I ../Sources/CRoomKitPluginABI/include plugins/bench_noop.c -o .build/bench-plugins/libbench-noop-c.so
cc -shared -fPIC -O2 -DBENCH_PROBE -I ../Sources/CRoomKitPluginABI/include plugins/bench_noop.c \
    -o .build/bench-plugins/libbench-probe-c.so

echo "== Python peer (Benchmarks/.venv)"
if [ ! -x .venv/bin/python ]; then python3 -m venv .venv; fi
if ! .venv/bin/python -c "import websockets" 2>/dev/null; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check websockets
fi

echo "== workloads"
exec .venv/bin/python bench.py "$@"
