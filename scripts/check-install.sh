#!/usr/bin/env bash
# `make check-install`: `make install` into a temporary DESTDIR, then checks
# the tree: every file in place, the binaries run (--version), the shipped
# plugins pass `roombot check`, a C plugin compiles against the installed
# header through pkg-config, the man pages render, and the systemd units pass
# `systemd-analyze verify` (skipped, with a note, when the tool is absent).
# NO_BUILD=1 reuses the last release build.
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=${PREFIX:-/usr/local}
stage=$(mktemp -d "${TMPDIR:-/tmp}/roomkit-install.XXXXXX")
trap 'rm -rf "$stage"' EXIT
fail() { echo "check-install: FAIL: $*" >&2; exit 1; }

DESTDIR="$stage" PREFIX="$PREFIX" scripts/install.sh
root="$stage$PREFIX"

expected=(
  bin/roomd bin/roombot bin/multiroom-bot bin/roomkit-plugin-host
  bin/RoomKit_RoomKitFleet.resources/Lua/claim.lua bin/RoomKit_roombot.resources/Templates/rust/src/lib.rs
  lib/roomkit/plugins/liburl-rewrite.so lib/roomkit/plugins/liberror-log.so
  lib/roomkit/plugins/libecho-commands.so lib/roomkit/plugins/plugins.json
  include/roomkit_plugin.h include/roomkit_json.h lib/pkgconfig/roomkit-plugin.pc
  share/man/man1/roomd.1 share/man/man1/roombot.1 share/man/man1/multiroom-bot.1
  lib/systemd/system/roomd.service lib/systemd/system/roombot.service
  share/doc/roomkit/LICENSE share/doc/roomkit/CHANGELOG.md share/doc/roomkit/docs/CLI.md
)
for file in "${expected[@]}"; do [ -f "$root/$file" ] || fail "missing $PREFIX/$file"; done
for product in roomd roombot multiroom-bot; do
  [ -x "$root/bin/$product" ] || fail "$product is not executable"
  line=$("$root/bin/$product" --version)
  [[ "$line" =~ ^$product\ [0-9]+\.[0-9]+\.[0-9]+\ \(revision\ [0-9a-z]+\)$ ]] || fail "$product --version: '$line'"
done
# Nothing outside PREFIX inside DESTDIR.
outside=$(find "$stage" -type f ! -path "$root/*")
[ -z "$outside" ] || fail "installed outside $PREFIX: $outside"
# No file refers to the build tree (the units and the .pc use PREFIX).
if grep -rl "$(pwd)" "$root/lib/pkgconfig" "$root/lib/systemd" "$root/lib/roomkit/plugins/plugins.json"; then
  fail "installed text files name the build tree"
fi
grep -q "^ExecStart=$PREFIX/bin/roomd serve" "$root/lib/systemd/system/roomd.service" || fail "roomd.service ExecStart"

# The shipped plugins load and pass the ABI check from their installed place.
"$root/bin/roombot" check --manifest "$root/lib/roomkit/plugins/plugins.json" || fail "roombot check of the shipped plugins"
# The process-isolation host is installed where roombot looks for it, and runs
# (started by hand it says so and exits 64).
rc=0; "$root/bin/roomkit-plugin-host" 2>/dev/null || rc=$?
[ "$rc" = 64 ] || fail "bin/roomkit-plugin-host does not run from the installed tree (exit $rc)"

# A C plugin builds against the installed header through pkg-config.
export PKG_CONFIG_PATH="$root/lib/pkgconfig"
cflags=$(pkg-config --define-variable=prefix="$root" --cflags roomkit-plugin) || fail "pkg-config roomkit-plugin"
[ "$(pkg-config --modversion roomkit-plugin)" = "$(sed -n 's/.*static let version = "\(.*\)".*/\1/p' Sources/RoomKitCLI/BuildInfo.swift)" ] \
  || fail "roomkit-plugin.pc version"
cp Plugins/EchoCommands/echo_commands.c Plugins/EchoCommands/include/echo_commands.h "$stage/"
# shellcheck disable=SC2086
cc -shared -fPIC -o "$stage/libmine.so" $cflags -I"$stage" "$stage/echo_commands.c" \
  || fail "a C plugin does not compile against the installed header"
printf '{"manifestVersion": 1, "plugins": [{"name": "mine", "library": "%s", "abi": 1, "hooks": ["magix"]}]}\n' \
  "$stage/libmine.so" > "$stage/mine.json"
"$root/bin/roombot" check --manifest "$stage/mine.json" || fail "roombot check of a plugin built with pkg-config"

# A scaffolded C plugin builds (and passes its test) with no path into the repo.
"$root/bin/roombot" new-plugin scaffolded --lang c --dir "$stage/scaffolded" >/dev/null || fail "roombot new-plugin"
# Its Makefile finds roomkit-plugin.pc and roombot beside the installed
# roombot that wrote it: no PKG_CONFIG_PATH, no PATH entry.
env -u PKG_CONFIG_PATH PATH=/usr/bin:/bin make -C "$stage/scaffolded" >/dev/null \
  || fail "the C scaffold does not build against the installed tree without extra environment"
"$root/bin/roombot" check --manifest "$stage/scaffolded/plugins.json" || fail "roombot check of the C scaffold"

# Man pages render, with the sections beyond the argument parser's output.
for page in roomd roombot multiroom-bot; do
  text=$(MANWIDTH=80 man -l "$root/share/man/man1/$page.1" 2>/dev/null)
  grep -q -i "$page" <<< "$text" || fail "man page $page.1 does not render"
  for heading in DESCRIPTION ENVIRONMENT FILES EXAMPLES; do
    grep -q "^$heading" <<< "$text" || fail "man page $page.1 has no $heading"
  done
done

# The binaries run without the Swift toolchain: no library resolves into it,
# and each runs with the toolchain's directories hidden (an empty
# LD_LIBRARY_PATH cannot bring them back; the runpath must not point there).
toolchain=$(dirname "$(dirname "$(readlink -f "$(command -v swift)")")")
for product in roomd roombot multiroom-bot roomkit-plugin-host; do
  if ldd "$root/bin/$product" | grep -F "$toolchain"; then
    fail "$product loads libraries from the toolchain ($toolchain)"
  fi
  ldd "$root/bin/$product" | grep -q "not found" && fail "$product has unresolved libraries: $(ldd "$root/bin/$product" | grep 'not found')"
done
if command -v unshare >/dev/null 2>&1 && unshare -m true 2>/dev/null; then
  for product in roomd roombot multiroom-bot; do
    unshare -m sh -c "mount -t tmpfs none '$toolchain' && '$root/bin/$product' --version" >/dev/null \
      || fail "$product does not run with the toolchain hidden"
  done
  echo "check-install: the binaries run with $toolchain hidden" >&2
else
  echo "check-install: unshare -m unavailable; ldd checked only" >&2
fi

# The systemd units. verify resolves ExecStart on the real root, so the
# copies checked point at the staged binaries; man: links resolve in DESTDIR.
if command -v systemd-analyze >/dev/null 2>&1; then
  for unit in roomd roombot; do
    sed "s|$PREFIX/bin/|$root/bin/|" "$root/lib/systemd/system/$unit.service" > "$stage/$unit.service"
  done
  MANPATH="$root/share/man" systemd-analyze verify "$stage/roomd.service" "$stage/roombot.service" \
    || fail "systemd-analyze verify"
  echo "check-install: systemd-analyze verify passed" >&2
else
  echo "check-install: systemd-analyze not installed; unit verification skipped" >&2
fi
echo "check-install: OK ($(find "$stage" -type f | wc -l) files under DESTDIR)" >&2
