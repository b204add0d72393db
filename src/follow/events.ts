/**
 * A followed workflow's events (docs/spec.md §14) as its log holds them, and as a follow
 * stream writes them: Server-Sent Events, `id:` the entry's id in the workflow's log,
 * `event:` its kind, `data:` one line of JSON.
 *
 * Ids are the log's: consecutive integers, one more for each event appended, from a seed
 * of the store's clock when the log is created (milliseconds × 1 000), so they keep
 * increasing across runs, replicas and a log that expired and was made again (docs/spec.md
 * §14, "ids"). A JavaScript number holds them exactly (2^53 is 9·10^15, the seed of today
 * 1.7·10^15).
 */
import type { FollowEventKind, FollowLogKind } from './words';

/** An event before the log numbered it: its kind and its data, JSON text on one line. */
export interface FollowEvent {
  readonly kind: FollowLogKind;
  readonly data: string;
}

/** An event in a workflow's log. */
export interface FollowEntry extends FollowEvent {
  readonly id: number;
}

/**
 * Where a workflow's log stands: `open` while its last event belongs to a run in flight,
 * `resumable` / `final` after an end the owner follows with another segment / does not.
 */
export type LogState = 'open' | 'resumable' | 'final';

/** The log's state after `kind` (an `end`'s data says whether it is resumable). */
export function stateAfter(event: FollowEvent): LogState {
  if (event.kind !== 'end') return 'open';
  return event.data.includes('"resumable":true') ? 'resumable' : 'final';
}

/** The Server-Sent Event of an entry; `idle` (no id: it is no event of the log). */
export function sseFrame(kind: FollowEventKind, data: string, id?: number): string {
  return `${id === undefined ? '' : `id: ${id}\n`}event: ${kind}\ndata: ${data}\n\n`;
}

const frames = new WeakMap<FollowEntry, Buffer>();

/**
 * An entry's Server-Sent Event, encoded once and shared by every follower it is written to
 * (a feed hands the same entry to each): a hundred followers of a checkpoint cost one copy.
 */
export function frameOf(entry: FollowEntry): Buffer {
  let frame = frames.get(entry);
  if (!frame) frames.set(entry, (frame = Buffer.from(sseFrame(entry.kind, entry.data, entry.id))));
  return frame;
}

/** A keepalive: a comment line, which EventSource ignores and a proxy sees as traffic. */
export const KEEPALIVE_FRAME = ': keepalive\n\n';

/** `data` (a JSON object's text) with `"resync":true` first: a checkpoint that stands for what was missed. */
export function markedResync(data: string): string {
  return data.length > 2 ? `{"resync":true,${data.slice(1)}` : '{"resync":true}';
}

/**
 * A follow position as a client gives it (Last-Event-ID, `?after=`): a non-negative
 * integer within JavaScript's exact range; undefined when the text is not one.
 */
export function parsePosition(text: string): number | undefined {
  if (!/^\d{1,16}$/.test(text)) return undefined;
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : undefined;
}
