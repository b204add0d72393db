/**
 * The socket side of a bridge (docs/spec.md §12): a connection on this replica whose run is
 * parked on another. To the session (connection.ts) it stands where the run would: the
 * client's events go to the holder, and so do its end (a stop) and its loss (park); the
 * holder's frames are written to the socket, and each written byte acknowledged so the
 * holder may send more (holder-link.ts).
 *
 * How it ends: the holder's `end` carries the close the run's end chose (close-codes.ts); a
 * bridge that breaks — a gap, a failed send, a holder silent past its deadline or no
 * longer listing it, no answer to the claim — closes the socket with 1012, and the
 * client's reconnect finds the run parked again (or, once the holder's lease has expired,
 * starts it anew).
 */
import { RUN_UNREACHABLE, SERVICE_RESTART, type Close } from '../close-codes';
import type { StopReason } from '../../run/stop-reasons';
import type { TraceLink } from '../../observability/tracing';
import type { ClientEvent } from '../../workflow/contract';
import type { BridgeBody, BridgeHeader, ClaimOutcome, LinkEnv, OrderedSender } from './protocol';
import type { BridgeBreakWhy } from '../words';

/** Bytes written to the client before the holder is told (and at every beat, whatever is left). */
const ACK_EVERY_BYTES = 128 * 1024;

/** The socket the link writes to: the session's. */
export interface BridgedSocket {
  /** One frame for the client; `written` once it is on the wire. */
  sendFrame(frame: Buffer, written?: () => void): 'ok' | 'full' | 'gone';
}

/** What the session learns when the run ends: the close to send (undefined: cut the socket off). */
export interface LinkEnd {
  close: Close | undefined;
}

type State = 'claiming' | 'attached' | 'done';

export class SocketLink {
  private state: State = 'claiming';
  private sent = 0;
  private readonly sender: OrderedSender;
  private heard = 0;
  private unreported = 0;
  /** The socket closed before the claim was answered: an attach is handed straight back. */
  private abandoned = false;
  private claimTimer: NodeJS.Timeout | undefined;
  private settleOutcome!: (outcome: ClaimOutcome | 'unreachable') => void;
  private settleEnd!: (end: LinkEnd) => void;
  /** How the claim was answered; 'unreachable' when the holder did not answer in time. */
  readonly outcome = new Promise<ClaimOutcome | 'unreachable'>((resolve) => (this.settleOutcome = resolve));
  /** The run's end as the holder saw it, or the bridge's. */
  readonly ended = new Promise<LinkEnd>((resolve) => (this.settleEnd = resolve));
  /** Once attached: the run's span and id, as the holder named them. */
  runLink: TraceLink | undefined;
  runId: string | undefined;

  constructor(
    readonly id: string,
    /** The replica holding the run. */
    readonly holder: string,
    private readonly socket: BridgedSocket,
    private readonly env: LinkEnv,
  ) {
    this.sender = env.sender(holder, () => this.broken('send_failed'));
  }

  /** Whether the holder attached the run to this link and it is not done. */
  get attached(): boolean {
    return this.state === 'attached';
  }

  /**
   * Whether a beat lists this link: attached, or its claim still out — the holder may have
   * attached it already, and a beat that left it out would make the holder give it up
   * (peer_dropped) before its answer arrives here.
   */
  get listed(): boolean {
    return this.state !== 'done';
  }

  /** The last sequence number sent on this bridge (in order: none still waiting for Redis), and the last heard on it. */
  get sentSeq(): number {
    return this.sender.reportedSeq;
  }

  get heardSeq(): number {
    return this.heard;
  }

  /**
   * Asks the holder for its parked run; unanswered within `timeoutMs`, the holder counts as
   * unreachable. `by`: the session's span, which the run's will link to.
   */
  claim(workflowId: string, actor: string | undefined, input: boolean, timeoutMs: number, by?: TraceLink): void {
    void this.post({ t: 'claim', wf: workflowId, ...(actor !== undefined ? { actor } : {}), input, ...(by ? { tp: by } : {}) });
    this.claimTimer = setTimeout(() => {
      if (this.state !== 'claiming') return;
      this.env.broke(this, 'unanswered');
      this.finish();
      this.settleOutcome('unreachable');
    }, timeoutMs);
  }

  /** The session's socket closed while the claim was out: if it attaches, the run is parked again at once. */
  abandon(): void {
    this.abandoned = true;
    if (this.state === 'attached') this.park();
  }

  /** The client's event, for the holder's run. */
  fromClient(event: ClientEvent): boolean {
    if (this.state !== 'attached') return false;
    void this.post({ t: 'event' }, Buffer.from(JSON.stringify(event)));
    return true;
  }

  /** The client ended the session (a close frame, a fault of its own): the holder stops the run for `reason`. */
  stop(reason: StopReason): void {
    if (this.state !== 'attached') return;
    void this.post({ t: 'stop', reason });
    this.finish();
    this.settleEnd({ close: undefined });
  }

  /** The connection was lost: the holder parks the run again. Always true: parking is the holder's to decide. */
  park(): boolean {
    if (this.state === 'attached') {
      void this.post({ t: 'lost' });
      this.finish();
      this.settleEnd({ close: undefined });
    }
    return true;
  }

  /**
   * This replica drains: the run goes back to its holder, parked (its socket closed 1012 by
   * the session first, so its client reconnects elsewhere — no resume, and nothing it sent
   * before lost). Resolves once the holder was told.
   */
  async handBack(): Promise<void> {
    if (this.state !== 'attached') return;
    const told = this.post({ t: 'lost' });
    this.finish();
    await told;
    this.settleEnd({ close: SERVICE_RESTART });
  }

  /** A message of this bridge from the holder. */
  receive(header: BridgeHeader, data: Buffer | undefined): void {
    if (this.state === 'done' || !('s' in header)) return;
    // Sent again after a send that failed but reached Redis after all: read once.
    if (header.s <= this.heard) return;
    if (header.s !== this.heard + 1) {
      this.broken('gap');
      return;
    }
    this.heard = header.s;
    switch (header.t) {
      case 'claimed':
        clearTimeout(this.claimTimer);
        if (header.outcome !== 'attached') {
          this.finish();
          this.settleOutcome(header.outcome);
          return;
        }
        this.state = 'attached';
        this.runLink = header.tp;
        this.runId = header.run;
        this.settleOutcome('attached');
        if (this.abandoned) this.park();
        break;
      case 'frame':
        if (data && this.state === 'attached') {
          const bytes = data.length;
          this.socket.sendFrame(data, () => this.written(bytes));
        }
        break;
      case 'end':
        this.finish();
        this.settleEnd({ close: header.code !== undefined ? { code: header.code, reason: header.reason ?? '' } : undefined });
        break;
      default:
        break;
    }
  }

  /** The bridge broke: the holder is told (when it can be) and the client closed 1012. */
  broken(why: BridgeBreakWhy): void {
    if (this.state === 'done') return;
    this.env.broke(this, why);
    const wasClaiming = this.state === 'claiming';
    if (this.state === 'attached') void this.post({ t: 'lost' });
    clearTimeout(this.claimTimer);
    this.finish();
    if (wasClaiming) this.settleOutcome('unreachable');
    else this.settleEnd({ close: RUN_UNREACHABLE });
  }

  /** Every beat: what was written and not yet reported. */
  flushAck(): void {
    if (this.state !== 'attached' || this.unreported === 0) return;
    const bytes = this.unreported;
    this.unreported = 0;
    void this.post({ t: 'ack', bytes });
  }

  private written(bytes: number): void {
    this.unreported += bytes;
    if (this.unreported >= ACK_EVERY_BYTES) this.flushAck();
  }

  /** Sends one message of this bridge, in order through a Redis outage (link-sender.ts); resolves whether it was sent. */
  private post(body: BridgeBody, data?: Buffer): Promise<boolean> {
    this.sent += 1;
    return this.sender.post({ ...body, b: this.id, s: this.sent } as BridgeHeader, data);
  }

  private finish(): void {
    if (this.state === 'done') return;
    this.state = 'done';
    clearTimeout(this.claimTimer);
    this.env.done(this);
  }
}
