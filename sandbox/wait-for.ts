import type { EventEmitter } from 'node:events';

/**
 * Resolves when `predicate` holds, re-checked on every 'change' the simulator emits;
 * rejects after timeoutMs naming `what`. Shared by the simulators' waitFor().
 */
export function waitForChange(events: EventEmitter, who: string, predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
  if (predicate()) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const check = (): void => {
      if (!predicate()) return;
      cleanup();
      resolve();
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`${who}: timed out after ${timeoutMs} ms waiting for ${what}`));
    }, timeoutMs);
    const cleanup = (): void => {
      clearTimeout(timer);
      events.off('change', check);
    };
    events.on('change', check);
  });
}
