# syntax=docker/dockerfile:1
# One image for the programs of multus-proxy:
#   controller  node /app/dist/controller.js   (non-root, the image's default user)
#   webhook     node /app/dist/webhook.js      (non-root)
#   sidecar     health-listen node /app/dist/sidecar.js  (uid 0 + NET_ADMIN/NET_RAW; the webhook sets that)
#   certs CLI   node /app/dist/certs.js        (bootstrap Job of deploy/overlays/bootstrap)
#   node agent  node /app/dist/node-agent.js   (optional DaemonSet, deploy/components/node-agent: hostNetwork, uid 0 + NET_ADMIN/NET_RAW)
# Build: docker build -t <registry>/multus-proxy:<tag> .   (see docs/install.md)
# Behind a TLS-intercepting proxy or a private npm registry, give `npm ci` your npm config and CA
# as build secrets (optional; nothing of them stays in the image):
#   docker build --secret id=npmrc,src=$HOME/.npmrc --secret id=npm_ca,src=/path/to/ca.pem ...
# with `cafile=/run/secrets/npm_ca` in that npmrc (scripts/build-images.sh does this with buildah).
# Node.js 24 LTS at run time; development works on Node >= 20 too (package.json engines).

# ---- build: compile and bundle with esbuild (scripts/build.mjs) --------------------------------
FROM node:24-bookworm-slim AS build
WORKDIR /src
# Dependencies first, so a source change does not re-run npm ci.
COPY package.json package-lock.json ./
RUN --mount=type=secret,id=npmrc,target=/root/.npmrc,required=false \
    --mount=type=secret,id=npm_ca,target=/run/secrets/npm_ca,required=false \
    npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY scripts/build.mjs ./scripts/build.mjs
COPY src ./src
COPY cmd ./cmd
RUN npm run build

# ---- native: the helpers in native/, static ------------------------------------------------------
# nfnl-batch: the nftables element writer's batch sender; nfnl-counters: the sidecar's reader of its
# policy drop counters; health-listen: the injected sidecar's
# launcher, which opens its health port before Node.js starts. The same flags as
# scripts/build-native.sh. Static, so the runtime stage needs no compiler or libs.
FROM node:24-bookworm-slim AS native
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
COPY native/nfnl-batch.c native/nfnl-counters.c native/health-listen.c /src/
RUN gcc -O2 -s -Wall -Wextra -Werror -static -o /src/nfnl-batch /src/nfnl-batch.c
RUN gcc -O2 -s -Wall -Wextra -Werror -static -o /src/nfnl-counters /src/nfnl-counters.c
RUN gcc -O2 -s -Wall -Wextra -Werror -static -o /src/health-listen /src/health-listen.c

# ---- runtime ------------------------------------------------------------------------------------
FROM node:24-bookworm-slim AS runtime
# iptables: Debian's package carries both back ends (iptables-nft, the default, and
# iptables-legacy) and ip6tables; the sidecar picks the one its pod's namespace already uses.
# iproute2 for routes with a source address, conntrack to flush stale UDP entries, nftables
# (`nft`) for the nftables rule back end (--backend nftables).
RUN apt-get update \
 && apt-get install -y --no-install-recommends iptables nftables iproute2 conntrack \
 && rm -rf /var/lib/apt/lists/* \
 # The programs are bundles: npm, npx and yarn are dead weight at run time.
 && rm -rf /usr/local/lib/node_modules/npm /usr/local/bin/npm /usr/local/bin/npx \
           /opt/yarn-* /usr/local/bin/yarn /usr/local/bin/yarnpkg \
 && groupadd --system --gid 65532 multus-proxy \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin multus-proxy
WORKDIR /app
# Only the bundles (each has its dependencies inlined; no node_modules at run time).
COPY --from=build /src/dist/ /app/dist/
# The sidecar's element writer (src/dataplane/nftables/tuning/element-writer.ts looks here by default).
COPY --from=native /src/nfnl-batch /usr/local/bin/nfnl-batch
# The sidecar's drop-counter reader, beside nfnl-batch (cmd/sidecar/policy-drops.ts looks there).
COPY --from=native /src/nfnl-counters /usr/local/bin/nfnl-counters
# The injected sidecar's command starts with it (cmd/webhook/options.ts DEFAULT_SIDECAR_COMMAND).
COPY --from=native /src/health-listen /usr/local/bin/health-listen
ENV NODE_ENV=production
# iptables-legacy takes a lock file, /run/xtables.lock by default, and refuses to restore when it
# cannot create it, which is always the case under readOnlyRootFilesystem. /dev/shm is a
# writable tmpfs in every container (and shared by the pod's containers, which is where a lock
# is wanted); iptables-nft takes no lock.
ENV XTABLES_LOCKFILE=/dev/shm/xtables.lock
# Numeric, so the kubelet can verify runAsNonRoot without a runAsUser.
USER 65532:65532
ENTRYPOINT ["node"]
CMD ["/app/dist/controller.js"]
