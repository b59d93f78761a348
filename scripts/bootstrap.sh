#!/usr/bin/env bash
# Installs what RoomKit needs on a fresh Debian/Ubuntu machine, idempotently:
# C libraries from apt (skipped when already installed) and the Swift build.
# Usage: scripts/bootstrap.sh [release|debug]   (default: debug)
set -euo pipefail

packages=(libuv1-dev libwebsockets-dev libwebsockets-evlib-uv libsqlite3-dev libssl-dev pkg-config openssl redis-server libhiredis-dev patchelf)
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

# Optional tools some tests use; a test that needs one is skipped only when it
# cannot be installed here. promtool (MetricsValidationTests) ships in
# Debian's prometheus package: installed without recommends and without
# starting its server (policy-rc.d refuses service starts for the install).
if ! command -v promtool >/dev/null 2>&1 && [ "${ROOMKIT_SKIP_OPTIONAL:-0}" != 1 ]; then
  sudo_cmd=""
  if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi
  echo "bootstrap: installing prometheus (for promtool), without starting it" >&2
  policy=/usr/sbin/policy-rc.d
  added_policy=0
  if [ ! -e "$policy" ] && $sudo_cmd sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod +x $policy" 2>/dev/null; then
    added_policy=1
  fi
  { $sudo_cmd apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends prometheus; } >&2 \
    || echo "bootstrap: prometheus could not be installed; the promtool test will be skipped" >&2
  [ "$added_policy" = 1 ] && $sudo_cmd rm -f "$policy"
fi

# stunnel4 (RedisTunnelTests: Redis over a TLS tunnel, docs/FLEET.md "TLS").
if ! command -v stunnel4 >/dev/null 2>&1 && [ "${ROOMKIT_SKIP_OPTIONAL:-0}" != 1 ]; then
  sudo_cmd=""
  if [ "$(id -u)" != 0 ]; then sudo_cmd="sudo"; fi
  echo "bootstrap: installing stunnel4 (for the Redis TLS tunnel test)" >&2
  { $sudo_cmd apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends stunnel4; } >&2 \
    || echo "bootstrap: stunnel4 could not be installed; the tunnel test will be skipped" >&2
fi

if ! command -v swift >/dev/null 2>&1; then
  for dir in /opt/swift/usr/bin /usr/share/swift/usr/bin; do
    [ -x "$dir/swift" ] && export PATH="$dir:$PATH"
  done
fi
command -v swift >/dev/null 2>&1 || { echo "bootstrap: no Swift toolchain on PATH (need Swift 6)" >&2; exit 1; }
