/** The WebSocket route's word lists (docs/spec.md §12): why a parked run was stopped, why a bridge was given up. */

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
