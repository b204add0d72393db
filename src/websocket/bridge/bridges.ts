/**
 * This process's bridges (docs/spec.md §12): a client whose reconnect lands on a replica
 * that does not hold its parked run is served there, its socket bridged to the holder
 * through Redis (inbox.ts). Here: where a run is parked (its run record names the
 * holder), the claim, the messages routed to each bridge's link (holder-link.ts on the
 * holder, socket-link.ts on the socket's replica), and one beat per replica pair.
 *
 * Who attaches: the holder decides, one claim at a time in its event loop — the same loop
 * where a re-attach on the holder itself is decided — so of two connections racing for
 * one parked run, on one replica or two, exactly one gets it; the others find it no
 * longer parked, and start as any other session (the lock refuses them: 1013).
 *
 * Liveness: each side sends the other, every beat, the bridges it still has with it. A
 * bridge the other side no longer lists, or a replica not heard from within the pong
 * timeout (a SIGKILL, a partition), is given up: the holder parks the run again, the
 * socket's replica closes its client 1012 and the reconnect finds the run parked.
 */
import { randomBytes } from 'node:crypto';
import type { CoordinationBackend } from '../../coordination/backend';
import type { ClientRun, ParkedRuns } from '../client-run';
import { correlation, type Logger } from '../../core/log';
import type { TraceLink } from '../../observability/tracing';
import { HolderLink } from './holder-link';
import { LateAnswers } from './late-answers';
import { LinkSender } from './link-sender';
import type { BridgeHeader, BridgeMessage, BridgeTransport, LinkEnv } from './protocol';
import type { ClientEvent } from '../../workflow/contract';
import type { WebSocketMetrics } from '../metrics';
import type { BridgeBreakWhy } from '../words';
import { SocketLink, type BridgedSocket } from './socket-link';

export interface BridgeSettings {
  /** How often each side lists its bridges to the other, and acknowledges what it wrote. */
  beatMs: number;
  /** A replica not heard from this long is gone: every bridge with it is given up. */
  deadAfterMs: number;
  /** How long a claim waits for the holder's answer (none: the holder is unreachable, 1012). */
  claimTimeoutMs: number;
  /** How long a bridged client may stall the run (LONGRUN_WS_WRITE_TIMEOUT_MS). */
  stallMs: number;
}

export interface BridgeDeps {
  transport: BridgeTransport;
  backend: CoordinationBackend;
  /** This process's parked runs (the WebSocket route's). */
  parked: ParkedRuns;
  metrics: WebSocketMetrics;
  logger: Logger;
  settings: BridgeSettings;
}

export class Bridges {
  /** Links to runs held here, by bridge id. */
  private readonly holders = new Map<string, HolderLink>();
  /** Links of sockets held here, by bridge id. */
  private readonly sockets = new Map<string, SocketLink>();
  /** When each replica this one has a bridge with was last heard from (a replica gone with its bridges is forgotten). */
  private readonly heard = new Map<string, number>();
  /** Bridges with each replica, both sides together: who is worth hearing from. */
  private readonly linksByPeer = new Map<string, number>();
  /** When this replica last could not reach Redis: no peer is silent for longer than it has been heard of since. */
  private unreachableAt = 0;
  /** Given-up holder links' runs, for a client's answer the socket side sent before it learnt the bridge was gone (late-answers.ts). */
  private readonly late: LateAnswers;
  private beat: NodeJS.Timeout | undefined;
  private closed = false;
  /** The replicas beaten last time: one that has no bridge left with us is told so once (an empty list). */
  private beaten = new Set<string>();
  /** Bridge ids: this process's, never reused by a later one of the same replica name. */
  private readonly prefix = `${randomBytes(4).toString('hex')}.`;
  private next = 0;
  private readonly env: LinkEnv;

  constructor(private readonly deps: BridgeDeps) {
    const { transport, metrics } = deps;
    // A message of a given-up bridge is late by at most its sender's retries (given up after
    // deadAfterMs) and a beat or two of delivery; twice the deadline is a margin, not a bound that matters.
    this.late = new LateAnswers(2 * deps.settings.deadAfterMs + 2 * deps.settings.beatMs);
    const send = (replica: string, header: BridgeHeader, data?: Buffer): Promise<void> => {
      metrics.bridgeMessage(header.t);
      return transport.send(replica, header, data);
    };
    this.env = {
      send,
      // A send Redis refused goes again every beat; one refused as long as a peer may stay silent gives its bridge up.
      sender: (replica, onGiveUp) => new LinkSender((header, data) => send(replica, header, data), deps.settings.beatMs, deps.settings.deadAfterMs, onGiveUp),
      done: (link) => this.forget(link.id),
      broke: (link, why: BridgeBreakWhy) => {
        metrics.bridgeBroke(why);
        deps.logger.info({ bridge: link.id, why }, 'bridge given up');
      },
    };
    transport.onMessage((message) => {
      try {
        this.route(message);
      } catch (err) {
        // The message is lost to its bridge (the next one, or a beat, shows the gap); the others go on.
        deps.logger.error({ err, from: message.from, kind: message.header.t }, 'bridge message could not be handled');
      }
    });
  }

  get replicaId(): string {
    return this.deps.transport.replicaId;
  }

  /** Bridges held now, by side. */
  get size(): { holder: number; socket: number } {
    return { holder: this.holders.size, socket: this.sockets.size };
  }

  /** What this process holds for its bridges, entry by entry (/debug/structures). */
  get held(): { holders: number; sockets: number; late_answers: number; peers_heard: number; peers_beaten: number; beating: number } {
    return {
      holders: this.holders.size,
      sockets: this.sockets.size,
      late_answers: this.late.size,
      peers_heard: this.heard.size,
      peers_beaten: this.beaten.size,
      beating: this.beat ? 1 : 0,
    };
  }

  /**
   * The replica where `workflowId`'s run is parked, when it is another: what the run
   * record says. Undefined when none is parked, or it is parked here. Rejects when Redis
   * cannot tell (CoordinationError).
   */
  async parkedElsewhere(workflowId: string): Promise<string | undefined> {
    const record = await this.deps.backend.readRunRecord(workflowId);
    return record && record.state === 'parked' && record.replica !== this.replicaId ? record.replica : undefined;
  }

  /**
   * Asks `holder` for the parked run of `workflowId`, for `socket` (whose session span is
   * `by`); the link's outcome says how it was answered.
   */
  claim(holder: string, workflowId: string, actor: string | undefined, carriesInput: boolean, socket: BridgedSocket, by?: TraceLink): SocketLink {
    const link = new SocketLink(`${this.prefix}${(this.next++).toString(36)}`, holder, socket, this.env);
    this.sockets.set(link.id, link);
    this.deps.metrics.bridgeOpened('socket');
    this.linked(holder, 1);
    this.heard.set(holder, Date.now());
    this.beatOn();
    link.claim(workflowId, actor, carriesInput, this.deps.settings.claimTimeoutMs, by);
    return link;
  }

  /** Draining: every socket held here for a run elsewhere goes back to its holder, parked (its client is closed 1012). */
  async handBackAll(): Promise<void> {
    await Promise.all([...this.sockets.values()].map((link) => link.handBack()));
  }

  /** Stops beating; messages in flight are sent first. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.beat);
    this.beat = undefined;
    await this.deps.transport.close();
  }

  private route({ from, header, data }: BridgeMessage): void {
    // Only a replica we have bridges with is worth remembering: its silence gives them up.
    if (this.linksByPeer.has(from)) this.heard.set(from, Date.now());
    if (header.t === 'beat') {
      this.onBeat(from, header);
      return;
    }
    if (header.t === 'claim') {
      this.onClaim(from, header);
      return;
    }
    const holder = this.holders.get(header.b);
    if (holder) {
      if (holder.peer === from) holder.receive(header, data);
      return;
    }
    if (this.late.has(header.b)) {
      if (header.t === 'event' && data) this.late.receive(header.b, from, JSON.parse(data.toString()) as ClientEvent);
      return;
    }
    const socket = this.sockets.get(header.b);
    if (socket && socket.holder === from) socket.receive(header, data);
  }

  /** A claim from another replica's socket: attach, release (stop the parked run, then the socket starts anew) or none. */
  private onClaim(from: string, claim: Extract<BridgeHeader, { t: 'claim' }>): void {
    if (claim.s !== 1 || this.holders.has(claim.b)) return;
    const answer = (outcome: 'released' | 'none'): void => {
      this.env.send(from, { t: 'claimed', b: claim.b, s: 1, outcome }).catch(() => undefined);
    };
    const run: ClientRun | undefined = this.deps.parked.get(claim.wf);
    if (!run) {
      answer('none');
      return;
    }
    if (!run.resumableBy(claim.actor, claim.input)) {
      void run.stopParked('taken_over').then(() => answer('released'));
      return;
    }
    const link = new HolderLink(claim.b, from, run, this.deps.settings.stallMs, this.env, claim.tp);
    this.deps.logger.info(
      { ...correlation(run.requestId), workflow_id: claim.wf, run_id: run.runId, socket_replica: from, bridge: claim.b },
      'parked run re-attached to a socket on another replica',
    );
    this.holders.set(link.id, link);
    this.deps.metrics.bridgeOpened('holder');
    this.linked(from, 1);
    this.heard.set(from, Date.now());
    this.beatOn();
    link.attach();
  }

  /**
   * The other side's list: a bridge of ours with it that it no longer has is gone; one whose
   * last message (sent before this beat, on the same stream) we have not heard lost it.
   */
  private onBeat(from: string, beat: Extract<BridgeHeader, { t: 'beat' }>): void {
    const sockets = new Map(beat.sockets.map((id, i) => [id, beat.socketsSent?.[i] ?? 0]));
    const holding = new Map(beat.holding.map((id, i) => [id, beat.holdingSent?.[i] ?? 0]));
    for (const link of [...this.holders.values()]) {
      if (link.peer !== from) continue;
      const sent = sockets.get(link.id);
      if (sent === undefined) link.lost('peer_dropped');
      else if (link.heardSeq < sent) link.lost('gap');
    }
    for (const link of [...this.sockets.values()]) {
      if (link.holder !== from || !link.attached) continue;
      const sent = holding.get(link.id);
      if (sent === undefined) link.broken('peer_dropped');
      else if (link.heardSeq < sent) link.broken('gap');
    }
  }

  private beatOn(): void {
    if (this.beat || this.closed) return;
    this.beat = setInterval(() => this.tick(), this.deps.settings.beatMs);
    this.beat.unref();
  }

  /** Every beat: replicas gone silent lose their bridges; the others are sent our list and our acknowledgements. */
  private tick(): void {
    const now = Date.now();
    // Our own Redis outage (a restart, a failover): nobody could be heard, so nobody is silent yet.
    if (!this.deps.transport.reachable) this.unreachableAt = now;
    type Lists = { holding: string[]; sockets: string[]; holdingSent: number[]; socketsSent: number[] };
    const peers = new Map<string, Lists>();
    const of = (peer: string): Lists => {
      let lists = peers.get(peer);
      if (!lists) peers.set(peer, (lists = { holding: [], sockets: [], holdingSent: [], socketsSent: [] }));
      return lists;
    };
    for (const link of this.holders.values()) {
      const lists = of(link.peer);
      lists.holding.push(link.id);
      lists.holdingSent.push(link.sentSeq);
    }
    for (const link of this.sockets.values()) {
      if (!link.listed) continue;
      const lists = of(link.holder);
      lists.sockets.push(link.id);
      lists.socketsSent.push(link.sentSeq);
    }
    for (const peer of this.beaten) of(peer);
    // Told once: a peer with nothing left is not carried into the next beat (it would be beaten for ever).
    this.beaten = new Set([...peers].filter(([, lists]) => lists.holding.length + lists.sockets.length > 0).map(([peer]) => peer));
    for (const [peer, lists] of peers) {
      if (now - Math.max(this.heard.get(peer) ?? now, this.unreachableAt) > this.deps.settings.deadAfterMs) {
        const bridges = lists.holding.length + lists.sockets.length;
        this.beaten.delete(peer);
        if (bridges === 0) continue;
        this.deps.logger.warn({ replica: peer, bridges }, 'bridge peer silent: its bridges are given up');
        for (const id of lists.holding) this.holders.get(id)?.lost('peer_silent');
        // A claim still out is left to its own deadline (counted `unanswered`).
        for (const id of lists.sockets) {
          const link = this.sockets.get(id);
          if (link?.attached) link.broken('peer_silent');
        }
        continue;
      }
      for (const id of lists.sockets) this.sockets.get(id)?.flushAck();
      this.env.send(peer, { t: 'beat', ...lists }).catch(() => undefined);
    }
    // Given-up links' late answers expire on this timer too.
    const lateLeft = this.late.sweep();
    if (this.holders.size === 0 && this.sockets.size === 0 && this.beaten.size === 0 && !lateLeft) {
      clearInterval(this.beat);
      this.beat = undefined;
    }
  }

  /** Counts a bridge with `peer` made (+1) or done (-1); a peer with none left is forgotten. */
  private linked(peer: string, delta: 1 | -1): void {
    const left = (this.linksByPeer.get(peer) ?? 0) + delta;
    if (left > 0) {
      this.linksByPeer.set(peer, left);
      return;
    }
    this.linksByPeer.delete(peer);
    this.heard.delete(peer);
  }

  private forget(id: string): void {
    const holder = this.holders.get(id);
    if (holder) {
      this.holders.delete(id);
      this.deps.metrics.bridgeClosed('holder');
      this.linked(holder.peer, -1);
      this.late.keep(id, holder.peer, holder.sink);
      this.beatOn();
      return;
    }
    const socket = this.sockets.get(id);
    if (!socket) return;
    this.sockets.delete(id);
    this.deps.metrics.bridgeClosed('socket');
    this.linked(socket.holder, -1);
  }
}
