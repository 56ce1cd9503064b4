#!/usr/bin/env bash
# check-bicep-syntax.sh is the Bicep syntax gate run by .ci/run.
#
# It installs the pinned npm packages tree-sitter-bicep and web-tree-sitter
# into infra/bicep-syntax/node_modules (gitignored) when they are missing or
# stale, proves the gate can fail (node tests feed it broken Bicep), and then
# parses every .bicep file under infra/bicep, failing with file:line:col on any
# syntax error.
#
# This is a syntax check only. No Bicep compiler runs on this project's
# machines: types, symbols, API schemas and module parameters are NOT checked
# here (see infra/README.md, "What is and is not validated").
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tool="$here/bicep-syntax"
stamp="$tool/node_modules/.installed-from-lock"

# npm ci installs exactly what package-lock.json pins; --ignore-scripts skips
# tree-sitter-bicep's native build (the gate uses its bundled .wasm).
if ! cmp -s "$tool/package-lock.json" "$stamp" 2>/dev/null; then
  (cd "$tool" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  cp "$tool/package-lock.json" "$stamp"
fi

node --test "$tool/test/"
node "$tool/check.js" "$here/bicep"
