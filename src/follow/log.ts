/**
 * Where a followed workflow's events are kept and passed between replicas (docs/spec.md §14):
 * the interface, with two implementations — the process's memory (one replica, no Redis:
 * memory-log.ts) and Redis (redis-log.ts), where every replica's followers read what any
 * replica's runs append.
 *
 * A workflow has a log only while someone follows it: the replica holding its run appends
 * to it only then (interest.ts says when), and it expires one TTL after it was made or last
 * touched by a replica that has followers of it (every announcement). Its backlog is bounded (the newest
 * LONGRUN_FOLLOW_BACKLOG_EVENTS entries); its latest `run` and `checkpoint` are kept beside
 * it, whatever the backlog dropped, for followers that start or resync.
 *
 * Interest travels here too: each replica announces, every few seconds, the workflows it has
 * followers of (an announcement), and every replica hears every announcement, so the one that
 * holds — or later takes — a followed workflow's run reports it from its first event.
 */
import type { LogState, FollowEntry, FollowEvent } from './events';

/** What a read of a workflow's log found. */
export interface LogRead {
  /** The log's last id; undefined when the workflow has no log (nobody followed it lately). */
  last: number | undefined;
  /** The oldest id the backlog still holds. */
  first: number | undefined;
  /** Where the log stands after its last entry. */
  state: LogState | undefined;
  /** The latest `run` and `checkpoint` entries, kept whatever the backlog dropped. */
  run: FollowEntry | undefined;
  checkpoint: FollowEntry | undefined;
  /**
   * The entries after the position asked, oldest first (at most the backlog); with no
   * position, those after the latest `run` or `checkpoint`, whichever is later.
   */
  entries: FollowEntry[];
}

/** A replica's followers, by workflow (`workflows`), or its request that every replica announce again (`hello`). */
export type Announcement = { replica: string; workflows: Array<[workflowId: string, followers: number]> } | { replica: string; hello: true };

export interface FollowLog {
  readonly kind: 'memory' | 'redis';
  /**
   * Appends events to `workflowId`'s log (made, with a seed of the store's clock, when there
   * is none), in order, as one batch; `state` is the log's state after them. Resolves with
   * the last one's id; rejects when the store failed (the events are lost).
   */
  append(workflowId: string, events: readonly FollowEvent[], state: LogState): Promise<number>;
  /** Reads the log after `after` (see LogRead.entries). Rejects when the store failed. */
  read(workflowId: string, after: number | undefined): Promise<LogRead>;
  /** Keeps the logs of these workflows another TTL (they have followers here). Best effort. */
  touch(workflowIds: readonly string[]): void;
  /** Where every replica's appends to a subscribed workflow are delivered (this replica's own included, again). */
  onEntries(handler: (workflowId: string, entries: FollowEntry[]) => void): void;
  /** Appends to `workflowId` are delivered from the moment this resolves. */
  subscribe(workflowId: string): Promise<void>;
  unsubscribe(workflowId: string): void;
  /**
   * To every replica (this one too). Resolves once the store took it: every replica
   * subscribed then has been sent it. Rejects when the store failed; announcements repeat,
   * so a caller that need not wait for one drops its failure.
   */
  announce(message: Announcement): Promise<void>;
  onAnnouncement(handler: (message: Announcement) => void): void;
  /** Deliveries may have been lost (the connection they come on was down): what is subscribed should catch up. */
  onResubscribed(handler: () => void): void;
  /** Stops delivering and closes what it opened. Idempotent. */
  close(): Promise<void>;
}

/** How long a log outlives its making or its last touch, and how many entries it keeps. */
export interface LogSettings {
  ttlMs: number;
  backlog: number;
}
