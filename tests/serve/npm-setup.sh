#!/bin/sh
# Installs the npm packages the server's node tests use, pinned, under the
# build folder (never globally): the official openai client, Anthropic's
# client (for /v1/messages), ajv (a JSON
# Schema validator, for constrained answers) and playwright-core (which drives Debian's /usr/bin/chromium; it downloads no
# browser).  Without node, npm or the registry it skips, saying so, and the
# node tests skip in turn.
dir="${OKV_BIN:?OKV_BIN not set}/npm"
OPENAI=openai@4.104.0
ANTHROPIC=@anthropic-ai/sdk@1.17.0
PLAYWRIGHT=playwright-core@1.65.1
AJV=ajv@8.20.0
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "skipped: node or npm not found (scripts/install-deps.sh installs them)"; exit 77
fi
have() { [ -f "$dir/node_modules/$1/package.json" ] && grep -q "\"version\": \"$2\"" "$dir/node_modules/$1/package.json"; }
if have openai 4.104.0 && have @anthropic-ai/sdk 1.17.0 && have playwright-core 1.65.1 && have ajv 8.20.0; then echo "npm packages present in $dir"; exit 0; fi
mkdir -p "$dir"
[ -f "$dir/package.json" ] || echo '{"name":"offkv-serve-tests","private":true}' > "$dir/package.json"
if ! PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$dir" --no-audit --no-fund --no-save --loglevel=error \
     "$OPENAI" "$ANTHROPIC" "$PLAYWRIGHT" "$AJV"; then
  echo "skipped: npm install of $OPENAI $ANTHROPIC $PLAYWRIGHT $AJV failed (no registry?)"; exit 77
fi
echo "installed $OPENAI $ANTHROPIC $PLAYWRIGHT $AJV in $dir"
