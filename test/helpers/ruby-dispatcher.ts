/**
 * The Ruby reference dispatcher (examples/ruby-dispatcher/bin/dispatcher) as a child process
 * run by the machine's `ruby` (Debian's: scripts/ensure-test-deps.sh installs it): commands
 * written to its stdin as JSON lines, its events read from its stdout, one JSON object a line.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { fromRoot } from '../../src/core/paths';

/** One line the dispatcher printed: `event`, `at_ms` (its clock, epoch ms), and the event's fields. */
export interface RubyEvent {
  event: string;
  at_ms: number;
  workflow_id?: string;
  [field: string]: unknown;
}

const running = new Set<ChildProcess>();
// Killed with the test worker if its teardown never ran.
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

export interface RubyDispatcherOptions {
  gatewayUrl: string;
  secretFile: string;
  env?: Record<string, string>;
}

export class RubyDispatcher {
  readonly events: RubyEvent[] = [];
  /** The segment-end endpoint's base URL (its "listening" event). */
  url = '';
  private stdout = '';
  private stderrText = '';
  private readonly changes = new EventEmitter();
  private readonly exit: Promise<number | string>;

  private constructor(readonly child: ChildProcess) {
    this.changes.setMaxListeners(0);
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      this.stdout += chunk;
      let newline: number;
      while ((newline = this.stdout.indexOf('\n')) >= 0) {
        const line = this.stdout.slice(0, newline);
        this.stdout = this.stdout.slice(newline + 1);
        try {
          this.events.push(JSON.parse(line) as RubyEvent);
        } catch {
          this.events.push({ event: 'unparsed', at_ms: Date.now(), line });
        }
      }
      this.changes.emit('change');
    });
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (this.stderrText += chunk));
    running.add(child);
    this.exit = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        running.delete(child);
        resolve(code ?? signal ?? -1);
      }),
    );
  }

  /** Starts `ruby bin/dispatcher` and resolves once its endpoint listens. */
  static async start(options: RubyDispatcherOptions): Promise<RubyDispatcher> {
    const child = spawn('ruby', [fromRoot('examples/ruby-dispatcher/bin/dispatcher')], {
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', LONGRUN_URL: options.gatewayUrl, LONGRUN_SECRET_FILE: options.secretFile, ...options.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const dispatcher = new RubyDispatcher(child);
    try {
      const listening = await dispatcher.waitFor((e) => e.event === 'listening', 10_000, 'the endpoint to listen');
      dispatcher.url = listening.url as string;
    } catch (err) {
      child.kill('SIGKILL');
      throw err;
    }
    return dispatcher;
  }

  /** What the dispatcher wrote on stderr (warnings, a thread's uncaught exception). */
  stderr(): string {
    return this.stderrText;
  }

  send(command: Record<string, unknown>): void {
    this.child.stdin?.write(`${JSON.stringify(command)}\n`);
  }

  /** The events of one workflow, optionally of one kind, in order. */
  of(workflowId: string, event?: string): RubyEvent[] {
    return this.events.filter((e) => e.workflow_id === workflowId && (event === undefined || e.event === event));
  }

  /** Resolves with the first event (already printed or to come) that `predicate` accepts. */
  waitFor(predicate: (event: RubyEvent) => boolean, timeoutMs: number, what: string): Promise<RubyEvent> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        const found = this.events.find(predicate);
        if (!found) return;
        cleanup();
        resolve(found);
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(
          new Error(`ruby dispatcher: no event for ${what} within ${timeoutMs} ms\nevents: ${this.events.map((e) => JSON.stringify(e)).join('\n')}\nstderr: ${this.stderrText}`),
        );
      }, timeoutMs);
      const cleanup = (): void => {
        clearTimeout(timer);
        this.changes.off('change', check);
      };
      this.changes.on('change', check);
      check();
    });
  }

  /** Closes its stdin (it lets the jobs in hand finish and exits) and resolves with its exit code; SIGKILL after `timeoutMs`. */
  async close(timeoutMs = 10_000): Promise<number | string> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return this.exit;
    this.child.stdin?.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    try {
      return await this.exit;
    } finally {
      clearTimeout(timer);
    }
  }
}
