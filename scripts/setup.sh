#!/usr/bin/env bash
# Installs everything the tests and the demo need on a fresh Debian 12 machine (run as root):
# OS packages, node modules, the Kubernetes binaries of a real single node, the CNI plugins, the
# CRDs those plugins and cert-manager need, and container images (the project's own among them).
# Idempotent: every build is cached behind a stamp file recording what it was built from (module
# versions, Go version, flags, or the hash of an image's sources), so a second run only checks.
#
# Output contract (test/harness reads exactly these paths; keep them stable):
#   BIN_DIR=${MULTUS_PROXY_BIN_DIR:-$HOME/.cache/multus-proxy/bin}
#     etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl
#         Kubernetes v1.34.4 (they all report it) and etcd v3.6.4, from test/harness/kube-bins
#     crictl (cri-tools v1.34.0)  coredns (v1.13.1)  kustomize (v5.7.1)
#     cert-manager-controller cert-manager-cainjector cert-manager-webhook (cert-manager v1.11.5)
#     helm (v3.22.0)
#     metallb-controller metallb-speaker (MetalLB v0.15.2, static: they run in the images below)
#     nfnl-batch (native/nfnl-batch.c, static; scripts/build-native.sh)
#   $BIN_DIR/../cni-bin/    Debian's CNI plugins (copied from /usr/lib/cni), multus (the thin
#                           plugin, multus-cni v4.2.4) and whereabouts (v0.9.2)
#   $BIN_DIR/../manifests/  nad-crd.yaml (NetworkAttachmentDefinition CRD), whereabouts-crds.yaml,
#                           cert-manager-crds.yaml (Helm template lines stripped),
#                           metallb-native.yaml (MetalLB's own install manifest: CRDs, RBAC, webhook)
#   $BIN_DIR/../images/     docker-archive tars and images.json: [{"file": "<x>.tar", "name": "<ref>"}]
#                           with upstream names: registry.k8s.io/pause:3.10.1,
#                           ghcr.io/redhat-nfvpe/multus-service-demo:fedora-nginx and :fedora-tools
#                           (Debian stand-ins), docker.io/library/multus-proxy:0.1.0 (the project's
#                           image, rebuilt whenever its sources change),
#                           quay.io/metallb/controller:v0.15.2 and quay.io/metallb/speaker:v0.15.2
#                           (the binaries above on an empty base, as upstream's distroless one)
#   $BIN_DIR/../buildah/    buildah's private storage (never the host's default one)
#   $BIN_DIR/../src/        writable copies of the Go modules built outside test/harness/kube-bins
set -euo pipefail

# Target: `demo` builds only what `npm run demo` needs (etcd and kube-apiserver, in one `go build`,
# and the demo's OS packages); no argument or `test` builds everything, as `npm test` needs.
TARGET=${1:-test}
case $TARGET in demo | test) ;; *) printf 'setup.sh: unknown target %s; use demo or test (the default)\n' "$TARGET" >&2; exit 2 ;; esac

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
# The real node: containerd, runc, the CNI plugins and docker-registry (the local registry that
# serves images under their upstream names); buildah and debootstrap build the images without a
# daemon or a registry; gcc and libc6-dev compile the static pause binary and nfnl-batch.
# prometheus: its promtool checks the chart's rules and dashboard, and its server scrapes the real
# node's components in the monitoring test (the package's own service is disabled below).
APT_PACKAGES=(iptables nftables conntrack iproute2 curl ca-certificates openssl libcap2-bin iputils-ping netcat-openbsd procps psmisc git wrk
  containerd runc containernetworking-plugins docker-registry buildah debootstrap gcc libc6-dev prometheus)
# The demo needs only its network-namespace tools; the real node's packages are for `test`.
[ "$TARGET" = demo ] && APT_PACKAGES=(iptables nftables conntrack iproute2 curl ca-certificates openssl libcap2-bin iputils-ping netcat-openbsd procps psmisc git)
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
  # Tests start their own Prometheus; the package's service would listen on the host's :9090.
  if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null; then $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true; fi
else
  echo "all present: ${APT_PACKAGES[*]}"
fi

# --- Node ---------------------------------------------------------------------------------------
step "Node.js and node modules"
command -v node >/dev/null || die "node (>= 20) not found; this machine kind ships it, or install Node.js 20"
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 20 ] || die "node $(node --version) is too old; Node.js >= 20 is required"
echo "node $(node --version)"
if [ -L node_modules ]; then
  # A git worktree sharing another checkout's modules: `npm ci` here would empty that folder
  # through the link. Whoever owns it installs them.
  echo "node_modules links to $(readlink -f node_modules); not reinstalled here"
elif [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
else
  echo "node_modules up to date"
fi

# --- Go-built binaries ---------------------------------------------------------------------------
step "Go and the Go-built binaries in $BIN_DIR"
# A non-login shell (CI) may lack the Go folder in PATH even where Go is installed.
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then export PATH="/usr/local/go/bin:$PATH"; fi
command -v go >/dev/null || die "go (>= 1.24) not found; this machine kind ships it, or install Go >= 1.24"
go_version=$(go env GOVERSION)
echo "$go_version"
mkdir -p "$BIN_DIR"
CACHE_DIR=$(cd "$BIN_DIR/.." && pwd)
CNI_DIR=$CACHE_DIR/cni-bin
MANIFEST_DIR=$CACHE_DIR/manifests
IMAGE_DIR=$CACHE_DIR/images
SRC_DIR=$CACHE_DIR/src
mkdir -p "$CNI_DIR" "$MANIFEST_DIR" "$IMAGE_DIR" "$SRC_DIR"
MOD_DIR="$ROOT/test/harness/kube-bins"

# current <stamp file> <value> <output>...: true when the stamp holds value and every output exists.
current() {
  local stamp=$1 value=$2
  shift 2
  [ "$(cat "$stamp" 2>/dev/null)" = "$value" ] || return 1
  local f
  for f in "$@"; do [ -e "$f" ] || return 1; done
}

# Every Kubernetes binary reports its version from these link-time variables (else
# "v0.0.0-master"), and programs that decide by server version (native sidecars need >= 1.29)
# must see the real one.
KUBE_VERSION=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$MOD_DIR/go.mod")
kube_minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
VERSION_LDFLAGS="-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$kube_minor -X k8s.io/component-base/version.gitTreeState=clean"
KUBE_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
# The stamp covers everything that changes the binaries: the pinned module, Go and the flags.
stamp_value=$( (cat "$MOD_DIR/go.mod" "$MOD_DIR/go.sum"; echo "$go_version $VERSION_LDFLAGS ${KUBE_CMDS[*]}") | sha256sum | cut -d' ' -f1)
STAMP="$BIN_DIR/.kube-bins.stamp"

if [ "$TARGET" = demo ]; then
  DSTAMP="$BIN_DIR/.demo-bins.stamp"
  demo_value=$( (cat "$MOD_DIR/go.mod" "$MOD_DIR/go.sum"; echo "$go_version $VERSION_LDFLAGS demo") | sha256sum | cut -d' ' -f1)
  if current "$STAMP" "$stamp_value" "$BIN_DIR/etcd" "$BIN_DIR/kube-apiserver" || current "$DSTAMP" "$demo_value" "$BIN_DIR/etcd" "$BIN_DIR/kube-apiserver"; then
    echo "etcd and kube-apiserver are current"
  else
    # One `go build` for both: they share most of their packages (etcd's client and server,
    # gRPC, protobuf), so those compile once. The version flags only touch Kubernetes' packages.
    echo "building etcd and kube-apiserver (Kubernetes $KUBE_VERSION): the first build compiles for several minutes on 2 cores ..."
    t0=$SECONDS
    rm -rf "$BIN_DIR/.demo-build"
    (cd "$MOD_DIR" && go build -trimpath -ldflags="-s -w $VERSION_LDFLAGS" -o "$BIN_DIR/.demo-build/" go.etcd.io/etcd/server/v3 k8s.io/kubernetes/cmd/kube-apiserver)
    mv "$BIN_DIR/.demo-build/kube-apiserver" "$BIN_DIR/kube-apiserver"
    mv "$BIN_DIR/.demo-build/server" "$BIN_DIR/etcd" # go names a /v3 module's binary after the element before
    rmdir "$BIN_DIR/.demo-build"
    echo "built etcd and kube-apiserver in $((SECONDS - t0)) s"
    echo "$demo_value" > "$DSTAMP"
  fi
  "$BIN_DIR/etcd" --version | head -1 || true
  "$BIN_DIR/kube-apiserver" --version
  step "setup complete for the demo (binaries in $BIN_DIR); run: npm run demo"
  exit 0
fi

# Lane "kubernetes": etcd, the Kubernetes commands and kustomize (run as a job below).
build_kubernetes() {
  local t0 cmd etcd_version v kstamp="$BIN_DIR/.kustomize.stamp"
  if current "$STAMP" "$stamp_value" "$BIN_DIR/etcd" "${KUBE_CMDS[@]/#/$BIN_DIR/}"; then
    echo "etcd and ${KUBE_CMDS[*]} are current (stamp $STAMP)"
  else
    rm -f "$STAMP"
    # One `go build` for etcd and every Kubernetes command: their shared packages (etcd's client,
    # gRPC, protobuf, the apiserver libraries) compile once, and one binary links while the next
    # compiles, where separate builds would link one after another. The version flags only touch
    # Kubernetes' packages.
    echo "building etcd ${KUBE_CMDS[*]} (Kubernetes $KUBE_VERSION): the first build downloads modules and compiles for many minutes ..."
    t0=$SECONDS
    rm -rf "$BIN_DIR/.kube-build"
    (cd "$MOD_DIR" && go build -trimpath -ldflags="-s -w $VERSION_LDFLAGS" -o "$BIN_DIR/.kube-build/" go.etcd.io/etcd/server/v3 "${KUBE_CMDS[@]/#/k8s.io/kubernetes/cmd/}")
    mv "$BIN_DIR/.kube-build/server" "$BIN_DIR/etcd" # go names a /v3 module's binary after the element before
    for cmd in "${KUBE_CMDS[@]}"; do mv "$BIN_DIR/.kube-build/$cmd" "$BIN_DIR/$cmd"; done
    rmdir "$BIN_DIR/.kube-build"
    echo "built etcd ${KUBE_CMDS[*]} in $((SECONDS - t0)) s"
    echo "$stamp_value" > "$STAMP"
  fi
  # Captured, not piped into head: under pipefail a closed pipe would fail the script.
  etcd_version=$("$BIN_DIR/etcd" --version)
  echo "${etcd_version%%$'\n'*}"
  for cmd in "${KUBE_CMDS[@]}"; do
    case $cmd in
      kubectl) v=$("$BIN_DIR/kubectl" version --client 2>&1) ;;
      *) v=$("$BIN_DIR/$cmd" --version 2>&1) ;;
    esac
    v=${v%%$'\n'*}
    [[ $v == *"$KUBE_VERSION"* ]] || die "$BIN_DIR/$cmd reports '$v', not $KUBE_VERSION: delete $STAMP and run setup.sh again"
    echo "$cmd: $v"
  done

  if current "$kstamp" "$KUSTOMIZE_VERSION $go_version" "$BIN_DIR/kustomize"; then
    echo "kustomize $KUSTOMIZE_VERSION is current"
  else
    echo "installing kustomize $KUSTOMIZE_VERSION with go install (a minute or two) ..."
    t0=$SECONDS
    GOBIN="$BIN_DIR" go install -trimpath -ldflags="-s -w" "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
    echo "built kustomize in $((SECONDS - t0)) s"
    echo "$KUSTOMIZE_VERSION $go_version" > "$kstamp"
  fi
  "$BIN_DIR/kustomize" version
}

# --- Go modules built from a copy of their source ---------------------------------------------
# `go install mod@version` does not work for these: the module proxy refuses some version lists
# and checksum lookups (hence GONOSUMDB for some), and modules with `replace` directives cannot be
# installed. So each is downloaded with `go mod download`, copied writable and built in place with
# -mod=mod. Versions: see docs/node-harness.md and docs/decisions/0042-image-and-build.md.
MULTUS_MOD=gopkg.in/k8snetworkplumbingwg/multus-cni.v4@v4.2.4
WHEREABOUTS_MOD=github.com/k8snetworkplumbingwg/whereabouts@v0.9.2
CRITOOLS_MOD=sigs.k8s.io/cri-tools@v1.34.0
COREDNS_MOD=github.com/coredns/coredns@v1.13.1
CERT_MANAGER_MOD=github.com/cert-manager/cert-manager@v1.11.5
HELM_MOD=helm.sh/helm/v3@v3.22.0
# v0.16.2 does not build here: the module proxy refuses its dependency github.com/metallb/frr-k8s
# v0.0.27 (403 "not available"); v0.15.2 (frr-k8s v0.0.20) does (docs/decisions/0042-image-and-build.md).
METALLB_MOD=go.universe.tf/metallb@v0.15.2

module_src() { # module@version [VAR=value ...]: prints a fresh writable copy of the module's source
  local mod=$1 dir dst
  shift
  dst="$SRC_DIR/${mod//\//_}"
  dir=$(cd "$SRC_DIR" && env "$@" GOFLAGS=-mod=mod go mod download -json "$mod" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -d "$dir" ] || die "go mod download $mod gave no source directory"
  rm -rf "$dst"
  cp -r "$dir" "$dst"
  chmod -R u+w "$dst"
  echo "$dst"
}

gobuild() { # source-dir output package [VAR=value ...]
  local dir=$1 out=$2 pkg=$3 t0=$SECONDS
  shift 3
  echo "building $(basename "$out") ($pkg) ..."
  (cd "$dir" && env "$@" GOFLAGS=-mod=mod go build -trimpath -ldflags="-s -w" -o "$out.tmp" "$pkg")
  mv "$out.tmp" "$out"
  echo "built $(basename "$out") in $((SECONDS - t0)) s"
}

# module <name> <module@version> <outputs...> -- <commands>: runs the commands (with $src, a
# copy of the module's source) unless the stamp says the outputs are from this module and Go.
module() {
  local name=$1 mod=$2 stamp="$CACHE_DIR/.$1.stamp"
  shift 2
  local outputs=()
  while [ "$1" != -- ]; do outputs+=("$1"); shift; done
  shift
  if current "$stamp" "$mod $go_version" "${outputs[@]}"; then
    echo "$name ($mod) is current"
    return
  fi
  rm -f "$stamp"
  "$@"
  echo "$mod $go_version" > "$stamp"
  rm -rf "$SRC_DIR/${mod//\//_}"
}

build_crictl() {
  local src
  src=$(module_src "$CRITOOLS_MOD" GONOSUMDB=sigs.k8s.io/cri-tools)
  gobuild "$src" "$BIN_DIR/crictl" ./cmd/crictl GONOSUMDB=sigs.k8s.io/cri-tools
}

build_coredns() {
  local src
  src=$(module_src "$COREDNS_MOD")
  gobuild "$src" "$BIN_DIR/coredns" .
}

build_multus() {
  local src
  src=$(module_src "$MULTUS_MOD")
  gobuild "$src" "$CNI_DIR/multus" ./cmd/multus
  # The one CustomResourceDefinition document of Multus' own install manifest.
  awk 'BEGIN { RS = "\n---\n" } /\nkind: CustomResourceDefinition\n/ { print "---"; print }' \
    "$src/deployments/multus-daemonset.yml" > "$MANIFEST_DIR/nad-crd.yaml"
  grep -q 'name: network-attachment-definitions.k8s.cni.cncf.io' "$MANIFEST_DIR/nad-crd.yaml" \
    || die "no NetworkAttachmentDefinition CRD found in $MULTUS_MOD deployments/multus-daemonset.yml"
}

build_whereabouts() {
  local src
  src=$(module_src "$WHEREABOUTS_MOD" GONOSUMDB=github.com/k8snetworkplumbingwg/whereabouts)
  # The module zip holds a partial vendor/ that -mod=mod would trip over.
  rm -rf "$src/vendor"
  gobuild "$src" "$CNI_DIR/whereabouts" ./cmd GONOSUMDB=github.com/k8snetworkplumbingwg/whereabouts
  local f out="$MANIFEST_DIR/whereabouts-crds.yaml.tmp"
  : > "$out"
  for f in "$src"/doc/crds/whereabouts.cni.cncf.io_*.yaml; do
    grep -q '^---' "$f" || echo '---' >> "$out"
    cat "$f" >> "$out"
  done
  mv "$out" "$MANIFEST_DIR/whereabouts-crds.yaml"
}

build_cert_manager() {
  local src c t0=$SECONDS
  src=$(module_src "$CERT_MANAGER_MOD")
  # One `go build` for the three: they share most packages, and one links while the next compiles.
  echo "building cert-manager-controller, -cainjector and -webhook ($CERT_MANAGER_MOD) ..."
  rm -rf "$BIN_DIR/.cert-manager-build"
  (cd "$src" && GOFLAGS=-mod=mod go build -trimpath -ldflags="-s -w" -o "$BIN_DIR/.cert-manager-build/" ./cmd/controller ./cmd/cainjector ./cmd/webhook)
  for c in controller cainjector webhook; do mv "$BIN_DIR/.cert-manager-build/$c" "$BIN_DIR/cert-manager-$c"; done
  rmdir "$BIN_DIR/.cert-manager-build"
  echo "built cert-manager-controller, -cainjector and -webhook in $((SECONDS - t0)) s"
  # The CRDs carry Helm template expressions in their labels: give them the values the static
  # install manifest has, and drop the include line.
  local f out="$MANIFEST_DIR/cert-manager-crds.yaml.tmp"
  : > "$out"
  for f in "$src"/deploy/crds/crd-*.yaml; do
    echo '---' >> "$out"
    sed -e "s/'{{ template \"cert-manager.name\" . }}'/cert-manager/" -e "s/'{{ .Release.Name }}'/cert-manager/" \
      -e '/{{/d' "$f" >> "$out"
  done
  mv "$out" "$MANIFEST_DIR/cert-manager-crds.yaml"
}

# helm: the chart's lint, golden renders and its life on the real node (deploy/helm/multus-proxy).
build_helm() {
  local src
  src=$(module_src "$HELM_MOD")
  gobuild "$src" "$BIN_DIR/helm" ./cmd/helm
}

# MetalLB: the load-balancer implementation beside the node agent's LoadBalancer support in the
# real-node tests (test/node/metallb.ts). Static (CGO_ENABLED=0, as upstream's Dockerfiles) so the
# images need no libc; one `go build` for both, as they share most packages.
build_metallb() {
  local src t0=$SECONDS
  src=$(module_src "$METALLB_MOD")
  echo "building metallb-controller and metallb-speaker ($METALLB_MOD) ..."
  rm -rf "$BIN_DIR/.metallb-build"
  (cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags="-s -w" -o "$BIN_DIR/.metallb-build/" ./controller ./speaker)
  mv "$BIN_DIR/.metallb-build/controller" "$BIN_DIR/metallb-controller"
  mv "$BIN_DIR/.metallb-build/speaker" "$BIN_DIR/metallb-speaker"
  rmdir "$BIN_DIR/.metallb-build"
  echo "built metallb-controller and metallb-speaker in $((SECONDS - t0)) s"
  # Its own install manifest, unchanged: CRDs, the least-privilege RBAC and securityContexts, the
  # webhook. The images it names are built by build-images.sh under those names.
  cp "$src/config/manifests/metallb-native.yaml" "$MANIFEST_DIR/metallb-native.yaml"
  grep -q "image: quay.io/metallb/speaker:${METALLB_MOD#*@}" "$MANIFEST_DIR/metallb-native.yaml" \
    || die "$METALLB_MOD config/manifests/metallb-native.yaml does not name quay.io/metallb/speaker:${METALLB_MOD#*@}"
}

# --- Jobs side by side ---------------------------------------------------------------------------
# On an empty cache the Go builds are most of setup's time, yet one `go build` keeps both cores busy
# only part of its time (module downloads, the narrow end of each package graph, the link), and the
# images that need none of their outputs mostly wait on the network (debootstrap, apt, npm). So two
# lanes of Go builds and the images run at once. (Not niced: niced, the images crawled behind the
# builds and could end after them, where at equal priority they end first and the total work is
# the same.)
# Each job's lines are prefixed with its name; the first job that fails stops the others and fails
# setup.sh, naming it.
lane_kubernetes() {
  build_kubernetes
  module whereabouts "$WHEREABOUTS_MOD" "$CNI_DIR/whereabouts" "$MANIFEST_DIR/whereabouts-crds.yaml" -- build_whereabouts
  module multus "$MULTUS_MOD" "$CNI_DIR/multus" "$MANIFEST_DIR/nad-crd.yaml" -- build_multus
}
lane_modules() {
  module coredns "$COREDNS_MOD" "$BIN_DIR/coredns" -- build_coredns
  module cert-manager "$CERT_MANAGER_MOD" "$BIN_DIR/cert-manager-controller" "$BIN_DIR/cert-manager-cainjector" \
    "$BIN_DIR/cert-manager-webhook" "$MANIFEST_DIR/cert-manager-crds.yaml" -- build_cert_manager
  module helm "$HELM_MOD" "$BIN_DIR/helm" -- build_helm
  "$BIN_DIR/helm" version --short
  module crictl "$CRITOOLS_MOD" "$BIN_DIR/crictl" -- build_crictl
  module metallb "$METALLB_MOD" "$BIN_DIR/metallb-controller" "$BIN_DIR/metallb-speaker" "$MANIFEST_DIR/metallb-native.yaml" -- build_metallb
}

declare -A JOB_NAME=() JOB_START=() # by pid
start_job() { # name command...: runs the command in the background, each output line prefixed "[name] "
  local name=$1
  shift
  { "$@" 2>&1 | sed -u "s/^/[$name] /"; } &
  JOB_NAME[$!]=$name
  JOB_START[$!]=$SECONDS
}
process_tree() { # pid: the pid and its descendants
  local c
  echo "$1"
  for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do process_tree "$c"; done
}
stop_jobs() {
  local pid pids=()
  for pid in "${!JOB_NAME[@]}"; do mapfile -t -O "${#pids[@]}" pids < <(process_tree "$pid"); done
  if ((${#pids[@]} > 0)); then kill "${pids[@]}" 2>/dev/null || true; fi
  JOB_NAME=()
}
trap stop_jobs EXIT
wait_jobs() { # waits for every job; the first failure stops the others and fails setup.sh
  local pid rc name
  while ((${#JOB_NAME[@]} > 0)); do
    rc=0
    wait -n -p pid "${!JOB_NAME[@]}" || rc=$?
    name=${JOB_NAME[$pid]}
    unset "JOB_NAME[$pid]"
    ((rc == 0)) || { stop_jobs; die "$name failed (exit $rc): see its [$name] lines above"; }
    echo "[$name] done in $((SECONDS - JOB_START[$pid])) s"
  done
}

step "Go builds (lanes kubernetes and modules) beside the images that need none of them (lane images)"
start_job images bash "$ROOT/scripts/build-images.sh" base
start_job kubernetes lane_kubernetes
start_job modules lane_modules
wait_jobs

# promtool: checks the chart's PrometheusRule and dashboard queries and runs each alert on
# synthetic series (test/deploy/monitoring.test.ts). Debian's prometheus package has it (seconds,
# where building it from the Go module took about 9 minutes of CPU on an empty cache).
command -v promtool >/dev/null || die "promtool not found: install Debian's prometheus package"
ln -sf "$(command -v promtool)" "$BIN_DIR/promtool"
"$BIN_DIR/promtool" --version | head -1

# containerd 1.6 and Multus look for every plugin in one directory.
cp -a /usr/lib/cni/. "$CNI_DIR/"
echo "CNI plugins in $CNI_DIR: $(ls "$CNI_DIR" | tr '\n' ' ')"

# --- The native helper ----------------------------------------------------------------------------
# nfnl-batch: the nftables element writer's batch sender (static C, gcc and libc6-dev above).
step "nfnl-batch in $BIN_DIR"
bash "$ROOT/scripts/build-native.sh"

# --- Container images ----------------------------------------------------------------------------
step "container images in $IMAGE_DIR (MetalLB's from the binaries above; the others are current)"
bash "$ROOT/scripts/build-images.sh"

step "setup complete (binaries in $BIN_DIR)"
