#!/usr/bin/env bash
# Installs everything the tests and the demo need on a fresh Debian 12 machine (run as root):
# OS packages, node modules, and etcd + kube-apiserver (built with Go from
# test/harness/kube-bins, which pins Kubernetes v1.34.4 and etcd v3.6.4) and kustomize.
# Idempotent: a second run only checks. Binaries go to ${MULTUS_PROXY_BIN_DIR:-$HOME/.cache/multus-proxy/bin}
# and are rebuilt only when the helper module or the Go version changes (a stamp file records it).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
BIN_DIR=${MULTUS_PROXY_BIN_DIR:-$HOME/.cache/multus-proxy/bin}
KUSTOMIZE_VERSION=v5.7.1

step() { printf '\n==> %s\n' "$*"; }
die() { printf 'setup.sh: %s\n' "$*" >&2; exit 1; }

# --- OS packages -------------------------------------------------------------------------------
# iptables/nftables/conntrack/iproute2: the sidecar's rules and the network-namespace test hosts;
# libcap2-bin (capsh, setcap): least-privilege runs; openssl/curl/ca-certificates: certificates and
# probes; iputils-ping/netcat-openbsd: traffic checks between test hosts; procps/psmisc: process checks;
# wrk: the dataplane benchmark (bench/b4-dataplane.ts).
APT_PACKAGES=(iptables nftables conntrack iproute2 curl ca-certificates openssl libcap2-bin iputils-ping netcat-openbsd procps psmisc git wrk)
step "OS packages"
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]} > 0)); then
  command -v apt-get >/dev/null || die "apt-get not found; install by hand: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then command -v sudo >/dev/null || die "run as root to install: ${missing[*]}"; SUDO=sudo; fi
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "all present: ${APT_PACKAGES[*]}"
fi

# --- Node ---------------------------------------------------------------------------------------
step "Node.js and node modules"
command -v node >/dev/null || die "node (>= 20) not found; this machine kind ships it, or install Node.js 20"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 20 ] || die "node $(node --version) is too old; Node.js >= 20 is required"
echo "node $(node --version)"
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
else
  echo "node_modules up to date"
fi

# --- Go-built binaries ---------------------------------------------------------------------------
step "etcd, kube-apiserver and kustomize in $BIN_DIR"
# A non-login shell (CI) may lack the Go folder in PATH even where Go is installed.
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then export PATH="/usr/local/go/bin:$PATH"; fi
command -v go >/dev/null || die "go (>= 1.24) not found; this machine kind ships it, or install Go >= 1.24"
go_version=$(go env GOVERSION)
echo "$go_version"
mkdir -p "$BIN_DIR"
MOD_DIR="$ROOT/test/harness/kube-bins"

# kube-apiserver reports its version from these link-time variables (else "v0.0.0-master"), and
# programs that decide by server version (native sidecars need >= 1.29) must see the real one.
KUBE_VERSION=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$MOD_DIR/go.mod")
kube_minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
VERSION_LDFLAGS="-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$kube_minor -X k8s.io/component-base/version.gitTreeState=clean"
# The stamp covers everything that changes the binaries: the pinned module, Go and the flags.
stamp_value=$( (cat "$MOD_DIR/go.mod" "$MOD_DIR/go.sum"; echo "$go_version $VERSION_LDFLAGS") | sha256sum | cut -d' ' -f1)
STAMP="$BIN_DIR/.kube-bins.stamp"

build() { # name package [extra ldflags]
  local name=$1 pkg=$2 extra=${3:-} t0=$SECONDS
  echo "building $name ($pkg): the first build downloads modules and compiles for several minutes ..."
  (cd "$MOD_DIR" && go build -trimpath -ldflags="-s -w $extra" -o "$BIN_DIR/$name.tmp" "$pkg")
  mv "$BIN_DIR/$name.tmp" "$BIN_DIR/$name"
  echo "built $name in $((SECONDS - t0)) s"
}

if [ -x "$BIN_DIR/etcd" ] && [ -x "$BIN_DIR/kube-apiserver" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$stamp_value" ]; then
  echo "etcd and kube-apiserver are current (stamp $STAMP)"
else
  rm -f "$STAMP"
  build etcd go.etcd.io/etcd/server/v3
  build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$VERSION_LDFLAGS"
  echo "$stamp_value" > "$STAMP"
fi
# Captured, not piped into head: under pipefail a closed pipe would fail the script.
etcd_version=$("$BIN_DIR/etcd" --version)
echo "${etcd_version%%$'\n'*}"
"$BIN_DIR/kube-apiserver" --version

KSTAMP="$BIN_DIR/.kustomize.stamp"
if [ -x "$BIN_DIR/kustomize" ] && [ "$(cat "$KSTAMP" 2>/dev/null)" = "$KUSTOMIZE_VERSION $go_version" ]; then
  echo "kustomize $KUSTOMIZE_VERSION is current"
else
  echo "installing kustomize $KUSTOMIZE_VERSION with go install (a minute or two) ..."
  GOBIN="$BIN_DIR" go install "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
  echo "$KUSTOMIZE_VERSION $go_version" > "$KSTAMP"
fi
"$BIN_DIR/kustomize" version

step "setup complete (binaries in $BIN_DIR)"
