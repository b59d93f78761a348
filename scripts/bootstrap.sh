#!/usr/bin/env bash
# Installs what RoomKit needs on a fresh Debian/Ubuntu machine, idempotently:
# C libraries from apt (skipped when already installed) and the Swift build.
# Usage: scripts/bootstrap.sh [release|debug]   (default: debug)
set -euo pipefail

packages=(libuv1-dev libwebsockets-dev libwebsockets-evlib-uv libsqlite3-dev libssl-dev pkg-config openssl redis-server libhiredis-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}" >&2
  sudo_cmd=""
  if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >&2
fi

if ! command -v swift >/dev/null 2>&1; then
  for dir in /opt/swift/usr/bin /usr/share/swift/usr/bin; do
    [ -x "$dir/swift" ] && export PATH="$dir:$PATH"
  done
fi
command -v swift >/dev/null 2>&1 || { echo "bootstrap: no Swift toolchain on PATH (need Swift 6)" >&2; exit 1; }
