/**
 * The owner calls' metrics (docs/operating.md "The owner service"): runHTTPRequest actions
 * relayed to the owner API and how each was answered, and segment-end callbacks. Counted where
 * the calls are made (owner-client.ts).
 */
import { Counter, Histogram, type Registry } from 'prom-client';
import { Tally, oneOf, PartMetrics } from '../observability/metric-helpers';
import { callbackResults, relayErrorTypes, type CallbackResult, type RelayErrorType } from './words';

const relayMethods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD'] as const;

function statusClass(status: number): string {
  return status >= 100 && status < 600 ? `${Math.floor(status / 100)}xx` : 'other';
}

export class OwnerMetrics extends PartMetrics {
  private readonly relayTally = new Tally();
  readonly relayActions: Counter = new Counter({
    name: 'longrun_http_relay_actions_total',
    help: 'runHTTPRequest actions relayed to the owner, by method and status class.',
    labelNames: ['method', 'status'],
    registers: [this.registry],
    collect: () => this.relayTally.flushInto(this.relayActions),
  });
  readonly relayDuration = new Histogram({
    name: 'longrun_http_relay_duration_seconds',
    help: 'runHTTPRequest relay duration (successful relays).',
    // The relay timeout is 5 s; 10 s catches relays run without it.
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  /** relayDuration's one series, its observe() made once (not a closure per call). */
  private readonly observeRelayDuration = this.relayDuration.labels().observe;
  readonly relayErrors = new Counter({
    name: 'longrun_http_relay_errors_total',
    help: 'runHTTPRequest actions answered with an error, by type.',
    labelNames: ['type'],
    registers: [this.registry],
  });
  readonly callbacks = new Counter({ name: 'longrun_callbacks_total', help: 'Segment-end callbacks, by result.', labelNames: ['result'], registers: [this.registry] });

  constructor(registry: Registry) {
    super(registry);
    for (const result of callbackResults) this.callbacks.inc({ result }, 0);
    for (const type of relayErrorTypes) this.relayErrors.inc({ type }, 0);
  }

  /** A relay the owner answered (`status`), `durationS` after it was sent. */
  relay(method: string, status: number, durationS: number): void {
    this.relayTally.add(`${method} ${status}`, () => ({ method: oneOf(method.toUpperCase(), relayMethods), status: statusClass(status) }));
    this.observeRelayDuration(durationS);
  }

  relayError(type: RelayErrorType): void {
    this.relayErrors.inc({ type });
  }

  callback(result: CallbackResult): void {
    this.callbacks.inc({ result });
  }
}
