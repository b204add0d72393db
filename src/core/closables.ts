/**
 * What a process made and must close, in the order it was made: each part's `create…()` adds
 * what it opened, and closeAll() closes them in reverse — a part is closed before anything it
 * was made with. Every step runs whatever the others do; what has not closed within the time
 * given is destroyed, so nothing keeps the process alive past it.
 */

/**
 * A part to close. `close()` is graceful and may wait (open connections, queued
 * commands); `destroy()` ends it at once, for when the time to close is spent.
 */
interface Closable {
  name: string;
  close(): Promise<void> | void;
  destroy?(): void;
}

export class Closables {
  private readonly parts: Closable[] = [];

  /** Adds `part`, closed with `close` (and destroyed with `destroy` when closing takes too long); returns it. */
  add<T>(name: string, part: T, close: (part: T) => Promise<void> | void, destroy?: (part: T) => void): T {
    this.parts.push({ name, close: () => close(part), ...(destroy ? { destroy: () => destroy(part) } : {}) });
    return part;
  }

  /**
   * Closes every part in the reverse of the order it was added; what has not closed within
   * `withinMs` (a hung owner, a paused Redis) is destroyed.
   */
  async closeAll(withinMs: number): Promise<'closed' | 'forced'> {
    const pending = [...this.parts].reverse();
    const graceful = (async () => {
      for (const part of [...pending]) {
        try {
          await part.close();
        } catch {
          // Closing is best effort: the process is leaving.
        }
        pending.shift();
      }
    })();
    let timer: NodeJS.Timeout | undefined;
    const spent = new Promise<'forced'>((resolve) => (timer = setTimeout(() => resolve('forced'), withinMs)));
    const outcome = await Promise.race([graceful.then(() => 'closed' as const), spent]);
    clearTimeout(timer);
    if (outcome === 'forced') {
      for (const part of pending) {
        try {
          part.destroy?.();
        } catch {
          // As above.
        }
      }
    }
    return outcome;
  }
}
