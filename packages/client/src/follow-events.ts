/**
 * The follow route's events (docs/spec.md §14) and the data each carries: the zod schemas
 * follow() reads every event's data with (an event whose data does not match is
 * UNEXPECTED_RESPONSE, as one that is not JSON), and its FollowEvent type. Objects are
 * read loosely: a field a newer gateway adds is kept, never a reason to fail.
 */
import { z } from 'zod';
import { checkpointSchema, type Checkpoint } from './ndjson';
import { inFlightSchema } from './responses';
import { segmentEndReasons, type FollowEventKind, type InFlightKind, type SegmentEndReason } from './vocabulary';

/**
 * Every event the follow route sends, with its data. `id` is the event's own `id:` field, its
 * position in the workflow's log (increasing by one); `idle` has none.
 */
export type FollowEvent =
  | { event: 'run'; id: number; data: { run_id: string; transport: string; replica: string; started_at: string; state: string } }
  /** A newCheckpoint as its ndjson line; `resync`: it stands for events the stream could not give (redraw from it). */
  | { event: 'checkpoint'; id: number; data: Checkpoint & { resync?: true } }
  | { event: 'action'; id: number; data: { run_id: string; kind: string; request_id: string } }
  | { event: 'parked'; id: number; data: { run_id: string; parked_at: string } }
  | { event: 'attached'; id: number; data: { run_id: string; socket_replica?: string } }
  | {
      event: 'end';
      id: number;
      data: {
        run_id: string;
        reason: SegmentEndReason;
        in_flight: Array<{ kind: InFlightKind; request_id: string; method: string }>;
        ended_while_stopping?: true;
        /** The owner dispatches another segment: the stream follows it. */
        resumable: boolean;
      };
    }
  /** The last event: no run in flight, and none came within the gateway's LONGRUN_FOLLOW_IDLE_MS. */
  | { event: 'idle'; id: undefined; data: { workflow_id: string } };

type DataOf<K extends FollowEventKind> = Extract<FollowEvent, { event: K }>['data'];

/** The data of each event, by its `event:` name. */
export const followEventDataSchemas = {
  run: z
    .object({ run_id: z.string(), transport: z.string(), replica: z.string(), started_at: z.string(), state: z.string() })
    .loose()
    .describe('A run took the workflow (or was in flight when the follow began).') satisfies z.ZodType<DataOf<'run'>>,
  checkpoint: checkpointSchema
    .extend({ resync: z.literal(true).optional().describe('This checkpoint stands for events the stream could not give: redraw from it.') })
    .describe('A newCheckpoint, as its ndjson line (docs/spec.md §3a).'),
  action: z
    .object({ run_id: z.string(), kind: z.string(), request_id: z.string() })
    .loose()
    .describe('An action served or passed on: its kind and request id, never its payload.') satisfies z.ZodType<DataOf<'action'>>,
  parked: z.object({ run_id: z.string(), parked_at: z.string() }).loose().describe("A WebSocket session's run lost its connection and waits for its client.") satisfies z.ZodType<
    DataOf<'parked'>
  >,
  attached: z
    .object({ run_id: z.string(), socket_replica: z.string().optional() })
    .loose()
    .describe("A WebSocket session's client re-attached to its run (`socket_replica`: on another replica, over a bridge).") satisfies z.ZodType<DataOf<'attached'>>,
  end: z
    .object({
      run_id: z.string(),
      reason: z.enum(segmentEndReasons),
      in_flight: inFlightSchema,
      ended_while_stopping: z.literal(true).optional(),
      resumable: z.boolean().describe('The owner dispatches another segment: the stream follows it.'),
    })
    .loose()
    .describe("The segment's end: the segment-end callback's reason and in_flight.") satisfies z.ZodType<DataOf<'end'>>,
  idle: z.object({ workflow_id: z.string() }).loose().describe('The last event: no run in flight, and none came within the gateway’s LONGRUN_FOLLOW_IDLE_MS.') satisfies z.ZodType<
    DataOf<'idle'>
  >,
} as const satisfies Record<FollowEventKind, z.ZodType>;
