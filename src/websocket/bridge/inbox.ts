/**
 * Bridge messages over Redis Streams (docs/spec.md §12): every replica reads one stream of
 * its own, its *inbox* (`longrun:{bridge:<replica>}:inbox`, one key, so one slot of a
 * Cluster), with one blocking XREAD on a connection of its own; a replica sends by
 * appending to the receiver's inbox (bridge-send-1.lua: XADD and a TTL, one call).
 *
 * Why a stream per replica and not pub/sub, or a stream per session:
 * - A stream keeps what was sent while the reader reconnects (a blip, a Sentinel
 *   failover): the reader goes on from the last id it read. Pub/sub drops it, and every
 *   blip would cost each bridged session a replay handshake.
 * - One stream per *replica* needs one blocking read per process, whatever the number
 *   of bridged sessions; a stream per session would need a connection, or a poll, each.
 * - What was read is trimmed at once (bridge-trim-1.lua), and an empty inbox expires a
 *   second later, so Redis holds only what is in flight; how much can be in flight per session is bounded
 *   by the holder's flow control (holder-link.ts). MAXLEN is a backstop only.
 *
 * Order: one sender's appends to one inbox go on one connection, in order. A message
 * whose append failed, or that Redis lost (a restart without persistence, an
 * asynchronous replica promoted), leaves a gap in its bridge's sequence, which the
 * receiving side sees (bridges.ts). Ids are Redis's clock: reading starts at the
 * server's TIME, so entries left by an earlier process of the same name are skipped.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster, Redis } from 'ioredis';
import { closeRedis, createRedis, type ConnectionSettings, type RedisClient } from '../../redis/connection';
import { inboxKey } from '../../redis/keys';
import { defineCommands, luaCommand } from '../../redis/scripts';
import type { RedisTarget } from '../../redis/url';
import type { BridgeHeader, BridgeMessage, BridgeTransport } from './protocol';

export interface InboxSettings extends ConnectionSettings {
  /** How long an inbox outlives its last message (a reader that died leaves nothing for longer). */
  ttlMs: number;
  /** How long one blocking read waits before it is issued again. */
  blockMs?: number;
}

/** Entries per read. */
const READ_COUNT = 512;
/** The approximate bound of an inbox: far past what flow control lets be in flight. */
const MAX_ENTRIES = 100_000;
/** How long an inbox its reader emptied is kept (bridge-trim-1.lua says why it is not deleted at once). */
const EMPTY_TTL_MS = 1_000;

interface Scripts {
  bridgeSend(key: string, ttlMs: number, maxLen: number, ...fields: Array<string | Buffer>): Promise<string>;
  bridgeTrim(key: string, minId: string, emptyTtlMs: number): Promise<number>;
}

export class RedisInbox implements BridgeTransport {
  private readonly commands: RedisClient & Scripts;
  /** The blocking read's own connection: a blocked connection serves nothing else. */
  private readonly reader: RedisClient;
  private readonly key: string;
  private handler: (message: BridgeMessage) => void = () => undefined;
  private closed = false;
  private readonly reading: Promise<void>;

  constructor(
    target: RedisTarget,
    readonly replicaId: string,
    private readonly settings: InboxSettings,
    onError: (err: Error) => void = () => undefined,
  ) {
    this.key = inboxKey(replicaId);
    this.commands = defineCommands<Scripts>(createRedis(target, 'commands', settings), [luaCommand(__dirname, 'bridge-send-1.lua'), luaCommand(__dirname, 'bridge-trim-1.lua')]);
    this.commands.on('error', onError);
    this.reader = createRedis(target, 'subscriber', settings);
    this.reader.on('error', onError);
    this.reading = this.read();
  }

  onMessage(handler: (message: BridgeMessage) => void): void {
    this.handler = handler;
  }

  get reachable(): boolean {
    return this.commands.status === 'ready' && this.reader.status === 'ready';
  }

  send(replica: string, header: BridgeHeader, data?: Buffer): Promise<void> {
    const fields: Array<string | Buffer> = ['f', this.replicaId, 'h', JSON.stringify(header)];
    if (data) fields.push('d', data);
    return this.commands.bridgeSend(inboxKey(replica), this.settings.ttlMs, MAX_ENTRIES, ...fields).then(() => undefined);
  }

  /** Stops reading; what was sent is answered before the command connection quits (QUIT follows it). */
  async close(): Promise<void> {
    this.closed = true;
    this.reader.disconnect();
    await this.reading;
    await closeRedis(this.commands);
  }

  /** The read loop: from the server's clock at start, then from the last id read; each batch trimmed once handled. */
  private async read(): Promise<void> {
    let last: string | undefined;
    while (!this.closed) {
      try {
        if (last === undefined) {
          const [seconds = 0, micros = 0] = (await (this.reader as Redis).time()).map(Number);
          last = `${seconds * 1000 + Math.floor(micros / 1000)}-0`;
        }
        const reply = (await (this.reader as Redis | Cluster).callBuffer(
          'XREAD',
          'COUNT',
          READ_COUNT,
          'BLOCK',
          this.settings.blockMs ?? 1_000,
          'STREAMS',
          this.key,
          last,
        )) as Array<[Buffer, Array<[Buffer, Buffer[]]>]> | null;
        const entries = reply?.[0]?.[1] ?? [];
        for (const [id, fields] of entries) {
          last = id.toString();
          this.deliver(fields);
        }
        if (entries.length > 0) this.commands.bridgeTrim(this.key, nextId(last), EMPTY_TTL_MS).catch(() => undefined);
      } catch {
        if (this.closed) return;
        await sleep(100);
      }
    }
  }

  /** One entry to the handler; an entry that is not a bridge message, or a handler's fault, costs that entry only. */
  private deliver(fields: Buffer[]): void {
    try {
      let from: string | undefined;
      let header: BridgeHeader | undefined;
      let data: Buffer | undefined;
      for (let i = 0; i + 1 < fields.length; i += 2) {
        const name = (fields[i] as Buffer).toString();
        const value = fields[i + 1] as Buffer;
        if (name === 'f') from = value.toString();
        else if (name === 'h') header = JSON.parse(value.toString()) as BridgeHeader;
        else if (name === 'd') data = value;
      }
      if (from !== undefined && header !== undefined) this.handler({ from, header, ...(data ? { data } : {}) });
    } catch {
      // The read loop goes on: the bridge it belonged to sees the gap.
    }
  }
}

/** The stream id right after `id` (`ms-seq`). */
function nextId(id: string): string {
  const dash = id.indexOf('-');
  return `${id.slice(0, dash)}-${Number(id.slice(dash + 1)) + 1}`;
}
