/** Waiting with a deadline, for everything a stack starts and a driver polls. */
import { setTimeout as sleep } from 'node:timers/promises';

/** Polls `check` every `everyMs` until it returns true; throws after timeoutMs naming `what`. */
export async function waitUntil(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string, everyMs = 50): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** `promise`, or a rejection naming `what` after timeoutMs (the timer never outlives it). */
export async function withTimeout<T>(promise: Promise<T>, timeoutMs: number, what: string | (() => string)): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
