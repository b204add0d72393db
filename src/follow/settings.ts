/** The follow section of the configuration (docs/configuration.md "Following runs", docs/spec.md §14): follow streams, their buffers and caps, the per-workflow backlog. */
import { z } from 'zod';
import { count, read, readInt, readMs, type Env } from '../core/env';

export interface FollowSettings {
  /** After a resumable end, how long a follow stream waits for the workflow's next run before it ends with `idle`. */
  idleMs: number;
  /** A comment line on every follow stream this often (proxies and browsers keep it open). */
  keepaliveMs: number;
  /** Bytes a follower may leave unread; past them it is dropped (it resumes by Last-Event-ID). */
  bufferBytes: number;
  /** Events of a followed workflow kept for followers that resume (Last-Event-ID, ?after=). */
  backlogEvents: number;
  /** Follow streams of the whole process, and of one workflow on this replica (503 past either). */
  maxFollowers: number;
  maxFollowersPerWorkflow: number;
}

export function readFollowSettings(env: Env): FollowSettings {
  return {
    idleMs: readMs(env, 'LONGRUN_FOLLOW_IDLE_MS', 120_000),
    // 20 s: under the 60 s idle timeout of common proxies (nginx's proxy_read_timeout), as the ndjson keepalive.
    keepaliveMs: readMs(env, 'LONGRUN_FOLLOW_KEEPALIVE_MS', 20_000),
    // 1 MiB: a few checkpoints; ten thousand followers all stalled hold at most 10 GiB, most hold nothing.
    bufferBytes: read(env, 'LONGRUN_FOLLOW_BUFFER_BYTES', z.coerce.number().int().min(1), 'a positive integer number of bytes', 1024 * 1024),
    backlogEvents: readInt(env, 'LONGRUN_FOLLOW_BACKLOG_EVENTS', 1, 1_000_000, 512),
    maxFollowersPerWorkflow: read(env, 'LONGRUN_MAX_FOLLOWERS_PER_WORKFLOW', count, 'a non-negative integer', 100),
    maxFollowers: read(env, 'LONGRUN_MAX_FOLLOWERS', count, 'a non-negative integer', 10_000),
  };
}
