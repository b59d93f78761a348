#!/usr/bin/env bash
# `make test-browser`: roombot's dashboard in a real headless Chromium
# (scripts/browser_test.py says what it checks). Installs Debian's chromium
# and python3-websocket when missing; exits 77 ("skipped") when they cannot
# be installed, so CI can run it wherever Chromium installs.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v swift >/dev/null 2>&1; then
  for dir in /opt/swift/usr/bin /usr/share/swift/usr/bin; do
    [ -x "$dir/swift" ] && export PATH="$dir:$PATH"
  done
fi

PYTHON=/usr/bin/python3
if ! command -v chromium >/dev/null 2>&1 || ! "$PYTHON" -c 'import websocket' 2>/dev/null; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "installing chromium and python3-websocket (apt-get)" >&2
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
          --no-install-recommends chromium python3-websocket fonts-dejavu-core; } >&2; then
    echo "browser test skipped: chromium or python3-websocket could not be installed" >&2
    exit 77
  fi
fi

swift build >&2
exec "$PYTHON" scripts/browser_test.py "$(swift build --show-bin-path)"
