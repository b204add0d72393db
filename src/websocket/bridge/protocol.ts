/**
 * What two replicas say to each other about a bridged session (docs/spec.md §12): the
 * replica holding the client's socket (the *socket side*) and the replica holding its
 * run (the *holder*). Every message but a beat belongs to one bridge and carries that
 * bridge's sequence number in its direction, so a message lost on the way (a Redis
 * restart, a failover) is seen at the next one, and the bridge is given up rather than
 * left with a hole in it.
 *
 *   socket side → holder                      holder → socket side
 *   claim   the resume start's workflow,      claimed  attached | released | none
 *           actor, whether it carries input   frame    an Action for the client (bytes)
 *   event   a client event (JSON)             end      the run ended: the close to send
 *   ack     bytes written to the client                 (none: cut the socket off)
 *   stop    the client's end as a StopReason
 *   lost    the connection was lost: park
 *
 *   A claim carries the reconnecting session's span (`tp`, its W3C traceparent) and an
 *   attached answer the run's span and id, so each side links to the other (docs/spec.md §13).
 *
 *   beat (both ways, per replica pair): the bridges the sender still has with the
 *   receiver, and the last sequence number it sent on each. A bridge the other side no
 *   longer lists is gone there; one whose last message was not heard lost it (a gap at
 *   the tail, which no later message would reveal).
 *
 * A send Redis refused is sent again, in order, once Redis is back (link-sender.ts); a
 * message that arrives twice (sent again after all) is read once.
 */
import type { StopReason } from '../../run/stop-reasons';
import type { BridgeBreakWhy } from '../words';

/** How a claim was answered. attached: the run is the socket's; released: the parked run was stopped (start anew); none: nothing parked here. */
export type ClaimOutcome = 'attached' | 'released' | 'none';

interface OfBridge {
  /** The bridge: made by the socket side, unique across replicas and restarts. */
  b: string;
  /** Its sequence number in this direction, from 1. */
  s: number;
}

export type BridgeHeader =
  | (OfBridge & { t: 'claim'; wf: string; actor?: string; input: boolean; tp?: string })
  | (OfBridge & { t: 'claimed'; outcome: ClaimOutcome; tp?: string; run?: string })
  | (OfBridge & { t: 'frame' })
  | (OfBridge & { t: 'event' })
  | (OfBridge & { t: 'ack'; bytes: number })
  | (OfBridge & { t: 'stop'; reason: StopReason })
  | (OfBridge & { t: 'lost' })
  | (OfBridge & { t: 'end'; code?: number; reason?: string })
  | {
      t: 'beat';
      holding: string[];
      sockets: string[];
      /** The last sequence number sent on each listed bridge, in the lists' order: one the receiver has not heard was lost on the way. */
      holdingSent?: number[];
      socketsSent?: number[];
    };

/** A message of one bridge less its bridge id and sequence number, which the link fills in. */
export type BridgeBody = BridgeHeader extends infer H ? (H extends OfBridge ? Omit<H, 'b' | 's'> : never) : never;

/** One bridge's messages in one direction, in order through a Redis outage (link-sender.ts). */
export interface OrderedSender {
  /** The last sequence number sent in order (what a beat may say was sent). */
  readonly reportedSeq: number;
  /** Sends after every message posted before; resolves whether it was sent (false: given up). */
  post(header: BridgeHeader, data?: Buffer): Promise<boolean>;
}

/** What a link needs of the process's bridges. */
export interface LinkEnv {
  /** Sends through the process's transport (counted). */
  send(replica: string, header: BridgeHeader, data?: Buffer): Promise<void>;
  /** A link's ordered sender to `replica` (link-sender.ts), whose giving up is told to `onGiveUp`. */
  sender(replica: string, onGiveUp: () => void): OrderedSender;
  /** Told once, when the link is done (it is forgotten). */
  done(link: { readonly id: string }): void;
  /** Told when the link gives its bridge up. */
  broke(link: { readonly id: string }, why: BridgeBreakWhy): void;
}

/** A message as it arrives: who sent it, what it says, and its bytes (a frame, an event). */
export interface BridgeMessage {
  from: string;
  header: BridgeHeader;
  data?: Buffer;
}

/** What carries bridge messages between replicas (inbox.ts: Redis Streams). */
export interface BridgeTransport {
  /** This replica's name (LONGRUN_REPLICA_ID): where the others send to. */
  readonly replicaId: string;
  /** Appends a message to `replica`'s inbox, in order after this process's earlier ones to it; rejects when it could not. */
  send(replica: string, header: BridgeHeader, data?: Buffer): Promise<void>;
  /** Every message for this replica, in each sender's order. */
  onMessage(handler: (message: BridgeMessage) => void): void;
  /**
   * Whether this replica reaches the store the messages go through now. While it does not,
   * no peer can be heard, and a peer's silence says nothing about the peer.
   */
  readonly reachable: boolean;
  /** Stops reading; sends still in flight are answered first. */
  close(): Promise<void>;
}
