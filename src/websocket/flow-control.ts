/**
 * Flow control toward a WebSocket client, one rule for a socket here (connection.ts) and a
 * socket on another replica reached through a bridge (bridge/holder-link.ts): past
 * HIGH_WATER_BYTES not yet written (or not yet acknowledged) the run is told the client is
 * full and pauses reading the service; it is woken once half of that is through.
 */

/** Bytes queued to a client before it counts as not reading (the run pauses the service). */
const HIGH_WATER_BYTES = 1024 * 1024;

/** The bytes on their way to one client, and who waits for them to drain. */
export class Backpressure {
  private pending = 0;
  private waiters: Array<() => void> | undefined;

  /** `bytes` more are on their way; true while under the high-water mark. */
  add(bytes: number): boolean {
    this.pending += bytes;
    return this.pending <= HIGH_WATER_BYTES;
  }

  /** `bytes` went through (written, or acknowledged); wakes the waiters once half the mark is. */
  done(bytes: number): void {
    this.pending = Math.max(0, this.pending - bytes);
    if (this.pending <= HIGH_WATER_BYTES / 2) this.wake();
  }

  /** Resolves once the client has taken most of what it was sent (at once when it has). */
  drained(): Promise<void> {
    if (this.pending <= HIGH_WATER_BYTES / 2) return Promise.resolve();
    return new Promise((resolve) => (this.waiters ??= []).push(resolve));
  }

  /** Wakes every waiter (the connection is gone: nothing more will drain). */
  wake(): void {
    const waiters = this.waiters;
    this.waiters = undefined;
    for (const wake of waiters ?? []) wake();
  }
}
