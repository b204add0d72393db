import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Tests start real servers and child processes; keep two files at a time on 2 cores.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // The JSON report lets .ci/run print a plain "N passed, N failed" closing line.
    reporters: ['default', ['json', { outputFile: 'test-results/vitest.json' }]],
    // Tests by what they need (`npm test` runs all three; `npm run test:<name>` one):
    projects: [
      // Node and node_modules only: in-process servers on loopback, no binary, no dist/.
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      // An installed binary (redis-server, Sentinel, Cluster, promtool, prometheus, kubectl); the gateway in-process.
      { extends: true, test: { name: 'integration', include: ['test/integration/**/*.test.ts'] } },
      // The built gateway (dist/) as child processes, signals and killed processes: fault tests.
      { extends: true, test: { name: 'process', include: ['test/process/**/*.test.ts'] } },
    ],
  },
});
