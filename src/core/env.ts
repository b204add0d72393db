/**
 * Reading the environment (docs/spec.md §8): the primitives every part's settings section
 * (`<part>/settings.ts`) reads its LONGRUN_* variables with, and the one error they throw.
 * An unset or empty variable is its default; a set one is trimmed and parsed, or refused with
 * a ConfigError naming it and what was expected. src/config.ts composes the sections.
 */
import { z } from 'zod';
import { maskUrl } from './log';

export type Env = Record<string, string | undefined>;

/**
 * An invalid variable: names it, says what is wrong, and shows the value with any
 * credential masked (`redis://:***@host`) — start-up output must never print a secret.
 */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    expected: string,
    received: string | undefined,
    problem?: string,
  ) {
    const shown = received === undefined ? 'nothing' : JSON.stringify(maskUrl(received));
    super(`invalid ${variable}: ${problem ? `${problem}; ` : ''}expected ${expected}, got ${shown}`);
    this.name = 'ConfigError';
  }
}

/** At most 2^31-1: above Node's timer clamp a timer would fire at once. */
export const durationMs = z.coerce
  .number()
  .int()
  .min(1)
  .max(2 ** 31 - 1);
const nonNegativeMs = z.coerce
  .number()
  .int()
  .min(0)
  .max(2 ** 31 - 1);
export const count = z.coerce.number().int().min(0);

/** A switch: true, false, 1 or 0 (any case). */
export const flag = z
  .string()
  .transform((v) => v.toLowerCase())
  .pipe(z.enum(['true', 'false', '1', '0']))
  .transform((v) => v === 'true' || v === '1');

/** `name` parsed by `schema` (trimmed), or `fallback` when unset or empty; `expected` says what is wanted when it does not parse. */
export function read<T>(env: Env, name: string, schema: z.ZodType<T>, expected: string, fallback: T): T {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const parsed = schema.safeParse(raw.trim());
  if (!parsed.success) throw new ConfigError(name, expected, raw);
  return parsed.data;
}

/** A duration in milliseconds, at least 1 (every *_MS variable but the few that take 0). */
export function readMs(env: Env, name: string, fallback: number): number {
  return read(env, name, durationMs, 'a positive integer number of milliseconds', fallback);
}

/** A duration in milliseconds that may be 0 (`what0`: what 0 means, when it means more than no wait). */
export function readMsOrZero(env: Env, name: string, fallback: number, what0?: string): number {
  return read(env, name, nonNegativeMs, `a non-negative integer number of milliseconds${what0 ? ` (0 = ${what0})` : ''}`, fallback);
}

/** A switch (`flag`). */
export function readFlag(env: Env, name: string, fallback: boolean): boolean {
  return read(env, name, flag, 'true or false', fallback);
}

/** An integer from `min` to `max` (both written in the message as they are given). */
export function readInt(env: Env, name: string, min: number, max: number, fallback: number): number {
  return read(env, name, z.coerce.number().int().min(min).max(max), `an integer from ${min} to ${max}`, fallback);
}
