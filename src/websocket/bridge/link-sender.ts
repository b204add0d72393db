/**
 * One bridge's messages in one direction, in order, through a Redis outage (docs/spec.md §12).
 *
 * Messages go out as they come, on the process's one connection, which keeps their order.
 * A send that fails (Redis restarting, a failover under way) is not the bridge's end: it,
 * and every message after it, wait in order and are sent again every `retryMs` until Redis
 * takes them — so a client's answer that reached this replica during the outage still
 * reaches the run, instead of the bridge breaking and the action being sent to the client
 * again. Only a send still failing `giveUpAfterMs` after the first failure gives up (the
 * peer's silence gives it up sooner, bridges.ts), or more than MAX_WAITING_BYTES waiting (a
 * client that goes on sending through the outage: the holder's flow control bounds what it
 * sends, nothing bounds a client but this). A message Redis took and then lost (a
 * restart before the peer read it) is a gap, which the receiving side sees.
 *
 * What the beats report as sent (`reportedSeq`) is what went out in order: never a message
 * still waiting, which the peer would otherwise count as lost.
 */
import type { BridgeHeader, OrderedSender } from './protocol';

/** Bytes of messages a bridge may hold waiting for Redis: far past a holder's flow-control window (1 MiB), and a client's answers of a few seconds. */
export const MAX_WAITING_BYTES = 8 * 1024 * 1024;

interface Waiting {
  header: BridgeHeader;
  data: Buffer | undefined;
  /** Resolved true once sent, false when the sender gave up. */
  settle: (sent: boolean) => void;
}

export class LinkSender implements OrderedSender {
  /** Messages waiting for Redis, in order; set from the first failure until all are sent. */
  private waiting: Waiting[] | undefined;
  private waitingBytes = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private failingSince = 0;
  private posted = 0;
  private done = false;

  constructor(
    private readonly send: (header: BridgeHeader, data: Buffer | undefined) => Promise<void>,
    private readonly retryMs: number,
    private readonly giveUpAfterMs: number,
    /** Told once, when a send has failed for giveUpAfterMs (or too much waits). */
    private readonly onGiveUp: () => void,
  ) {}

  /** The last sequence number sent in order (what a beat may say was sent). */
  get reportedSeq(): number {
    const first = this.waiting?.[0];
    return first && 's' in first.header ? first.header.s - 1 : this.posted;
  }

  /** Sends `header` after every message posted before it; resolves whether it was sent (false: given up). */
  post(header: BridgeHeader, data?: Buffer): Promise<boolean> {
    if ('s' in header) this.posted = header.s;
    if (this.done) return Promise.resolve(false);
    return new Promise((settle) => {
      const item: Waiting = { header, data, settle };
      if (this.waiting) {
        this.hold(item);
        return;
      }
      this.send(header, data).then(
        () => settle(true),
        () => this.wait(item),
      );
    });
  }

  /** The link is done: nothing more is sent, and what waits is given up. */
  close(): void {
    this.done = true;
    clearTimeout(this.retryTimer);
    const waiting = this.waiting ?? [];
    this.waiting = undefined;
    this.waitingBytes = 0;
    for (const item of waiting) item.settle(false);
  }

  /** A failed send: it waits, in order, with the ones that failed after it. */
  private wait(item: Waiting): void {
    if (this.done) return item.settle(false);
    if (this.waiting) {
      // Failures come back in the order the sends went out (one connection): keep it.
      this.hold(item);
      this.waiting?.sort((a, b) => ('s' in a.header && 's' in b.header ? a.header.s - b.header.s : 0));
      return;
    }
    this.waiting = [];
    this.failingSince = Date.now();
    this.hold(item);
    if (!this.done) this.schedule();
  }

  /** Keeps `item` waiting; past MAX_WAITING_BYTES the bridge is given up instead. */
  private hold(item: Waiting): void {
    this.waitingBytes += item.data?.length ?? 0;
    if (this.waitingBytes > MAX_WAITING_BYTES) {
      item.settle(false);
      this.onGiveUp();
      this.close();
      return;
    }
    this.waiting?.push(item);
  }

  private schedule(): void {
    this.retryTimer = setTimeout(() => void this.retry(), this.retryMs);
    this.retryTimer.unref();
  }

  /** Sends what waits, one at a time and in order, until all are through or one fails again. */
  private async retry(): Promise<void> {
    while (!this.done && this.waiting && this.waiting.length > 0) {
      const item = this.waiting[0] as Waiting;
      try {
        await this.send(item.header, item.data);
      } catch {
        if (Date.now() - this.failingSince >= this.giveUpAfterMs) {
          this.onGiveUp();
          this.close();
          return;
        }
        this.schedule();
        return;
      }
      this.waiting?.shift();
      this.waitingBytes -= item.data?.length ?? 0;
      item.settle(true);
    }
    this.waiting = undefined;
    this.waitingBytes = 0;
  }
}
