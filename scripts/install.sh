#!/usr/bin/env bash
# `make install`: builds release binaries and man pages, then installs into
# $DESTDIR$PREFIX (PREFIX default /usr/local, DESTDIR default empty):
#   bin/                       roomd, roombot, multiroom-bot, roomkit-plugin-host
#   bin/RoomKit_*.resources/   roombot's resources (the fleet's Lua, scaffold templates)
#   lib/roomkit/plugins/       the shipped plugins and a manifest naming them
#   lib/roomkit/               the Swift runtime libraries (runpaths are $ORIGIN-relative)
#   include/roomkit_plugin.h   the plugin ABI header
#   include/roomkit_json.h     the header-only JSON reader for C plugins
#   lib/pkgconfig/             roomkit-plugin.pc
#   share/man/man1/            man pages (swift-argument-parser's GenerateManual)
#   lib/systemd/system/        roomd.service, roombot.service (deploy/systemd)
#   share/doc/roomkit/         README, CHANGELOG, LICENSE, docs/
#   share/roomkit/package/     the Swift package (Swift plugins depend on it by path)
# Set NO_BUILD=1 to install what the last release build left in .build.
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
case "$PREFIX" in /*) ;; *) echo "install: PREFIX must be absolute, got '$PREFIX'" >&2; exit 2 ;; esac
root="$DESTDIR$PREFIX"

if [ "${NO_BUILD:-0}" != 1 ]; then
  # The plugin builds every product in release mode, then writes one man page
  # per executable into .build/plugins/GenerateManual/outputs/<target>/.
  "$SWIFT" package plugin generate-manual >&2
fi
bin=$("$SWIFT" build -c release --show-bin-path)
manuals=.build/plugins/GenerateManual/outputs
version=$(sed -n 's/.*static let version = "\(.*\)".*/\1/p' Sources/RoomKitCLI/BuildInfo.swift)
[ -n "$version" ] || { echo "install: no version in Sources/RoomKitCLI/BuildInfo.swift" >&2; exit 1; }

# roombot runs "isolation": "process" plugins (the default) through
# roomkit-plugin-host, which it looks for beside its own executable.
[ "${NO_BUILD:-0}" = 1 ] || "$SWIFT" build -c release --product roomkit-plugin-host >&2
for product in roomd roombot multiroom-bot roomkit-plugin-host; do
  [ -x "$bin/$product" ] || { echo "install: $bin/$product is not built" >&2; exit 1; }
  install -Dm755 "$bin/$product" "$root/bin/$product"
done

# roombot's SwiftPM resources (the fleet's Lua scripts, the Rust scaffold's
# templates): Bundle.module looks for them beside the executable.
for resources in RoomKit_RoomKitFleet.resources RoomKit_roombot.resources; do
  [ -d "$bin/$resources" ] || { echo "install: $bin/$resources is not built" >&2; exit 1; }
  (cd "$bin" && find "$resources" -type f) | while read -r file; do
    install -Dm644 "$bin/$file" "$root/bin/$file"
  done
done

plugins="$root/lib/roomkit/plugins"
for library in liburl-rewrite.so liberror-log.so libecho-commands.so; do
  [ -f "$bin/$library" ] || { echo "install: $bin/$library is not built" >&2; exit 1; }
  install -Dm755 "$bin/$library" "$plugins/$library"
done

# The Swift runtime, so the binaries run without the toolchain: the
# toolchain's libraries they load are copied to lib/roomkit/, and every
# runpath is made $ORIGIN-relative (patchelf). roombot and the Swift plugins
# it loads inline then share one runtime (one libswiftCore.so in the process);
# a Swift plugin built elsewhere gets the already loaded runtime by soname.
toolchain=$(dirname "$(dirname "$(readlink -f "$(command -v "$SWIFT")")")")
runtime="$root/lib/roomkit"
mkdir -p "$runtime"
for file in "$root"/bin/roomd "$root"/bin/roombot "$root"/bin/multiroom-bot "$root"/bin/roomkit-plugin-host "$plugins"/*.so; do
  ldd "$file" | awk -v t="$toolchain/" 'index($3, t) == 1 { print $3 }'
done | sort -u | while read -r library; do
  install -m644 "$(readlink -f "$library")" "$runtime/$(basename "$library")"
done
if ls "$runtime"/*.so >/dev/null 2>&1; then
  command -v patchelf >/dev/null 2>&1 || { echo "install: patchelf is needed (apt-get install patchelf; make bootstrap installs it)" >&2; exit 1; }
  for file in "$root"/bin/roomd "$root"/bin/roombot "$root"/bin/multiroom-bot "$root"/bin/roomkit-plugin-host; do
    patchelf --set-rpath '$ORIGIN/../lib/roomkit' "$file"
  done
  for file in "$plugins"/*.so; do patchelf --set-rpath '$ORIGIN/..' "$file"; done
  for file in "$runtime"/*.so; do patchelf --set-rpath '$ORIGIN' "$file"; done
fi
# The example's manifest, with the libraries beside it.
sed 's|"library": "lib/|"library": "|' Examples/MultiRoomBot/plugins.json > "$plugins/plugins.json.tmp"
install -Dm644 "$plugins/plugins.json.tmp" "$plugins/plugins.json"
rm -f "$plugins/plugins.json.tmp"

install -Dm644 Sources/CRoomKitPluginABI/include/roomkit_plugin.h "$root/include/roomkit_plugin.h"
install -Dm644 Sources/CRoomKitPluginABI/include/roomkit_json.h "$root/include/roomkit_json.h"
mkdir -p "$root/lib/pkgconfig"
sed -e "s|@PREFIX@|$PREFIX|g" -e "s|@VERSION@|$version|g" deploy/pkgconfig/roomkit-plugin.pc.in > "$root/lib/pkgconfig/roomkit-plugin.pc"
chmod 644 "$root/lib/pkgconfig/roomkit-plugin.pc"

count=0
for page in "$manuals"/*/*.1; do
  [ -f "$page" ] || continue
  name=$(basename "$page" .1)
  mkdir -p "$root/share/man/man1"
  # DESCRIPTION, ENVIRONMENT, FILES and EXAMPLES from deploy/man/NAME.mdoc.
  if [ -f "deploy/man/$name.mdoc" ]; then
    scripts/man-sections.sh "$page" "deploy/man/$name.mdoc" > "$root/share/man/man1/$name.1"
  else
    cp "$page" "$root/share/man/man1/$name.1"
  fi
  chmod 644 "$root/share/man/man1/$name.1"
  count=$((count + 1))
done
[ "$count" -ge 3 ] || { echo "install: expected 3 man pages in $manuals, found $count" >&2; exit 1; }

for unit in deploy/systemd/*.service; do
  mkdir -p "$root/lib/systemd/system"
  sed "s|/usr/local/|$PREFIX/|g" "$unit" > "$root/lib/systemd/system/$(basename "$unit")"
  chmod 644 "$root/lib/systemd/system/$(basename "$unit")"
done

# The package itself, for Swift plugins (`roombot new-plugin --lang swift`
# depends on it by path) and apps: sources and manifest, pinned versions.
package="$root/share/roomkit/package"
rm -rf "$package"
mkdir -p "$package"
cp -R Package.swift Package.resolved Sources Plugins Examples BuildTools "$package/"
mkdir -p "$package/Tests"
cp -R Tests/* "$package/Tests/"
chmod -R u=rwX,go=rX "$package"

for doc in README.md CHANGELOG.md LICENSE docs/*.md; do
  install -Dm644 "$doc" "$root/share/doc/roomkit/$doc"
done
echo "installed RoomKit $version into $root" >&2
