/**
 * Detached acceptance (SPEC §3b): after the startRequest is sent, wait for the first
 * Action or acceptWaitMs, whichever comes first. A successful send is not acceptance:
 * quota and invalid-argument rejections arrive on receive, and end the stream first.
 */
import type { StreamEnd } from './workflow-stream';

export type Acceptance =
  | { kind: 'accepted'; on: 'first_action' | 'accept_wait_elapsed' }
  | { kind: 'ended'; end: StreamEnd };

export async function awaitAcceptance(
  run: { firstAction: Promise<void>; streamEnded: Promise<StreamEnd> },
  acceptWaitMs: number,
): Promise<Acceptance> {
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<Acceptance>((resolve) => {
    timer = setTimeout(() => resolve({ kind: 'accepted', on: 'accept_wait_elapsed' }), acceptWaitMs);
  });
  try {
    return await Promise.race<Acceptance>([
      run.firstAction.then(() => ({ kind: 'accepted', on: 'first_action' })),
      run.streamEnded.then((end) => ({ kind: 'ended', end })),
      waited,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
