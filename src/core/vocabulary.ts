/**
 * The word lists several floors share, defined once: how a run reaches its caller, why it
 * ended, why the store fence refuses. Coordination, observability (metric labels, span
 * attributes), run, follow, http and websocket all say these, so they sit on the ground
 * floor. Every other word list lives with the feature that owns it (`<feature>/words.ts`,
 * run/stop-reasons.ts, workflow/workflow-stream.ts), imported by metrics, logs and
 * callbacks alike, so the same event has the same name everywhere (grpc-js `constants.ts`).
 *
 * The words the client package shares on the wire (segment-end reasons, store fences) are
 * @longrun/client's too; the proof at the end of this file keeps both equal.
 */
import type * as client from '@longrun/client';
import type { Within } from './type-proof';

/**
 * How a run reaches its caller: blocking (ndjson streamed back), detached (202, runs on),
 * or a WebSocket session (the client executes the actions the gateway does not serve).
 */
export const transports = ['blocking', 'detached', 'websocket'] as const;
export type Transport = (typeof transports)[number];

/**
 * The word each transport is written as in metric labels, log lines, `/runs` and run
 * records. A blocking run is written `http`, the documented label value dashboards, alert
 * rules and owners already read; this table is the one place the two names meet.
 */
export const transportLabels = { blocking: 'http', detached: 'detached', websocket: 'websocket' } as const satisfies Record<Transport, string>;
export type TransportLabel = (typeof transportLabels)[Transport];
export const transportLabelValues: readonly TransportLabel[] = transports.map((t) => transportLabels[t]);

// Not imported from @longrun/client (nor the list below): the gateway runs without the client package.
/**
 * Segment ends after which the workflow is still `running` on the owner's side: the owner
 * dispatches the next segment, which resumes from the latest checkpoint.
 */
export const resumableSegmentEndReasons = ['run_limit', 'drain', 'lock_lost', 'stream_error', 'workflow_unavailable'] as const;
/** Segment ends that end the turn: the owner records the end and dispatches nothing. */
const finalSegmentEndReasons = ['finished', 'stop_requested'] as const;

/** The reasons a segment-end callback carries (docs/spec.md §6). */
const segmentEndReasons = [...finalSegmentEndReasons, ...resumableSegmentEndReasons] as const;
export type SegmentEndReason = (typeof segmentEndReasons)[number];

/**
 * How a WebSocket session's client ended it (docs/spec.md §11): a close frame 1000/1001
 * (`client_closed`, stopped with WORKHORSE_WEBSOCKET_CLOSE_<code>), no pong within the
 * read deadline (`pong_timeout`), a ping that could not be written (`ping_failed`). A
 * connection lost otherwise is `client_gone`, like a blocking caller that hung up.
 */
const websocketEndReasons = ['client_closed', 'pong_timeout', 'ping_failed'] as const;

/**
 * Why a run ended — the teardown reason in metrics and the run-end log line. The
 * segment-end callback (docs/spec.md §6) uses the same words, except that a detached run has no
 * caller to lose: `client_gone` there (a cancel while closing) is reported as
 * `stream_error` (see `segmentEndReason`).
 */
export const endReasons = [...segmentEndReasons, 'client_gone', ...websocketEndReasons] as const;
export type EndReason = (typeof endReasons)[number];

export function segmentEndReason(reason: EndReason): SegmentEndReason {
  return (segmentEndReasons as readonly string[]).includes(reason) ? (reason as SegmentEndReason) : 'stream_error';
}

// Not imported from @longrun/client: the gateway runs without the client package.
/**
 * Why the store fence refuses new locks (docs/spec.md §5; the 503's `fence`): `new`, a Redis
 * without longrun's marker that is not a lease TTL old yet; `lost`, a store that lost its
 * data (a restart, a failover, a flush). The coordination raises it, errors.ts carries it.
 */
export const storeFences = ['new', 'lost'] as const;
export type StoreFence = (typeof storeFences)[number];

/** The words shared with @longrun/client are the same words on both sides (type-proof.ts). */
export type ClientWordsProof = [
  Within<(typeof resumableSegmentEndReasons)[number], client.ResumableSegmentEndReason>,
  Within<client.ResumableSegmentEndReason, (typeof resumableSegmentEndReasons)[number]>,
  Within<(typeof finalSegmentEndReasons)[number], client.FinalSegmentEndReason>,
  Within<client.FinalSegmentEndReason, (typeof finalSegmentEndReasons)[number]>,
  Within<SegmentEndReason, client.SegmentEndReason>,
  Within<client.SegmentEndReason, SegmentEndReason>,
  Within<StoreFence, client.StoreFence>,
  Within<client.StoreFence, StoreFence>,
];
