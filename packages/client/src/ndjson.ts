/**
 * A blocking execute's answer (docs/spec.md §3a): application/x-ndjson, one protojson Action per
 * line (only newCheckpoint actions), an empty line now and then as keepalive. Iterate it
 * for the checkpoints — keepalives are skipped — then read `end` for how it ended.
 *
 * After the 200, a failure can only end the stream: `ended` does not by itself say the turn
 * succeeded (look at the last checkpoint's status); `interrupted` means the connection broke.
 */
import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { z } from 'zod';
import type { NewCheckpoint, TokenBreakdown } from './contract';
import { LongrunError } from './errors';

/** One newCheckpoint Action, as Workhorse writes it (proto field names, every field present). */
export interface Checkpoint {
  requestID: string;
  /** agent_context_usage: tokens each agent has used of its context window, by agent name. */
  newCheckpoint: Required<Omit<NewCheckpoint, 'agent_context_usage'>> & { agent_context_usage: Record<string, Required<TokenBreakdown>> };
}

/** An int32 in protojson: a JSON number, or (decoders accept both) a string holding one. */
const integerText = z.string().regex(/^-?\d+$/);
const int32 = z.union([z.number().int(), integerText.transform(Number)]);

export const checkpointSchema = z
  .object({
    requestID: z.string().default(''),
    newCheckpoint: z
      .object({
        status: z.string().default(''),
        checkpoint: z.string().default(''),
        goal: z.string().default(''),
        errors: z.array(z.string()).default([]),
        agent_context_usage: z.record(z.string(), z.object({ total_tokens: int32, max_tokens: int32 })).default({}),
      })
      .loose(),
  })
  .loose();

interface EndCounts {
  /** Checkpoints read. */
  checkpoints: number;
  last: Checkpoint | undefined;
}

export type BlockingEnd =
  /** The gateway ended the stream: the turn is over, or failed after the 200 (see `last`). */
  | ({ kind: 'ended' } & EndCounts)
  /** The connection broke, or a line could not be read. */
  | ({ kind: 'interrupted'; error: LongrunError } & EndCounts)
  /** cancel(), the caller's signal, or the loop left early: the gateway cancels the run. */
  | ({ kind: 'cancelled' } & EndCounts);

export interface BlockingStreamContext {
  requestId: string;
  endpoint: string;
}

export class BlockingStream implements AsyncIterable<Checkpoint> {
  /** Resolves once the stream is over, whichever way; never rejects. */
  readonly end: Promise<BlockingEnd>;
  private resolveEnd!: (end: BlockingEnd) => void;
  private settled = false;
  private iterated = false;
  private cancelled = false;
  private checkpoints = 0;
  private last: Checkpoint | undefined;

  constructor(
    private readonly body: Readable,
    private readonly context: BlockingStreamContext,
  ) {
    this.end = new Promise((resolve) => (this.resolveEnd = resolve));
  }

  /** Checkpoints in order, keepalive lines skipped. Iterate once; leaving the loop early cancels. */
  [Symbol.asyncIterator](): AsyncIterator<Checkpoint> {
    if (this.iterated) throw new TypeError('a blocking stream can be iterated once');
    this.iterated = true;
    return this.read();
  }

  /** Hangs up: the gateway cancels the run (client_gone). Idempotent. */
  cancel(): void {
    if (this.settled) return;
    this.cancelled = true;
    this.body.destroy();
    this.settle({ kind: 'cancelled' });
  }

  private settle(end: { kind: 'ended' } | { kind: 'cancelled' } | { kind: 'interrupted'; error: LongrunError }): void {
    if (this.settled) return;
    this.settled = true;
    this.resolveEnd({ ...end, checkpoints: this.checkpoints, last: this.last });
  }

  private interrupted(message: string, cause?: unknown): LongrunError {
    const { requestId, endpoint } = this.context;
    return new LongrunError('NETWORK_ERROR', message, { status: 200, retryable: false, requestId, endpoint, cause });
  }

  private async *read(): AsyncGenerator<Checkpoint> {
    const decoder = new StringDecoder('utf8');
    let pending = '';
    try {
      for await (const chunk of this.body) {
        pending += decoder.write(chunk as Buffer);
        for (let newline = pending.indexOf('\n'); newline >= 0; newline = pending.indexOf('\n')) {
          const line = pending.slice(0, newline);
          pending = pending.slice(newline + 1);
          if (line.trim() === '') continue;
          const checkpoint = this.parse(line);
          this.checkpoints += 1;
          this.last = checkpoint;
          yield checkpoint;
        }
      }
      pending += decoder.end();
      if (pending.trim() !== '') throw this.interrupted('the stream ended in the middle of a line');
      this.settle({ kind: 'ended' });
    } catch (err) {
      if (this.cancelled) return;
      this.body.destroy();
      this.settle({ kind: 'interrupted', error: err instanceof LongrunError ? err : this.interrupted(`the stream broke: ${(err as Error).message}`, err) });
    } finally {
      // The loop was left early (break, return, throw in its body): hang up.
      if (!this.settled) this.cancel();
    }
  }

  private parse(line: string): Checkpoint {
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch (err) {
      throw new LongrunError('UNEXPECTED_RESPONSE', 'a stream line is not JSON', { status: 200, retryable: false, ...this.context, body: line.slice(0, 1_024), cause: err });
    }
    const parsed = checkpointSchema.safeParse(json);
    if (!parsed.success) {
      throw new LongrunError('UNEXPECTED_RESPONSE', 'a stream line is not a checkpoint', { status: 200, retryable: false, ...this.context, body: line.slice(0, 1_024) });
    }
    return parsed.data as Checkpoint;
  }
}
