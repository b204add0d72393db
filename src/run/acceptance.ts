/**
 * Detached acceptance (docs/spec.md §3b): after the startRequest is on the stream, wait for the
 * first Action or acceptWaitMs, whichever comes first. A successful send is not
 * acceptance: quota and invalid-argument rejections arrive on receive, and end the
 * stream first. A stop signal seen first wins (the execute answers 409 STOPPED).
 *
 * The wait listens through a listener the run drops once acceptance is decided, rather
 * than racing promises that live as long as the run: a `.then` on a run-long promise
 * would keep the race's closures (and its timer) for the whole run.
 */
import type { AcceptedOn } from './words';
import type { StreamEnd } from '../workflow/workflow-stream';

export type Acceptance = { kind: 'accepted'; on: AcceptedOn } | { kind: 'ended'; end: StreamEnd } | { kind: 'stopped' };

/** What a run tells the acceptance wait; each at most once. */
export interface AcceptanceListener {
  firstAction(): void;
  stopped(): void;
  ended(end: StreamEnd): void;
}

/** A run that can be watched for acceptance; the returned function drops the listener. */
export interface AcceptanceSource {
  watchAcceptance(listener: AcceptanceListener): () => void;
}

export function awaitAcceptance(run: AcceptanceSource, acceptWaitMs: number): Promise<Acceptance> {
  return new Promise((resolve) => {
    let decided = false;
    let drop: (() => void) | undefined;
    const decide = (acceptance: Acceptance): void => {
      if (decided) return;
      decided = true;
      clearTimeout(timer);
      drop?.();
      resolve(acceptance);
    };
    const timer = acceptWaitMs > 0 ? setTimeout(() => decide({ kind: 'accepted', on: 'accept_wait_elapsed' }), acceptWaitMs) : undefined;
    drop = run.watchAcceptance({
      firstAction: () => decide({ kind: 'accepted', on: 'first_action' }),
      stopped: () => decide({ kind: 'stopped' }),
      ended: (end) => decide({ kind: 'ended', end }),
    });
    if (decided) drop();
    // The wait was spent before it began (MCP discovery took all of it): what had happened by
    // now decided above; anything later is not waited for — a 0 ms timer would race the first
    // action and answer either way.
    else if (timer === undefined) decide({ kind: 'accepted', on: 'accept_wait_elapsed' });
  });
}
