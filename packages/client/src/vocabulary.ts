/**
 * The words the gateway and the client share on the wire (docs/spec.md §3b, §6): why a
 * segment ended, what an action still in flight was, how a start was accepted. Each is an
 * `as const` list with its type derived. The gateway keeps the same lists beside the code
 * that owns them (src/core/vocabulary.ts, src/run/words.ts, src/follow/words.ts: it loads no
 * client code at run time) and its compiler checks them against the types here, both ways.
 */

/**
 * Segment ends after which the workflow is still `running` on the owner's side: the owner
 * dispatches the next segment, which resumes from the latest checkpoint.
 */
export const resumableSegmentEndReasons = ['run_limit', 'drain', 'lock_lost', 'stream_error', 'workflow_unavailable'] as const;
/** Segment ends that end the turn: the owner records the end and dispatches nothing. */
export const finalSegmentEndReasons = ['finished', 'stop_requested'] as const;

/** The reasons a segment-end callback carries (docs/spec.md §6). */
export const segmentEndReasons = [...finalSegmentEndReasons, ...resumableSegmentEndReasons] as const;
export type SegmentEndReason = (typeof segmentEndReasons)[number];
export type ResumableSegmentEndReason = (typeof resumableSegmentEndReasons)[number];
export type FinalSegmentEndReason = (typeof finalSegmentEndReasons)[number];

/**
 * What an action still unanswered when a segment ended was (the segment-end callback's
 * and run record's `in_flight`, docs/spec.md §6): a relayed runHTTPRequest or a runMCPTool call.
 */
export const inFlightKinds = ['http', 'mcp'] as const;
export type InFlightKind = (typeof inFlightKinds)[number];

/** How a run's start was answered once it was accepted (docs/spec.md §3b): the 202's `accepted_on`. */
export const acceptedOn = ['first_action', 'accept_wait_elapsed'] as const;
export type AcceptedOn = (typeof acceptedOn)[number];

/**
 * The events of the follow route (docs/spec.md §14), each the `event:` of a Server-Sent Event:
 * a run took the workflow, a checkpoint, an action served or passed on, a WebSocket run
 * parked or re-attached, a segment's end, and `idle` (the stream's last: no run in flight).
 */
export const followEventKinds = ['run', 'checkpoint', 'action', 'parked', 'attached', 'end', 'idle'] as const;
export type FollowEventKind = (typeof followEventKinds)[number];

/**
 * Why the gateway's store fence refused a start (docs/spec.md §5; the 503 body's `fence`):
 * `new`, a Redis that is new to longrun and not a lease TTL old yet; `lost`, a Redis that
 * lost its data (a restart, a failover, a flush). Either way it lasts at most one lease TTL.
 */
export const storeFences = ['new', 'lost'] as const;
export type StoreFence = (typeof storeFences)[number];
