/**
 * One run's served actions (docs/spec.md §4, §6): the context relays and tool calls
 * share, the abort that ends what is in flight when the run ends, and which relayed
 * actions (HTTP, MCP) are still unanswered — noted in the run's snapshot, for the run
 * record and the segment-end callback's `in_flight`, whose outcome is unknown. Made with
 * the run's first action that needs an answer; a run that only streams checkpoints never
 * makes one.
 */
import type { Logger } from '../core/log';
import type { InFlightEntry } from '@longrun/client';
import type { RunSnapshot } from '../coordination/run-snapshot';
import type { Action, ActionResponse } from '../workflow/contract';
import { errorAnswer, serveAction, type ActionContext } from './action-answers';

/** The abort reason of a run's in-flight work; one shared instance (no stack trace per run). */
const RUN_ENDED = Object.freeze(new Error('run ended'));

/** Where answers go: the run's stream (WorkflowStream.respond). */
export interface Responder {
  /** Writes an answer to the service; false when the call can no longer take it. */
  respond(response: ActionResponse): boolean;
  /** A stop has been written: what follows it on the wire is not read by the service. */
  readonly stopSent: boolean;
}

export class RunActions {
  private readonly abort = new AbortController();
  private readonly context: ActionContext;

  constructor(
    context: Omit<ActionContext, 'signal'>,
    private readonly responder: Responder,
    /** Where relayed actions are noted in flight until their answer reaches the service. */
    private readonly snapshot: RunSnapshot,
    private readonly log: () => Logger,
  ) {
    this.context = { ...context, signal: this.abort.signal };
  }

  /**
   * Serves the action and writes its one answer; an unexpected failure is answered as an
   * internal error. Never rejects; resolves once the answer is written (or none is due).
   */
  serve(action: Action): Promise<void> {
    const relayed = inFlightEntry(action);
    if (relayed) this.snapshot.relayed(relayed);
    let served: Promise<ActionResponse | null>;
    try {
      served = serveAction(action, this.context);
    } catch (err) {
      served = Promise.reject(err);
    }
    return served.then(
      (response) => {
        if (response) this.answer(response);
      },
      (err: unknown) => {
        this.log().error({ err }, 'serving an action failed');
        this.answer(errorAnswer(action, 'internal error'));
      },
    );
  }

  /** The run has ended: what is in flight answers "request aborted" (if the call can still take it). */
  end(): void {
    this.abort.abort(RUN_ENDED);
  }

  /**
   * Writes an answer; the action stays in flight unless the answer reached the stream
   * ahead of any stop. One written behind the stop is still sent (the service may use
   * it), but the service reads its stream in order and ends at the stop: whether it ever
   * read the answer is unknown, so the owner is told the action is in flight.
   */
  private answer(response: ActionResponse): void {
    const aheadOfStop = !this.responder.stopSent;
    if (this.responder.respond(response) && aheadOfStop) this.snapshot.answered(response.requestID ?? '');
  }
}

/** What `in_flight` says of an action relayed to the owner or an MCP server; undefined for others. */
function inFlightEntry(action: Action): InFlightEntry | undefined {
  const request_id = action.requestID ?? '';
  if (action.action === 'runHTTPRequest') return { kind: 'http', request_id, method: (action.runHTTPRequest?.method || 'GET').toUpperCase() };
  if (action.action === 'runMCPTool') return { kind: 'mcp', request_id, method: action.runMCPTool?.name ?? '' };
  return undefined;
}
