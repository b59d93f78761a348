#!/usr/bin/env bash
# The README's first command: builds everything (`swift build` also builds the
# shipped plugin libraries, next to the executables) and runs the example
# multi-room bot with an embedded roomd. Arguments pass through, e.g.
#   scripts/run.sh --quick | --forever | --server ws://HOST:PORT/v1/rooms --secret S
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v swift >/dev/null 2>&1; then
  for dir in /opt/swift/usr/bin /usr/share/swift/usr/bin; do
    [ -x "$dir/swift" ] && export PATH="$dir:$PATH"
  done
fi
swift build >&2
exec "$(swift build --show-bin-path)/multiroom-bot" "$@"
