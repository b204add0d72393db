/**
 * The holder's end of a bridge (docs/spec.md §12): to the parked run that a connection on
 * another replica took over, this is that connection. The run's actions for the client go
 * to the socket side as `frame` messages; the client's events, its end and its loss come
 * back and reach the run as they would from a socket of this replica.
 *
 * Flow control (flow-control.ts): the socket side acknowledges the bytes it has written to its client. Past
 * HIGH_WATER_BYTES unacknowledged the run is told the connection is full and pauses
 * reading the service, as for a slow socket here — so neither replica, nor Redis between
 * them, ever holds more than that for one session; a client that never reads stalls the
 * run as a local one would (its write timeout).
 */
import type { ClientRun, Connection } from '../client-run';
import type { Close } from '../close-codes';
import { STOPS } from '../../run/stop-reasons';
import { Backpressure } from '../flow-control';
import type { TraceLink } from '../../observability/tracing';
import type { ClientEvent } from '../../workflow/contract';
import type { LateSink } from './late-answers';
import type { BridgeBody, BridgeHeader, LinkEnv, OrderedSender } from './protocol';
import type { BridgeBreakWhy } from '../words';

export class HolderLink implements Connection {
  private sent = 0;
  private readonly sender: OrderedSender;
  /** The last sequence number heard from the socket side (the claim was 1). */
  private heard = 1;
  /** Frames sent and not yet acknowledged by the socket side (flow-control.ts). */
  private readonly flow = new Backpressure();
  private gone = false;

  constructor(
    readonly id: string,
    /** The replica holding the socket. */
    readonly peer: string,
    private readonly client: ClientRun,
    readonly stallMs: number,
    private readonly env: LinkEnv,
    /** The span of the session that claimed the run (on the socket's replica). */
    private readonly claimedBy?: TraceLink,
  ) {
    this.sender = env.sender(peer, () => this.lost('send_failed'));
  }

  /** Answers the claim (with the run's span and id) and hands the parked run to this link: replayed frames follow the answer. */
  attach(): void {
    const { traceLink, runId } = this.client;
    this.post({ t: 'claimed', outcome: 'attached', ...(traceLink ? { tp: traceLink } : {}), ...(runId ? { run: runId } : {}) });
    this.client.attach(this, this.peer, this.claimedBy);
  }

  /** Connection: the run ended while this link served it: the socket side is told the close its end chose. */
  runEnded(close: Close | undefined): void {
    if (this.gone) return;
    this.post({ t: 'end', ...(close ? { code: close.code, reason: close.reason } : {}) });
    this.finish();
  }

  /** Where the client's answers go once the link is given up (late-answers.ts): the run's side, not this link. */
  get sink(): LateSink {
    return this.client.lateSink;
  }

  /** The last sequence number sent on this bridge (in order: none still waiting for Redis), and the last heard on it. */
  get sentSeq(): number {
    return this.sender.reportedSeq;
  }

  get heardSeq(): number {
    return this.heard;
  }

  /** Connection: one frame for the client, through the socket side. */
  sendFrame(frame: Buffer): 'ok' | 'full' | 'gone' {
    if (this.gone) return 'gone';
    const room = this.flow.add(frame.length);
    this.post({ t: 'frame' }, frame);
    return room ? 'ok' : 'full';
  }

  /** Connection: resolves once the socket side has written most of what it was sent (or the link is gone). */
  drained(): Promise<void> {
    return this.gone ? Promise.resolve() : this.flow.drained();
  }

  /** A message of this bridge from the socket side; one out of sequence gives the bridge up. */
  receive(header: BridgeHeader, data: Buffer | undefined): void {
    if (this.gone || !('s' in header)) return;
    // Sent again after a send that failed but reached Redis after all: read once.
    if (header.s <= this.heard) return;
    if (header.s !== this.heard + 1) {
      this.lost('gap');
      return;
    }
    this.heard = header.s;
    const served = this.client.servedOn(this);
    switch (header.t) {
      case 'event':
        if (served && data) this.client.fromClient(JSON.parse(data.toString()) as ClientEvent);
        break;
      case 'ack':
        this.flow.done(header.bytes);
        break;
      case 'stop':
        if (served) this.client.stop(header.reason);
        break;
      case 'lost':
        this.lost();
        break;
      default:
        break;
    }
  }

  /**
   * The connection on the other side is lost, or the bridge to it is (a gap, a failed
   * send, the replica silent or no longer listing it): the run is parked again for its
   * window — or, when it cannot be, its call cancelled as for a lost socket here.
   */
  lost(why?: BridgeBreakWhy): void {
    if (this.gone) return;
    if (why) this.env.broke(this, why);
    const served = this.client.servedOn(this);
    this.finish();
    if (served && !this.client.park()) this.client.stop(STOPS.client_gone);
  }

  /** Sends one message of this bridge, in order through a Redis outage (link-sender.ts). */
  private post(body: BridgeBody, data?: Buffer): void {
    this.sent += 1;
    void this.sender.post({ ...body, b: this.id, s: this.sent } as BridgeHeader, data);
  }

  private finish(): void {
    if (this.gone) return;
    this.gone = true;
    this.flow.wake();
    this.env.done(this);
  }
}
