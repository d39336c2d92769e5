#!/usr/bin/env bash
# Builds the project's one native helper, native/nfnl-batch.c (the nftables element writer's batch
# sender, src/dataplane/nft/element-writer.ts), static, into $BIN_DIR/nfnl-batch. Run by
# scripts/setup.sh; runs alone too. Cached behind a stamp of the source, the compiler and the flags.
# The image builds the same file with the same flags in its Dockerfile's `native` stage.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN_DIR=${MULTUS_PROXY_BIN_DIR:-$HOME/.cache/multus-proxy/bin}
CFLAGS=(-O2 -s -Wall -Wextra -Werror -static)
command -v gcc >/dev/null || { echo 'build-native.sh: gcc not found: apt-get install gcc libc6-dev (scripts/setup.sh does)' >&2; exit 1; }
mkdir -p "$BIN_DIR"
STAMP="$BIN_DIR/.nfnl-batch.stamp"
value=$( (sha256sum native/nfnl-batch.c; gcc --version | head -1; echo "${CFLAGS[*]}") | sha256sum | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null)" = "$value" ] && [ -x "$BIN_DIR/nfnl-batch" ]; then
  echo "nfnl-batch is current"
  exit 0
fi
rm -f "$STAMP"
gcc "${CFLAGS[@]}" -o "$BIN_DIR/nfnl-batch.tmp" native/nfnl-batch.c
mv "$BIN_DIR/nfnl-batch.tmp" "$BIN_DIR/nfnl-batch"
echo "$value" > "$STAMP"
echo "built $BIN_DIR/nfnl-batch"
