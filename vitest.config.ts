import path from 'node:path';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    // The client package from its sources, as tsconfig.json's paths has it: no build needed.
    alias: [
      { find: /^@longrun\/client$/, replacement: path.resolve(__dirname, 'packages/client/src/index.ts') },
      { find: /^@longrun\/client\/express$/, replacement: path.resolve(__dirname, 'packages/client/src/express.ts') },
    ],
  },
  test: {
    // Tests start real servers and child processes; keep two files at a time on 2 cores.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // The JSON report lets .ci/run print a plain "N passed, N failed" closing line.
    reporters: ['default', ['json', { outputFile: 'test-results/vitest.json' }]],
    // Tests by what they need (`npm test` runs them all; `npm run test:<name>` one):
    projects: [
      // Node and node_modules only: in-process servers on loopback, no binary, no dist/.
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      // The client package alone (packages/client/test): Node and its own dependencies, no gateway.
      { extends: true, test: { name: 'client', include: ['packages/client/test/**/*.test.ts'] } },
      // An installed binary (redis-server, Sentinel, Cluster, promtool, prometheus, kubectl); the gateway in-process.
      { extends: true, test: { name: 'integration', include: ['test/integration/**/*.test.ts'] } },
      // The built gateway (dist/) as child processes, signals and killed processes: fault tests.
      { extends: true, test: { name: 'process', include: ['test/process/**/*.test.ts'] } },
    ],
  },
});
