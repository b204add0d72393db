/**
 * The meters ws_frames (scenarios/ws-frames.ts) reads around each phase: CPU per process
 * (/proc), Redis's CPU (INFO cpu), commands (INFO commandstats) and bytes in and out (INFO
 * stats), and what crossed the client sockets (frames-client.ts), as one Reading; and
 * Readings summed over passes.
 */
import { addCounts, zeroCounts, type FrameCounts, type FrameSession } from '../clients/frames-client';
import { CpuMeter } from '../../stack/process-stats';
import { commandDelta, type BenchRedis } from './bench-redis';

/** What one measured window cost, per process and at Redis, and what crossed the client sockets. */
export interface Reading {
  cpuMs: Record<string, number>;
  redisCpuMs: number;
  redisCommands: Record<string, number>;
  redisBytesIn: number;
  redisBytesOut: number;
  client: FrameCounts;
  elapsedMs: number;
}

/** Two readings as one (a phase's passes summed). */
export function addReadings(a: Reading, b: Reading): Reading {
  const sum = (x: Record<string, number>, y: Record<string, number>): Record<string, number> => {
    const out = { ...x };
    for (const [k, v] of Object.entries(y)) out[k] = (out[k] ?? 0) + v;
    return out;
  };
  return {
    cpuMs: sum(a.cpuMs, b.cpuMs),
    redisCpuMs: a.redisCpuMs + b.redisCpuMs,
    redisCommands: sum(a.redisCommands, b.redisCommands),
    redisBytesIn: a.redisBytesIn + b.redisBytesIn,
    redisBytesOut: a.redisBytesOut + b.redisBytesOut,
    client: addCounts(a.client, b.client),
    elapsedMs: a.elapsedMs + b.elapsedMs,
  };
}

/** What addReadings starts from. */
export const emptyReading: Reading = { cpuMs: {}, redisCpuMs: 0, redisCommands: {}, redisBytesIn: 0, redisBytesOut: 0, client: { ...zeroCounts }, elapsedMs: 0 };

/** The sum of every count. */
export const total = (counts: Record<string, number>): number => Object.values(counts).reduce((a, b) => a + b, 0);

/** Every client counter of `sessions`, summed. */
export function clientCounts(sessions: readonly FrameSession[]): FrameCounts {
  return sessions.reduce((n, s) => addCounts(n, s.snapshot()), { ...zeroCounts });
}

export class PhaseMeters {
  constructor(
    private readonly redis: BenchRedis,
    private readonly pids: Record<string, number>,
  ) {}

  /**
   * Runs `phase` between two readings of every meter, `client` giving the client sockets'
   * counters. Redis's are read outermost but for its bytes, read innermost: no other INFO
   * reply falls inside its byte counters.
   */
  async around(client: () => FrameCounts, phase: () => Promise<void>): Promise<Reading> {
    const commandsBefore = await this.redis.commands();
    const redisCpuBefore = await this.redis.cpuMs();
    const netBefore = await this.redis.netBytes();
    const clientBefore = client();
    const cpu = new CpuMeter(this.pids).start();
    const started = performance.now();
    await phase();
    const elapsedMs = performance.now() - started;
    const cpuMs = cpu.read();
    const clientUsed = addCounts(client(), clientBefore, -1);
    const netAfter = await this.redis.netBytes();
    const redisCpuMs = (await this.redis.cpuMs()) - redisCpuBefore;
    const commands = commandDelta(commandsBefore, await this.redis.commands());
    return {
      cpuMs,
      redisCpuMs,
      redisCommands: commands.byName,
      redisBytesIn: netAfter.input - netBefore.input,
      redisBytesOut: netAfter.output - netBefore.output,
      client: clientUsed,
      elapsedMs,
    };
  }
}
