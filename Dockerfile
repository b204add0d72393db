# syntax=docker/dockerfile:1
# longrun: build with dev dependencies, run with production ones only.
#
# Base image: pin it by digest for reproducible builds and reviewed updates. Look the
# digest up where a registry is reachable:
#   docker buildx imagetools inspect node:24-bookworm-slim --format '{{json .Manifest.Digest}}'
# then build with --build-arg NODE_IMAGE=node:24-bookworm-slim@sha256:<that digest>, or
# write it as the default below. (Not pinned in this tree: it was written where no
# registry could be reached to read the digest.)
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# The client package (a workspace): the build compiles it first, and the gateway's
# compiler reads its types (type imports only: nothing of it runs in the gateway).
COPY packages/client/package.json ./packages/client/
# --ignore-scripts: `prepare` would build before the sources are copied. --omit=optional:
# the one optional dependency is the Node 24 binary a development install runs its scripts
# with (package.json); the image has its base's.
RUN npm ci --ignore-scripts --omit=optional
COPY tsconfig.json tsconfig.build.json ./
COPY packages/client/tsconfig.json ./packages/client/
COPY packages/client/src ./packages/client/src
COPY scripts/copy-assets.mjs ./scripts/
COPY bin ./bin
COPY proto ./proto
COPY src ./src
COPY sandbox ./sandbox
COPY bench ./bench
COPY examples ./examples
RUN npm run build

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# --workspaces=false: the gateway's production dependencies only, without the client
# package's workspace link (it would dangle in the runtime stage, which has no packages/),
# and without the development Node binary (--omit=optional, as above).
RUN npm ci --omit=dev --omit=optional --ignore-scripts --workspaces=false

FROM ${NODE_IMAGE} AS runtime
# MALLOC_ARENA_MAX=2: glibc otherwise gives each thread that allocates (V8's GC helpers,
# libuv's pool) its own malloc arena, and memory freed in them stays resident. Holding
# 10 000 runs after a burst of executes, that was ~5.7 KiB of RSS per run (BENCHMARKS.md,
# capacity); with 2 arenas it is gone, at no measurable CPU cost.
ENV NODE_ENV=production \
    MALLOC_ARENA_MAX=2
WORKDIR /app
# Only what runs: the build's output and the production dependencies. dist/ holds the
# compiled gateway, what it reads at run time beside it (package.json for its version, the
# gRPC contract, the Lua scripts; scripts/copy-assets.mjs) and the simulators, loaded only
# when the image is asked to run as the sandbox (LONGRUN_SANDBOX=true: with NODE_ENV=production
# a start without LONGRUN_OWNER_URL is refused, docs/configuration.md). Not the benchmarks or the examples; no
# source folder, no lock file, no npm cache. test/process/deploy-image.test.ts runs
# dist/src/main.js from a copy holding only these paths.
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist/package.json ./dist/
COPY --from=build /app/dist/src ./dist/src
COPY --from=build /app/dist/sandbox ./dist/sandbox
COPY --from=build /app/dist/proto ./dist/proto
# `longrun store mark` and the like: `docker run … longrun store mark`, `kubectl exec … -- longrun …`
# (docs/deploying.md "A new Redis"). `longrun` alone starts the gateway, as the CMD does.
COPY --from=build /app/dist/bin/longrun /usr/local/bin/longrun
# Listen on all interfaces inside the container; the defaults are loopback-only.
ENV LONGRUN_LISTEN=0.0.0.0:8181 \
    LONGRUN_OPS_LISTEN=0.0.0.0:9181
# The `node` user of the base image, by number so that Kubernetes' runAsNonRoot can check
# it (deploy/kubernetes/base/deployment.yaml runs the pod as 1000:1000).
USER 1000:1000
EXPOSE 8181 9181
# No HEALTHCHECK on purpose: Kubernetes probes the ops listener (/-/liveness,
# /-/readiness), and a Docker health check would keep running beside them. Outside
# Kubernetes, probe those two routes from your orchestrator.
# The gateway drains on SIGTERM (SPEC §7); node runs as PID 1 and handles it itself.
# --max-semi-space-size=16: Node 24's V8 grows its young generation to 3 × 64 MiB where
# Node 20's stopped at 3 × 16, and after a burst it stays resident: 26.6 KB of RSS per held
# run at 5 000 runs, against 6.5 on Node 20. 16 MiB is Node 20's size and scavenge rate, at
# no measurable CPU cost (BENCHMARKS.md, Node 20 and Node 24). On the command line, not in
# an image-level NODE_OPTIONS, which a Deployment's own NODE_OPTIONS would replace.
STOPSIGNAL SIGTERM
CMD ["node", "--max-semi-space-size=16", "dist/src/main.js"]
