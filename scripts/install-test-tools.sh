#!/usr/bin/env bash
# Installs the emulators the default test run starts, pinned, when they are missing:
# moto (AWS APIs) from PyPI and Azurite (Azure Tables and Queues) from npm, into .ssfkit/tools,
# and Terraform, built from the Go module proxy (no other download site is reachable here).
# The AWS Terraform provider comes from the mirror in /opt/tf-plugins when the machine has one,
# else from the registry, on first use (internal/tftest). The Google and AzureRM providers,
# which no mirror here holds and whose registry is unreachable, are built from the Go module
# proxy into the project's own mirror, .ssfkit/tf-mirror, once per machine.
# Apache ZooKeeper (server and client jars, from Maven Central with mvn) and kazoo (PyPI), the
# reference server and the real clients the coordination service is tested with, and DuckDB
# (PyPI), the real reader of the provenance sink's Parquet objects; Debian's Chromium, the
# headless browser the console is tested in.
# The Firestore emulator comes with the Google Cloud CLI, which no registry serves: its absence
# is reported here and fails the tests that need it.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=.ssfkit/tools
MOTO_VERSION=5.2.1
AZURITE_VERSION=3.37.0
TERRAFORM_VERSION=1.11.4
ZOOKEEPER_VERSION=3.9.5 # internal/testservers.ZooKeeperVersion
KAZOO_VERSION=2.10.0
DUCKDB_VERSION=2.0.0
# Terraform's go.mod replaces its internal sub-modules with local paths, which `go install`
# refuses; a wrapper module requiring them at this commit's pseudo-version builds it.
TERRAFORM_SUBMODULES_VERSION=v0.0.0-20250409131005-35645b8fca68

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

zookeeper=$tools/zookeeper
if [ ! -f "$zookeeper/lib/zookeeper-$ZOOKEEPER_VERSION.jar" ]; then
  command -v mvn >/dev/null 2>&1 && command -v java >/dev/null 2>&1 ||
    { echo "mvn and java are needed to install Apache ZooKeeper (Debian: apt-get install maven default-jdk-headless)" >&2; exit 1; }
  echo "installing Apache ZooKeeper $ZOOKEEPER_VERSION from Maven Central into $zookeeper/lib"
  pom=$(mktemp -d)
  # The server's metrics, logging, compression and command-line parsing are "provided" in its
  # POM: the distribution ships them, so they are named here.
  cat >"$pom/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.ssfkit</groupId><artifactId>zookeeper-tools</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.zookeeper</groupId><artifactId>zookeeper</artifactId><version>$ZOOKEEPER_VERSION</version></dependency>
    <dependency><groupId>io.dropwizard.metrics</groupId><artifactId>metrics-core</artifactId><version>4.2.40</version></dependency>
    <dependency><groupId>org.xerial.snappy</groupId><artifactId>snappy-java</artifactId><version>1.1.10.12</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>2.0.13</version></dependency>
    <dependency><groupId>commons-cli</groupId><artifactId>commons-cli</artifactId><version>1.5.0</version></dependency>
  </dependencies>
</project>
POM
  rm -rf "$zookeeper"
  mkdir -p "$zookeeper"
  lib=$(cd "$zookeeper" && pwd)/lib
  (cd "$pom" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies -DoutputDirectory="$lib" -DincludeScope=runtime)
  rm -rf "$pom"
fi

if [ ! -x "$tools/kazoo/bin/python" ] || ! "$tools/kazoo/bin/python" -c "import kazoo" 2>/dev/null; then
  echo "installing kazoo==$KAZOO_VERSION into $tools/kazoo"
  python3 -m venv "$tools/kazoo"
  "$tools/kazoo/bin/pip" install --quiet "kazoo==$KAZOO_VERSION"
fi

if [ ! -x "$tools/duckdb/bin/python" ] || ! "$tools/duckdb/bin/python" -c "import duckdb" 2>/dev/null; then
  echo "installing duckdb==$DUCKDB_VERSION into $tools/duckdb (reads the provenance sink's Parquet objects in tests)"
  python3 -m venv "$tools/duckdb"
  "$tools/duckdb/bin/pip" install --quiet "duckdb==$DUCKDB_VERSION"
fi

if ! command -v chromium >/dev/null 2>&1; then
  echo "installing Debian's chromium (the headless browser the console's tests drive)"
  if [ "$(id -u)" = 0 ]; then
    apt-get install -y -q chromium >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }
  else
    sudo apt-get install -y -q chromium >/dev/null
  fi
fi

if ! command -v gcloud >/dev/null 2>&1 || ! command -v java >/dev/null 2>&1; then
  echo "WARNING: the Firestore emulator needs the Google Cloud CLI (component cloud-firestore-emulator) and Java;" >&2
  echo "         the Firestore tests will fail until both are installed." >&2
fi

if ! command -v terraform >/dev/null 2>&1 && [ ! -x "$tools/bin/terraform" ]; then
  echo "building terraform $TERRAFORM_VERSION from the Go module proxy into $tools/bin (3-4 minutes)"
  wrapper=$(mktemp -d)
  trap 'rm -rf "$wrapper"' EXIT
  {
    echo "module ssfkit.local/terraform-build"
    echo "go 1.24"
    echo "require github.com/hashicorp/terraform v$TERRAFORM_VERSION"
    for m in azure consul cos gcs kubernetes oss pg s3; do
      echo "require github.com/hashicorp/terraform/internal/backend/remote-state/$m $TERRAFORM_SUBMODULES_VERSION"
    done
    echo "require github.com/hashicorp/terraform/internal/legacy $TERRAFORM_SUBMODULES_VERSION"
  } >"$wrapper/go.mod"
  mkdir -p "$tools/bin"
  bin=$(cd "$tools/bin" && pwd)
  # dev=no: a release build, not "-dev", which version constraints would treat as a prerelease.
  (cd "$wrapper" && GOFLAGS=-mod=mod go build -ldflags "-X github.com/hashicorp/terraform/version.dev=no" -o "$bin/terraform" github.com/hashicorp/terraform)
fi

# build_provider NAME MODULE PSEUDO_VERSION VERSION VERSION_VAR builds a Terraform provider
# from the Go module proxy into .ssfkit/tf-mirror in the mirror layout Terraform reads, as
# release VERSION: the proxy refuses the providers' release tags but serves the commits just
# after them (TOOLCHAIN.md). Each is a large build (~2 GB of compiler memory, 10+ minutes).
mirror=.ssfkit/tf-mirror/registry.terraform.io/hashicorp
build_provider() {
  local name=$1 module=$2 pseudo=$3 version=$4 version_var=$5
  local dir="$mirror/$name/$version/linux_amd64"
  local bin="$dir/terraform-provider-${name}_v${version}_x5"
  [ -x "$bin" ] && return 0
  echo "building the Terraform $name provider $version from the Go module proxy into $dir (10+ minutes)"
  mkdir -p "$dir"
  local gobin
  gobin=$(mktemp -d)
  GOBIN="$gobin" GOFLAGS=-mod=mod go install -ldflags "-s -w -X $module/$version_var=$version" "$module@$pseudo"
  mv "$gobin/$(basename "$module")" "$bin"
  rm -rf "$gobin"
}
build_provider google github.com/hashicorp/terraform-provider-google \
  v1.20.1-0.20260828184646-f3721fb45fa3 8.0.0 version.ProviderVersion
build_provider azurerm github.com/hashicorp/terraform-provider-azurerm \
  v1.44.1-0.20260824201233-fae580791926 5.2.0 version.ProviderVersion
