/** The coordination section of the configuration (docs/configuration.md "Coordination"): leases, stop keys, and what longrun may set on its Redis. */
import { durationMs, read, readFlag, readMs, type Env } from '../core/env';

export interface CoordinationSettings {
  /** Every lock's lease; renewed every TTL/3 (lease-keeper.ts). Also the store fence's length. */
  leaseTtlMs: number;
  /** How often the stop watcher reads every watched stop key (besides notices). */
  stopPollMs: number;
  /** The TTL the stop route sets on a stop key. */
  stopKeyTtlMs: number;
  /**
   * LONGRUN_REDIS_CONFIGURE_NOTIFICATIONS: longrun may CONFIG SET the server's keyspace
   * notifications (on every primary it connects to). Off by default: a shared Redis is
   * not longrun's to reconfigure.
   */
  configureNotifications: boolean;
}

export function readCoordinationSettings(env: Env): CoordinationSettings {
  return {
    leaseTtlMs: read(env, 'LONGRUN_LEASE_TTL_MS', durationMs.min(30), 'an integer number of milliseconds >= 30', 60_000),
    stopPollMs: readMs(env, 'LONGRUN_STOP_POLL_MS', 5_000),
    stopKeyTtlMs: readMs(env, 'LONGRUN_STOP_KEY_TTL_MS', 600_000),
    configureNotifications: readFlag(env, 'LONGRUN_REDIS_CONFIGURE_NOTIFICATIONS', false),
  };
}
