# syntax=docker/dockerfile:1
# longrun: build with dev dependencies, run with production ones only.
#
# Base image, pinned by digest: the multi-platform index of node:24-bookworm-slim (Node
# 24.18.0), as public repositories pinned it in July 2026 (e.g. github.com/Skiru/playground,
# infra/docker/web.Dockerfile, labelled 2026-07-17). It was read there because no registry
# was reachable where this was written: check it with the command below before relying on it.
# To refresh it (on a Node release or a Debian security update), read the index digest
#   docker buildx imagetools inspect docker.io/library/node:24-bookworm-slim --format '{{json .Manifest.Digest}}'
# and write it as NODE_IMAGE_DIGEST below (the image's base.digest label follows), or
# build once with --build-arg NODE_IMAGE_DIGEST=sha256:<that digest>. Every stage starts
# from this one base; test/process/deploy-image.test.ts holds the FROM lines to a digest.
ARG NODE_IMAGE_NAME=docker.io/library/node:24-bookworm-slim
ARG NODE_IMAGE_DIGEST=sha256:6f7b03f7c2c8e2e784dcf9295400527b9b1270fd37b7e9a7285cf83b6951452d

FROM ${NODE_IMAGE_NAME}@${NODE_IMAGE_DIGEST} AS build
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
# stack/ (tests' and benchmarks' stacks) is built with bench/, which imports it; the runtime stage copies none of it.
COPY stack ./stack
COPY bench ./bench
COPY examples ./examples
# The OpenAPI generator: the build writes dist/docs/openapi.json, served at the ops listener's /-/openapi.json.
COPY openapi ./openapi
RUN npm run build

FROM ${NODE_IMAGE_NAME}@${NODE_IMAGE_DIGEST} AS deps
# Named so: npm sbom names the SBOM's own component after this folder.
WORKDIR /longrun
COPY package.json package-lock.json ./
# --workspaces=false: the gateway's production dependencies only, without the client
# package's workspace link (it would dangle in the runtime stage, which has no packages/),
# and without the development Node binary (--omit=optional, as above).
RUN npm ci --omit=dev --omit=optional --ignore-scripts --workspaces=false
# The bill of materials (CycloneDX JSON) of exactly the node_modules installed above, which
# the runtime stage copies. npm sbom reads the installed tree, but it also checks the
# package.json's devDependencies are installed, --omit dev or not (ESBOMPROBLEMS "missing";
# npm/cli#7909 is its --omit dev dropping shared production packages): this stage's copy
# of package.json loses its devDependencies first, so nothing is dev and nothing is omitted
# but the optional Node binary, which is not installed.
RUN npm pkg delete devDependencies && npm sbom --sbom-format cyclonedx --sbom-type application --omit dev --omit optional --workspaces=false > sbom.cdx.json

FROM ${NODE_IMAGE_NAME}@${NODE_IMAGE_DIGEST} AS runtime
# MALLOC_ARENA_MAX=2: glibc otherwise gives each thread that allocates (V8's GC helpers,
# libuv's pool) its own malloc arena, and memory freed in them stays resident. Holding
# 10 000 runs after a burst of executes, that was ~5.7 KiB of RSS per run (BENCHMARKS.md,
# capacity); with 2 arenas it is gone, at no measurable CPU cost.
ENV NODE_ENV=production \
    MALLOC_ARENA_MAX=2
WORKDIR /app
# Only what runs: the build's output and the production dependencies. dist/ holds the
# compiled gateway, what it reads at run time beside it (package.json for its version, the
# gRPC contract, the Lua scripts; scripts/copy-assets.mjs; the OpenAPI description, docs/) and the simulators, loaded only
# when the image is asked to run as the sandbox (LONGRUN_SANDBOX=true: with NODE_ENV=production
# a start without LONGRUN_OWNER_URL is refused, docs/configuration.md). Not the benchmarks or the examples; no
# source folder, no lock file, no npm cache. test/process/deploy-image.test.ts runs
# dist/src/main.js from a copy holding only these paths.
COPY --from=deps /longrun/node_modules ./node_modules
COPY --from=build /app/dist/package.json ./dist/
COPY --from=build /app/dist/src ./dist/src
COPY --from=build /app/dist/sandbox ./dist/sandbox
COPY --from=build /app/dist/proto ./dist/proto
COPY --from=build /app/dist/docs ./dist/docs
# What node_modules holds, by name, version, licence and hash (docs/deploying.md).
COPY --from=deps /longrun/sbom.cdx.json ./sbom.cdx.json
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
# OCI annotations (docs/deploying.md). Version, licences, title and description are
# package.json's (deploy-image.test.ts holds them equal); what varies per build comes in as
# build arguments: --build-arg SOURCE_URL=<repository URL> --build-arg REVISION=<commit>
# --build-arg CREATED=<RFC 3339 time>. Last in the stage, so a new revision rebuilds no layer.
ARG NODE_IMAGE_NAME
ARG NODE_IMAGE_DIGEST
ARG SOURCE_URL=""
ARG REVISION=""
ARG CREATED=""
LABEL org.opencontainers.image.title="longrun" \
      org.opencontainers.image.description="Detached-run streaming gateway between dispatcher jobs and a gRPC agent-workflow service" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="${NODE_IMAGE_NAME}" \
      org.opencontainers.image.base.digest="${NODE_IMAGE_DIGEST}"
CMD ["node", "--max-semi-space-size=16", "dist/src/main.js"]
