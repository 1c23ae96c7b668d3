#!/bin/sh
# Runs one of the server's node tests; skips (exit 77), saying so, without node.
command -v node >/dev/null 2>&1 || { echo "skipped: node not found (scripts/install-deps.sh installs it)"; exit 77; }
exec node "$@"
