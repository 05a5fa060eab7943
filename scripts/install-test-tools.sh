#!/usr/bin/env bash
# Installs the emulators the default test run starts, pinned, when they are missing:
# moto (AWS APIs) from PyPI and Azurite (Azure Tables and Queues) from npm, into .ssfkit/tools.
# The Firestore emulator comes with the Google Cloud CLI, which no registry serves: its absence
# is reported here and fails the tests that need it.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=.ssfkit/tools
MOTO_VERSION=5.2.1
AZURITE_VERSION=3.37.0

if ! command -v moto_server >/dev/null 2>&1 && [ ! -x "$tools/bin/moto_server" ]; then
  echo "installing moto[server]==$MOTO_VERSION into $tools/venv"
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/pip" install --quiet "moto[server]==$MOTO_VERSION"
  mkdir -p "$tools/bin"
  ln -sf "../venv/bin/moto_server" "$tools/bin/moto_server"
fi

if ! command -v azurite-table >/dev/null 2>&1 && [ ! -x "$tools/node_modules/.bin/azurite-table" ]; then
  command -v npm >/dev/null 2>&1 || { echo "npm is needed to install Azurite (Debian: apt-get install npm)" >&2; exit 1; }
  echo "installing azurite@$AZURITE_VERSION into $tools"
  mkdir -p "$tools"
  npm install --no-audit --no-fund --loglevel=error --prefix "$tools" "azurite@$AZURITE_VERSION"
fi

if ! command -v gcloud >/dev/null 2>&1 || ! command -v java >/dev/null 2>&1; then
  echo "WARNING: the Firestore emulator needs the Google Cloud CLI (component cloud-firestore-emulator) and Java;" >&2
  echo "         the Firestore tests will fail until both are installed." >&2
fi
