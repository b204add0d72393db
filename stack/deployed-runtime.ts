/**
 * How the image runs node (the Dockerfile's runtime ENV and CMD; test/process/deploy-image.test.ts
 * keeps them equal): a stack's gateways started `deployed` run so, and the benchmarks' raw
 * holders too, so memory per run compares the same allocator and the same young generation.
 */

/** The allocator settings of the image's runtime ENV. */
export const DEPLOYED_ALLOCATOR_ENV: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: '2' };

/**
 * The node flags of the image's CMD. Node 24's V8 grows its young generation to 3 × 64 MiB
 * semi-spaces (Node 20's stopped at 3 × 16): after a burst that space stays resident, 26.6 KB
 * per held run at 5 000 runs where Node 20 had 6.5. 16 MiB gives Node 24 exactly Node 20's
 * young generation and scavenge rate, at no measurable CPU cost (BENCHMARKS.md, Node 20 and Node 24).
 */
export const DEPLOYED_NODE_ARGS: readonly string[] = ['--max-semi-space-size=16'];
