#!/usr/bin/env bash
# Builds the project's native helpers, static, into $BIN_DIR:
#   nfnl-batch     native/nfnl-batch.c, the nftables element writer's batch sender
#                  (src/dataplane/nftables/tuning/element-writer.ts)
#   nfnl-counters  native/nfnl-counters.c, the sidecar's reader of its policy drop counters
#                  (cmd/sidecar/policy-drops.ts)
#   health-listen  native/health-listen.c, the injected sidecar's launcher: it opens the health port
#                  before Node.js starts (src/health.ts HEALTH_FD_ENV)
# Run by scripts/setup.sh; runs alone too. Each is cached behind a stamp of its source, the
# compiler and the flags. The image builds the same files with the same flags in its Dockerfile's
# `native` stage.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${MULTUS_PROXY_BIN_DIR:-$HOME/.cache/multus-proxy/bin}
CFLAGS=(-O2 -s -Wall -Wextra -Werror -static)
command -v gcc >/dev/null || { echo 'build-native.sh: gcc not found: apt-get install gcc libc6-dev (scripts/setup.sh does)' >&2; exit 1; }
mkdir -p "$BIN_DIR"
for name in health-listen nfnl-batch nfnl-counters; do
  stamp="$BIN_DIR/.$name.stamp"
  value=$( (sha256sum "native/$name.c"; gcc --version | head -1; echo "${CFLAGS[*]}") | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" = "$value" ] && [ -x "$BIN_DIR/$name" ]; then
    echo "$name is current"
    continue
  fi
  rm -f "$stamp"
  gcc "${CFLAGS[@]}" -o "$BIN_DIR/$name.tmp" "native/$name.c"
  mv "$BIN_DIR/$name.tmp" "$BIN_DIR/$name"
  echo "$value" > "$stamp"
  echo "built $BIN_DIR/$name"
done
