/**
 * The follow log on Redis (docs/spec.md §14), shared by every replica:
 *
 * - a workflow's log is two keys under its hash tag (one slot of a Cluster, beside its lock):
 *   its backlog, a stream `longrun:{wf:<id>}:follow:events` trimmed to the backlog bound, and
 *   its state, a hash `longrun:{wf:<id>}:follow` (last id, state, latest run and checkpoint);
 * - a batch of a run's events is one call of follow-append-2.lua, which numbers them, keeps
 *   them and PUBLISHes them on the channel named as the backlog, where every
 *   replica with followers of the workflow is SUBSCRIBEd: one message, however many replicas;
 * - announcements of who follows what are PUBLISHed on `longrun:follow:interest`, to which
 *   every replica is subscribed from its start; with each, a replica renews the TTL of the
 *   logs it has followers of (follow-touch-2.lua), so a log lives while anyone follows.
 *
 * Pub/sub loses what is published while a subscriber is disconnected; the log does not. A
 * subscriber that (re)connects says hello (every replica announces again at once) and its
 * feeds catch up from the log (onResubscribed). Nothing is sent for a workflow nobody follows.
 */
import { closeRedis, createRedis, type ConnectionSettings, type RedisClient } from '../redis/connection';
import { FOLLOW_INTEREST_CHANNEL, followKeys, workflowOfFollowChannel } from '../redis/keys';
import { defineCommands, luaCommand } from '../redis/scripts';
import type { RedisTarget } from '../redis/url';
import { followLogKinds, type FollowLogKind } from './words';
import type { LogState, FollowEntry, FollowEvent } from './events';
import type { Announcement, LogRead, LogSettings, FollowLog } from './log';

interface Scripts {
  followAppend(events: string, state: string, ttlMs: number, backlog: number, channel: string, logState: LogState, ...pairs: string[]): Promise<string>;
  followRead(events: string, state: string, after: string, count: number): Promise<unknown[]>;
  followTouch(events: string, state: string, ttlMs: number): Promise<number>;
}

const isKind = (kind: string): kind is FollowLogKind => (followLogKinds as readonly string[]).includes(kind);

/** `<id>-0` → id. */
const idOf = (streamId: string): number => Number(streamId.slice(0, streamId.indexOf('-')));

function entryOf(id: string, kind: string, data: string): FollowEntry | undefined {
  return id !== '' && isKind(kind) ? { id: Number(id), kind, data } : undefined;
}

/** One published batch: a line per entry, `<id> <kind> <data>` (data is JSON: no raw newline). */
function parseBatch(message: string): FollowEntry[] {
  const entries: FollowEntry[] = [];
  for (const line of message.split('\n')) {
    const a = line.indexOf(' ');
    const b = line.indexOf(' ', a + 1);
    const entry = a > 0 && b > a ? entryOf(line.slice(0, a), line.slice(a + 1, b), line.slice(b + 1)) : undefined;
    if (entry) entries.push(entry);
  }
  return entries;
}

export class RedisFollowLog implements FollowLog {
  readonly kind = 'redis';
  private readonly commands: RedisClient & Scripts;
  private readonly subscriber: RedisClient;
  private entriesHandler: (workflowId: string, entries: FollowEntry[]) => void = () => undefined;
  private announcementHandler: (message: Announcement) => void = () => undefined;
  private resubscribedHandler: () => void = () => undefined;
  private readies = 0;
  private closing: Promise<void> | undefined;

  constructor(
    target: RedisTarget,
    private readonly replicaId: string,
    private readonly settings: LogSettings & ConnectionSettings,
    onError: (err: Error) => void = () => undefined,
  ) {
    this.commands = defineCommands<Scripts>(createRedis(target, 'commands', settings), [
      luaCommand(__dirname, 'follow-append-2.lua'),
      luaCommand(__dirname, 'follow-read-2.lua'),
      luaCommand(__dirname, 'follow-touch-2.lua'),
    ]);
    this.commands.on('error', onError);
    this.subscriber = createRedis(target, 'subscriber', settings);
    this.subscriber.on('error', onError);
    this.subscriber.on('message', (channel: string, message: string) => this.deliver(channel, message));
    this.subscriber.on('ready', () => {
      // Every (re)connection: ask every replica to announce again; after a reconnection,
      // what was published meanwhile is read from the logs.
      if (this.readies++ > 0) this.resubscribedHandler();
      this.sayHello();
    });
    this.subscriber.subscribe(FOLLOW_INTEREST_CHANNEL).catch(() => undefined);
  }

  append(workflowId: string, events: readonly FollowEvent[], state: LogState): Promise<number> {
    const keys = followKeys(workflowId);
    const pairs: string[] = [];
    for (const event of events) pairs.push(event.kind, event.data);
    return this.commands.followAppend(keys.events, keys.state, this.settings.ttlMs, this.settings.backlog, keys.events, state, ...pairs).then(Number);
  }

  async read(workflowId: string, after: number | undefined): Promise<LogRead> {
    const keys = followKeys(workflowId);
    const reply = await this.commands.followRead(keys.events, keys.state, after === undefined ? '' : String(after), this.settings.backlog);
    if (reply.length === 0) return { last: undefined, first: undefined, state: undefined, run: undefined, checkpoint: undefined, entries: [] };
    const [last, state, runId, run, checkpointId, checkpoint, oldest, rows] = reply as [string, string, string, string, string, string, string, Array<[string, string[]]>];
    const entries: FollowEntry[] = [];
    for (const [id, fields] of rows) {
      const at = (name: string): string => fields[fields.indexOf(name) + 1] ?? '';
      const entry = entryOf(String(idOf(id)), at('k'), at('d'));
      if (entry) entries.push(entry);
    }
    return {
      last: Number(last),
      first: oldest === '' ? undefined : idOf(oldest),
      state: state === '' ? undefined : (state as LogState),
      run: entryOf(runId, 'run', run),
      checkpoint: entryOf(checkpointId, 'checkpoint', checkpoint),
      entries,
    };
  }

  touch(workflowIds: readonly string[]): void {
    // Auto-pipelined: one write to Redis for the lot.
    for (const id of workflowIds) {
      const keys = followKeys(id);
      this.commands.followTouch(keys.events, keys.state, this.settings.ttlMs).catch(() => undefined);
    }
  }

  onEntries(handler: (workflowId: string, entries: FollowEntry[]) => void): void {
    this.entriesHandler = handler;
  }

  async subscribe(workflowId: string): Promise<void> {
    await this.subscriber.subscribe(followKeys(workflowId).events);
  }

  unsubscribe(workflowId: string): void {
    this.subscriber.unsubscribe(followKeys(workflowId).events).catch(() => undefined);
  }

  announce(message: Announcement): Promise<void> {
    // Redis replies to a PUBLISH once it has queued the message to every subscriber.
    return this.commands.publish(FOLLOW_INTEREST_CHANNEL, JSON.stringify(message)).then(() => undefined);
  }

  onAnnouncement(handler: (message: Announcement) => void): void {
    this.announcementHandler = handler;
  }

  onResubscribed(handler: () => void): void {
    this.resubscribedHandler = handler;
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.subscriber.disconnect();
      await closeRedis(this.commands);
    })();
    return this.closing;
  }

  /** Asks every replica to announce again, once this replica's command connection can publish. */
  private sayHello(): void {
    const hello = (): void => void this.announce({ replica: this.replicaId, hello: true }).catch(() => undefined);
    if (this.commands.status === 'ready') hello();
    else this.commands.once('ready', hello);
  }

  private deliver(channel: string, message: string): void {
    try {
      if (channel === FOLLOW_INTEREST_CHANNEL) {
        const parsed = JSON.parse(message) as Announcement;
        if (typeof parsed?.replica === 'string') this.announcementHandler(parsed);
        return;
      }
      const workflowId = workflowOfFollowChannel(channel);
      if (workflowId !== undefined) this.entriesHandler(workflowId, parseBatch(message));
    } catch {
      // A message that is not ours, or a handler's fault, costs that message only: the log has it.
    }
  }
}
