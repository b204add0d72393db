/**
 * One run's served actions (SPEC §4, §6): the context relays and tool calls share, the
 * abort that ends what is in flight when the run ends, and which relayed actions (HTTP,
 * MCP) are still unanswered — the segment-end callback's `in_flight`, whose outcome is
 * unknown. Made with the run's first action that needs an answer; a run that only
 * streams checkpoints never makes one.
 */
import type { Logger } from '../log';
import type { InFlightAction } from '../owner/owner-client';
import type { Action, ActionResponse } from '../workflow/contract';
import { errorAnswer, serveAction, type ActionContext } from './action-server';

/** The abort reason of a run's in-flight work; one shared instance (no stack trace per run). */
const RUN_ENDED = Object.freeze(new Error('run ended'));

/** Where answers go: the run's stream (WorkflowStream.respond). */
export interface Responder {
  /** Writes an answer to the service; false when the call can no longer take it. */
  respond(response: ActionResponse): boolean;
}

export class RunActions {
  private readonly abort = new AbortController();
  private readonly context: ActionContext;
  /** Relayed actions whose answer has not reached the service yet, by requestID. */
  private readonly unanswered = new Map<string, InFlightAction>();

  constructor(
    context: Omit<ActionContext, 'signal'>,
    private readonly responder: Responder,
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
    if (relayed) this.unanswered.set(relayed.request_id, relayed);
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

  /** The relayed actions unanswered now. */
  inFlight(): InFlightAction[] {
    return [...this.unanswered.values()];
  }

  /** The run has ended: what is in flight answers "request aborted" (if the call can still take it). */
  end(): void {
    this.abort.abort(RUN_ENDED);
  }

  /** Writes an answer; the action stays in flight unless the answer reached the stream. */
  private answer(response: ActionResponse): void {
    if (this.responder.respond(response)) this.unanswered.delete(response.requestID ?? '');
  }
}

/** What `in_flight` says of an action relayed to the owner or an MCP server; undefined for others. */
function inFlightEntry(action: Action): InFlightAction | undefined {
  const request_id = action.requestID ?? '';
  if (action.action === 'runHTTPRequest') return { kind: 'http', request_id, method: (action.runHTTPRequest?.method || 'GET').toUpperCase() };
  if (action.action === 'runMCPTool') return { kind: 'mcp', request_id, method: action.runMCPTool?.name ?? '' };
  return undefined;
}
