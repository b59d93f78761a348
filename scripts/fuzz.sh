#!/usr/bin/env bash
# make fuzz: builds each libFuzzer target (swiftc -sanitize=fuzzer,address)
# and runs it for FUZZ_SECONDS (default 60) from the committed seed corpus in
# Fuzz/corpus/<target>. New inputs go to a scratch copy; crashes are written
# to .build-fuzz/crashes/<target>/ and fail the run. Every crash found must
# become a regression test (Tests/RoomKitProtocolTests/FuzzRegressionTests).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-60}"
out=.build-fuzz
mkdir -p "$out/crashes"
flags=(-parse-as-library -sanitize=fuzzer,address -O -package-name RoomKit -I Sources/COpenSSLCrypto)

# The modules the targets test, in their order (docs/ARCHITECTURE.md): JSON,
# the protocol (re-exports JSON), the token signer.
for module in RoomKitJSON RoomKitProtocol RoomKitTokens; do
  echo "fuzz: building $module with sanitizers" >&2
  swiftc "${flags[@]}" -I "$out" -module-name "$module" -emit-module -emit-module-path "$out/$module.swiftmodule" \
    -emit-library -static -o "$out/lib$module.a" Sources/"$module"/*.swift
done

build() {  # name, extra sources...
  local name=$1; shift
  swiftc "${flags[@]}" -I "$out" -L "$out" -lRoomKitTokens -lRoomKitProtocol -lRoomKitJSON -lcrypto "$@" -o "$out/fuzz-$name"
}
build decode Fuzz/FuzzDecode.swift
build token Fuzz/FuzzToken.swift
build manifest Fuzz/FuzzManifest.swift Sources/RoomKitPluginHost/PluginManifest.swift \
  Sources/RoomKitPluginHost/PluginManifest+Isolation.swift Sources/RoomKitPluginHost/PluginManifest+Parsing.swift \
  Sources/RoomKitPluginHost/PluginManifest+Command.swift
build control Fuzz/FuzzControl.swift
build push Fuzz/FuzzPush.swift
build numbers Fuzz/FuzzNumbers.swift Sources/RoomKitPluginHost/PluginManifest.swift \
  Sources/RoomKitPluginHost/PluginManifest+Isolation.swift Sources/RoomKitPluginHost/PluginManifest+Parsing.swift \
  Sources/RoomKitPluginHost/PluginManifest+Command.swift

status=0
for target in ${FUZZ_TARGETS:-decode token manifest control push numbers}; do
  scratch="$out/corpus/$target"
  mkdir -p "$scratch" "$out/crashes/$target"
  cp -n Fuzz/corpus/"$target"/* "$scratch"/ 2>/dev/null || true
  echo "fuzz: $target for ${seconds}s" >&2
  if ! "$out/fuzz-$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix="$out/crashes/$target/" "$scratch" 2> "$out/$target.log"; then
    echo "fuzz: $target FOUND A CRASH: see $out/crashes/$target/ and $out/$target.log" >&2
    status=1
  fi
  tail -n 1 "$out/$target.log" >&2
done
exit $status
