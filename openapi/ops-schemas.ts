/**
 * The ops listener's JSON bodies (src/http/ops-app.ts). Nothing reads them with a schema —
 * probes look at the status, /runs is for people and the benchmarks — so their nearest single
 * source is the TypeScript the app writes them with; these zod schemas are held to those
 * types by the compiler, both ways (RunEntryProof below): a field added to RunInfo
 * (src/run/registry.ts) fails the typecheck until it is here, and so in the document.
 */
import { z } from 'zod';
import type { listRuns } from '../src/http/ops-app';
import type { Within } from '../src/core/type-proof';
import { transportLabelValues, type TransportLabel } from '../src/core/vocabulary';

export const probeSchema = z.object({ status: z.literal('ok') }).describe('The process is up (also while it drains).');

export const readinessSchema = z.object({ status: z.enum(['ok', 'draining']) }).describe('`draining` (503) once SIGTERM has begun the drain.');

const runEntrySchema = z.object({
  workflow_id: z.string(),
  run_id: z.string(),
  transport: z.enum(transportLabelValues as [TransportLabel, ...TransportLabel[]]),
  state: z.string(),
  started_at: z.string(),
  last_action_at: z.string().nullable(),
  actions: z.number().int().nonnegative(),
  parked_at: z.string().optional().describe("A WebSocket session's run waiting for its client: when its connection was lost."),
  socket_replica: z.string().optional().describe("A WebSocket session's run whose client re-attached on another replica: that replica's id."),
  followers: z.number().int().nonnegative().describe("Followers of the run's workflow, on every replica."),
});

export const runsSchema = z.object({ runs: z.array(runEntrySchema) }).describe("This process's runs in flight.");

type RunEntry = ReturnType<typeof listRuns>[number];
/** Compiles only when the schema and the entry listRuns() writes are each assignable to the other (core/type-proof.ts). */
export type RunEntryProof = [Within<z.infer<typeof runEntrySchema>, RunEntry>, Within<RunEntry, z.infer<typeof runEntrySchema>>];

export const openApiDocumentSchema = z
  .object({ openapi: z.string().regex(/^3\.1\.\d+$/) })
  .loose()
  .describe('This document (docs/openapi.json).');
