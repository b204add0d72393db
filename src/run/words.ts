/**
 * A run's word lists besides its stops (stop-reasons.ts) and its end reasons (shared by
 * several floors: core/vocabulary.ts): how its start was accepted, which cap refused it.
 */
import type * as client from '@longrun/client';
import type { Within } from '../core/type-proof';

// Not imported from @longrun/client: the gateway runs without the client package.
/** How a run's start was answered once it was accepted (docs/spec.md §3b). */
export const acceptedOn = ['first_action', 'accept_wait_elapsed'] as const;
export type AcceptedOn = (typeof acceptedOn)[number];

/**
 * Which cap refused an execute, a session or a follow: detached runs of the process, runs of
 * an actor, WebSocket sessions of the process, followers of the process or of one workflow.
 */
export const capKinds = ['process', 'actor', 'websocket', 'followers', 'workflow_followers'] as const;
export type CapKind = (typeof capKinds)[number];

/** The 202's `accepted_on` is the same word on both sides (type-proof.ts). */
export type AcceptedOnProof = [Within<AcceptedOn, client.AcceptedOn>, Within<client.AcceptedOn, AcceptedOn>];
