# slab-ops-proxy image. The same image runs the proxy (default command) and the sandbox system of
# record (`node dist/sandbox/main.js`); the `loadgen` stage is docker-compose's load generator.
# Node 24 LTS: the runtime every test, build and benchmark runs on (.ci/run, README "Two commands").

FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund

FROM deps AS build
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev

# The load generator needs autocannon, a development dependency: built on the full install.
FROM deps AS loadgen
COPY tsconfig.json tsconfig.bench.json ./
COPY src ./src
COPY bench ./bench
# What the bench shares with the tests (free ports, a Redis Cluster): compiled with it.
COPY test/support ./test/support
RUN node node_modules/typescript/bin/tsc -p tsconfig.bench.json
CMD ["node", "dist-bench/bench/loadgen.js"]

FROM node:24-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY config ./config
USER node
EXPOSE 8080 9090
HEALTHCHECK --interval=10s --timeout=2s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.ADMIN_PORT || 9090) + '/readyz').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# The runtime flags of `npm start` in package.json (docs/operations.md#the-runtime-flag; a test
# holds them equal).
CMD ["node", "--max-semi-space-size=32", "--min-semi-space-size=32", "dist/main.js"]
