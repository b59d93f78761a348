#!/usr/bin/env bash
# The README's first command. Until the example multi-room bot lands, this
# starts a local roomd on a free port with a throw-away data directory and
# prints a development token, so a client can connect at once.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --product roomd >&2
bin="$(swift build --show-bin-path)/roomd"
data="$(mktemp -d -t roomd-XXXXXX)"
secret="dev-secret"
trap 'rm -rf "$data"' EXIT
echo "roomd: data in $data (removed on exit); secret '$secret'" >&2
echo "token for user u1 in room lobby: $("$bin" token --secret "$secret" --user u1 --room lobby)" >&2
exec "$bin" serve --listen 127.0.0.1:0 --secret "$secret" --data "$data"
