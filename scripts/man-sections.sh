#!/usr/bin/env bash
# Adds RoomKit's own sections to a man page swift-argument-parser generated
# (mdoc): the text before `.\" SECTIONS` in deploy/man/NAME.mdoc goes at the
# start of DESCRIPTION (made after SYNOPSIS when the page has none), the rest
# (ENVIRONMENT, FILES, EXAMPLES) before EXIT STATUS, or at the end.
# Usage: scripts/man-sections.sh PAGE.1 deploy/man/NAME.mdoc > OUT.1
set -euo pipefail
page=$1 extra=$2
[ -f "$extra" ] || { echo "man-sections: no $extra" >&2; exit 1; }
awk -v extra="$extra" '
  BEGIN {
    part = 0
    while ((getline line < extra) > 0) {
      if (line ~ /^\.\\" DESCRIPTION/) { part = 1; continue }
      if (line ~ /^\.\\" SECTIONS/) { part = 2; continue }
      if (part == 1) description = description line "\n"
      else if (part == 2) sections = sections line "\n"
    }
  }
  { header = toupper($0); gsub(/"/, "", header) }
  header ~ /^\.SH DESCRIPTION/ { print; printf "%s", description; print ".Pp"; described = 1; next }
  header ~ /^\.SH / && header !~ /^\.SH (NAME|SYNOPSIS)/ && !described { print ".Sh DESCRIPTION"; printf "%s", description; described = 1 }
  header ~ /^\.SH EXIT STATUS/ && !added { printf "%s", sections; added = 1 }
  { print }
  END {
    if (!described) { print ".Sh DESCRIPTION"; printf "%s", description }
    if (!added) printf "%s", sections
  }
' "$page"
