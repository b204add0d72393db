/**
 * Detached acceptance (SPEC §3b): after the startRequest is sent, wait for the first
 * Action or acceptWaitMs, whichever comes first. A successful send is not acceptance:
 * quota and invalid-argument rejections arrive on receive, and end the stream first.
 */
import type { AcceptedOn } from '../vocabulary';
import type { StreamEnd } from '../workflow/workflow-stream';

export type Acceptance =
  | { kind: 'accepted'; on: AcceptedOn }
  | { kind: 'ended'; end: StreamEnd }
  | { kind: 'stopped' };

/** Waits for acceptance; a stop signal seen first wins (the execute answers 409 STOPPED). */
export async function awaitAcceptance(
  run: { firstAction: Promise<void>; streamEnded: Promise<StreamEnd>; stopSignalled: Promise<void> },
  acceptWaitMs: number,
): Promise<Acceptance> {
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<Acceptance>((resolve) => {
    timer = setTimeout(() => resolve({ kind: 'accepted', on: 'accept_wait_elapsed' }), acceptWaitMs);
  });
  try {
    return await Promise.race<Acceptance>([
      run.stopSignalled.then(() => ({ kind: 'stopped' })),
      run.firstAction.then(() => ({ kind: 'accepted', on: 'first_action' })),
      run.streamEnded.then((end) => ({ kind: 'ended', end })),
      waited,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
