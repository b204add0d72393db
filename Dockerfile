# syntax=docker/dockerfile:1
# longrun: build with dev dependencies, run with production ones only.

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: `prepare` would build before the sources are copied.
RUN npm ci --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY proto ./proto
COPY src ./src
COPY bench ./bench
RUN npm run build

FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY proto ./proto
# Lua scripts are read at run time from src/coordination (see src/paths.ts: the package
# root is the folder holding package.json).
COPY src/coordination/*.lua ./src/coordination/
# Listen on all interfaces inside the container; the defaults are loopback-only.
ENV LONGRUN_LISTEN=0.0.0.0:8181 \
    LONGRUN_OPS_LISTEN=0.0.0.0:9181
USER node
EXPOSE 8181 9181
# The gateway drains on SIGTERM (SPEC §7); node runs as PID 1 and handles it itself.
STOPSIGNAL SIGTERM
CMD ["node", "dist/src/main.js"]
