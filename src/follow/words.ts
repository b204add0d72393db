/** The follow feature's word lists (docs/spec.md §14): the events a follower is sent, why a follow stream was dropped. */
import type * as client from '@longrun/client';
import type { Within } from '../core/type-proof';

/**
 * What a run reports to those who follow its workflow (docs/spec.md §14), the `event:` of each
 * Server-Sent Event of the follow route, in its per-workflow log: a run took the workflow, a
 * checkpoint, an action served or passed on, a WebSocket run parked or re-attached, the
 * segment's end.
 */
export const followLogKinds = ['run', 'checkpoint', 'action', 'parked', 'attached', 'end'] as const;
export type FollowLogKind = (typeof followLogKinds)[number];
/** Every event a follower is sent: the log's, and `idle` (no run in flight and none came: the stream ends). */
export const followEventKinds = [...followLogKinds, 'idle'] as const;
export type FollowEventKind = (typeof followEventKinds)[number];

/**
 * Why the gateway ended a follow stream before `idle`: the follower took too little of what
 * was sent (`slow`: its buffer passed LONGRUN_FOLLOW_BUFFER_BYTES), the process drains
 * (`drain`) or closes (`closing`). The client resumes with Last-Event-ID.
 */
export const followDropReasons = ['slow', 'drain', 'closing'] as const;
export type FollowDropReason = (typeof followDropReasons)[number];

/** The follow route's events are the same words on both sides (type-proof.ts). */
export type FollowEventKindProof = [Within<FollowEventKind, client.FollowEventKind>, Within<client.FollowEventKind, FollowEventKind>];
