/**
 * Every finite word list longrun uses, defined once: what metrics label, what logs and
 * segment-end callbacks say, what the code switches on. Each is an `as const` array with
 * its type derived, imported by metrics, run, owner and http alike, so the same event
 * has the same name everywhere (grpc-js `constants.ts`).
 *
 * The words the client package shares on the wire (segment-end reasons, in-flight kinds,
 * accepted-on) are @longrun/client's too; the proof at the end of this file keeps both equal.
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

// Not imported from @longrun/client (nor the two lists below): the gateway runs without the client package.
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

/**
 * How a WebSocket session's client ended it (docs/spec.md §11): a close frame 1000/1001
 * (`client_closed`, stopped with WORKHORSE_WEBSOCKET_CLOSE_<code>), no pong within the
 * read deadline (`pong_timeout`), a ping that could not be written (`ping_failed`). A
 * connection lost otherwise is `client_gone`, like a blocking caller that hung up.
 */
export const websocketEndReasons = ['client_closed', 'pong_timeout', 'ping_failed'] as const;

/**
 * Why a run ended — the teardown reason in metrics and the run-end log line. The
 * segment-end callback (docs/spec.md §6) uses the same words, except that a detached run has no
 * caller to lose: `client_gone` there (a cancel while closing) is reported as
 * `stream_error` (see `segmentEndReason`).
 */
export const endReasons = [...segmentEndReasons, 'client_gone', ...websocketEndReasons] as const;
export type EndReason = (typeof endReasons)[number];

// Not imported from @longrun/client: the gateway runs without the client package.
/**
 * What an action still unanswered when a segment ended was (the segment-end callback's
 * and run record's `in_flight`, docs/spec.md §6): a relayed runHTTPRequest or a runMCPTool call.
 */
export const inFlightKinds = ['http', 'mcp'] as const;
export type InFlightKind = (typeof inFlightKinds)[number];

export function segmentEndReason(reason: EndReason): SegmentEndReason {
  return (segmentEndReasons as readonly string[]).includes(reason) ? (reason as SegmentEndReason) : 'stream_error';
}

// Not imported from @longrun/client: the gateway runs without the client package.
/** How a run's start was answered once it was accepted (docs/spec.md §3b). */
export const acceptedOn = ['first_action', 'accept_wait_elapsed'] as const;
export type AcceptedOn = (typeof acceptedOn)[number];

/**
 * How a stop handshake ended (docs/spec.md §4): `ack`, the call ended with the status the
 * service acknowledges that word with (UNAVAILABLE for WORKHORSE_SERVER_SHUTDOWN, OK for
 * every other); `error`, any other status; `timeout`, cancelled after the ack timeout;
 * `already_ended`, the call had ended before the stop could be written.
 */
export const stopOutcomes = ['ack', 'already_ended', 'timeout', 'error'] as const;
export type StopOutcome = (typeof stopOutcomes)[number];

/**
 * StopWorkflowRequest.reason values longrun sends for its own stops (docs/spec.md §4).
 * WORKHORSE_SERVER_SHUTDOWN is on every workflow service's infrastructure allowlist and is
 * the one word the service acknowledges with UNAVAILABLE ("retry on another pod");
 * WORKHORSE_RUN_LIMIT and WORKHORSE_LOCK_LOST are sent only to a service that allowlists
 * them (LONGRUN_WORKFLOW_INFRA_STOP_REASONS), else a run limit or a lost lease would mark
 * the workflow stopped.
 */
export const SERVER_SHUTDOWN = 'WORKHORSE_SERVER_SHUTDOWN';
export const RUN_LIMIT = 'WORKHORSE_RUN_LIMIT';
export const LOCK_LOST = 'WORKHORSE_LOCK_LOST';
/** The user reason when the owner's stop names none (or an unusable one). */
export const USER_STOP = 'USER_STOP';
/**
 * What Workhorse sends when a WebSocket client goes away. The public service allowlists
 * PING_FAILED only: a PONG_TIMEOUT is a user stop there, for Workhorse as for longrun.
 */
export const WEBSOCKET_PONG_TIMEOUT = 'WORKHORSE_WEBSOCKET_PONG_TIMEOUT';
export const WEBSOCKET_PING_FAILED = 'WORKHORSE_WEBSOCKET_PING_FAILED';
/** A client's close frame: WORKHORSE_WEBSOCKET_CLOSE_<code>. */
export const WEBSOCKET_CLOSE_PREFIX = 'WORKHORSE_WEBSOCKET_CLOSE_';
/**
 * The public workflow service's infrastructure allowlist (ai-gateway
 * `duo_workflow_service/workflows/type_definitions.py` INFRA_STOP_REASONS): a stop with
 * one of these leaves the workflow `running`; any other word marks it stopped. The
 * default of LONGRUN_WORKFLOW_INFRA_STOP_REASONS.
 */
export const publicInfraStopReasons = [SERVER_SHUTDOWN, WEBSOCKET_PING_FAILED] as const;
/** Every word Workhorse or longrun stops with for an infrastructure cause: never the owner's reason. */
export const workhorseStopWords = [SERVER_SHUTDOWN, RUN_LIMIT, LOCK_LOST, WEBSOCKET_PONG_TIMEOUT, WEBSOCKET_PING_FAILED] as const;
/** The stops longrun makes itself, each sent with the most specific word the service allowlists. */
export type InfraStop = Extract<EndReason, 'drain' | 'run_limit' | 'lock_lost'>;

/**
 * Every way a run is stopped, the one argument of `Run.stop` (src/run/run.ts): the
 * handshake stops (run limit, drain, lost lease, the owner's stop key) and the cancels
 * without one (the caller gone, the service never took the stream). Whoever decides a
 * run must end — the run limits, the drain, the lease keeper through the run's
 * coordination, the stop watcher, the stop check before an action, the caller's
 * adapter — says so with one of these.
 */
export type StopReason =
  | { readonly kind: 'run_limit' }
  | { readonly kind: 'drain'; readonly ackTimeoutMs?: number }
  | { readonly kind: 'lock_lost'; readonly why: 'taken' | 'expired' }
  | { readonly kind: 'stop_requested'; readonly value: string }
  | { readonly kind: 'client_closed'; readonly code: number }
  | { readonly kind: 'pong_timeout' }
  | { readonly kind: 'ping_failed' }
  | { readonly kind: 'client_gone' }
  | { readonly kind: 'workflow_unavailable' };

/** The stops that carry nothing but their kind, made once (one object each, no allocation per stop). */
export const STOPS = Object.freeze({
  run_limit: Object.freeze({ kind: 'run_limit' }),
  client_gone: Object.freeze({ kind: 'client_gone' }),
  workflow_unavailable: Object.freeze({ kind: 'workflow_unavailable' }),
  pong_timeout: Object.freeze({ kind: 'pong_timeout' }),
  ping_failed: Object.freeze({ kind: 'ping_failed' }),
} satisfies Record<string, StopReason>);

/** What a stop reason token may look like (the stop key's value, the stop endpoint's body). */
export const STOP_REASON_TOKEN = /^[A-Z][A-Z0-9_]{0,63}$/;

/** Why a runHTTPRequest was answered with an error instead of the owner's response. */
/** `send_data`: an answer only GitLab Workhorse can complete (Gitlab-Workhorse-Send-Data), relayed past it. */
export const relayErrorTypes = ['refused_path', 'refused_method', 'timeout', 'too_large', 'network', 'aborted', 'send_data'] as const;
export type RelayErrorType = (typeof relayErrorTypes)[number];

/** How a segment-end callback went. */
export const callbackResults = ['ok', 'retried_ok', 'failed'] as const;
export type CallbackResult = (typeof callbackResults)[number];

/** Why an execute was refused before a run started; each error code maps to one (errors.ts). */
export const connectionErrorTypes = ['preauth', 'bad_request', 'lock', 'capacity', 'stream_open', 'rejected', 'client_gone', 'internal'] as const;
export type ConnectionErrorType = (typeof connectionErrorTypes)[number];

/**
 * Which cap refused an execute, a session or a follow: detached runs of the process, runs of
 * an actor, WebSocket sessions of the process, followers of the process or of one workflow.
 */
export const capKinds = ['process', 'actor', 'websocket', 'followers', 'workflow_followers'] as const;
export type CapKind = (typeof capKinds)[number];

/** Lock operations and their results; only the pairs in `lockOutcomes` happen. */
export const lockOps = ['acquire', 'renew', 'release'] as const;
export type LockOp = (typeof lockOps)[number];
/**
 * `fenced`: refused, the store having lost its data moments ago (store-fence.lua);
 * `reasserted`: a lock the store had lost re-created by its holder's renewal.
 */
export const lockResults = ['ok', 'taken', 'lost', 'error', 'fenced', 'reasserted'] as const;
export type LockResult = (typeof lockResults)[number];
export const lockOutcomes: ReadonlyArray<readonly [LockOp, LockResult]> = [
  ['acquire', 'ok'],
  ['acquire', 'taken'],
  ['acquire', 'fenced'],
  ['acquire', 'error'],
  ['renew', 'ok'],
  ['renew', 'reasserted'],
  ['renew', 'lost'],
  ['renew', 'error'],
  ['release', 'ok'],
  ['release', 'error'],
];

/** What the lease keeper batches: renewals each tick, releases each turn of the event loop. */
export const leaseBatchOps = ['renew', 'release'] as const;
export type LeaseBatchOp = (typeof leaseBatchOps)[number];

/** The coordination store's connections and what they report. */
export const redisConnections = ['commands', 'subscriber'] as const;
export type RedisConnection = (typeof redisConnections)[number];
export const redisEvents = ['ready', 'error', 'reconnecting', 'end'] as const;
export type RedisEvent = (typeof redisEvents)[number];

/**
 * Why the store fence refuses new locks (docs/spec.md §5; the 503's `fence`): `new`, a Redis
 * without longrun's marker that is not a lease TTL old yet; `lost`, a store that lost its
 * data (a restart, a failover, a flush).
 */
export const storeFences = ['new', 'lost'] as const;
export type StoreFence = (typeof storeFences)[number];

/** Where an MCP server lives: the owner's own (`gitlab`, `orbit`) or anywhere else. */
export const mcpServerKinds = ['owner', 'external'] as const;
export type McpServerKind = (typeof mcpServerKinds)[number];

/** How a runMCPTool call on a server was answered. */
export const mcpCallResults = ['ok', 'tool_error', 'invalid_args', 'too_large', 'timeout', 'error', 'aborted'] as const;
export type McpCallResult = (typeof mcpCallResults)[number];

/** Why a configured MCP server's tools were left out of a turn. */
export const mcpDiscoveryFailures = ['refused', 'timeout', 'failed'] as const;
export type McpDiscoveryFailure = (typeof mcpDiscoveryFailures)[number];

/**
 * Why longrun stopped a parked WebSocket run (docs/spec.md §12): its resume window ran out,
 * its own backlog outgrew LONGRUN_WS_BACKLOG_BYTES, the process's parked backlogs together
 * outgrew LONGRUN_WS_BACKLOG_BUDGET_BYTES, or a start that may not re-attach took the workflow.
 */
export const parkEndReasons = ['expired', 'backlog_full', 'backlog_budget', 'taken_over'] as const;
export type ParkEndReason = (typeof parkEndReasons)[number];

/**
 * Why a bridge between replicas was given up (docs/spec.md §12; longrun_bridge_breaks_total):
 * a message lost on the way, a send Redis refused, a peer not heard within its deadline or
 * that said it dropped the bridge, a claim nobody answered.
 */
export const bridgeBreakWhys = ['gap', 'send_failed', 'peer_silent', 'peer_dropped', 'unanswered'] as const;
export type BridgeBreakWhy = (typeof bridgeBreakWhys)[number];

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

/** The words shared with @longrun/client are the same words on both sides (type-proof.ts). */
export type ClientWordsProof = [
  Within<(typeof resumableSegmentEndReasons)[number], client.ResumableSegmentEndReason>,
  Within<client.ResumableSegmentEndReason, (typeof resumableSegmentEndReasons)[number]>,
  Within<(typeof finalSegmentEndReasons)[number], client.FinalSegmentEndReason>,
  Within<client.FinalSegmentEndReason, (typeof finalSegmentEndReasons)[number]>,
  Within<SegmentEndReason, client.SegmentEndReason>,
  Within<client.SegmentEndReason, SegmentEndReason>,
  Within<InFlightKind, client.InFlightKind>,
  Within<client.InFlightKind, InFlightKind>,
  Within<AcceptedOn, client.AcceptedOn>,
  Within<client.AcceptedOn, AcceptedOn>,
  Within<FollowEventKind, client.FollowEventKind>,
  Within<client.FollowEventKind, FollowEventKind>,
  Within<StoreFence, client.StoreFence>,
  Within<client.StoreFence, StoreFence>,
];
