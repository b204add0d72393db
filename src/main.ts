#!/usr/bin/env node
/**
 * Entry point: config → (sandbox) → gateway → signals. SIGTERM/SIGINT drain (docs/spec.md §7);
 * a second signal exits at once. The sandbox (../sandbox/, the simulators) is loaded only
 * when it runs (config.ts decides: asked for, or no owner outside production): a start
 * with an owner loads none of it. With arguments it runs a command instead (cli/commands.ts:
 * `longrun store mark`), loaded only then.
 */
import { gatewayConfig, loadConfig, type Config, type EnvConfig } from './config';
import { ConfigError } from './core/env';
import { Gateway } from './gateway';
import { createLogger, scrubLine } from './core/log';
import type { Sandbox } from '../sandbox/sandbox';

/** After the drain budget, this long more before the process exits whatever holds it. */
const EXIT_GRACE_MS = 1_000;

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args.length > 0) {
    const { runCommand } = await import('./cli/commands');
    process.exitCode = await runCommand(args, process.env, { out: process.stdout, err: process.stderr });
    return;
  }
  let env: EnvConfig;
  try {
    env = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`longrun: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  const logger = createLogger(env.logLevel);
  let sandbox: Sandbox | undefined;
  let config: Config;
  if (!env.sandbox) {
    config = gatewayConfig(env);
  } else {
    // Loaded only here: a start with an owner never loads a simulator (nor the MCP server SDK they use).
    const { startSandbox } = await import('../sandbox/sandbox');
    sandbox = await startSandbox(env);
    config = sandbox.config;
    logger.info({ owner: sandbox.owner.url, workflow_service: sandbox.workflow.address }, 'sandbox: simulated owner and workflow service started');
  }
  const gateway = await Gateway.start(config, { logger, sandboxRoutes: sandbox?.routes });
  sandbox?.showRuns(() => gateway.runs());

  let signals = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    signals += 1;
    if (signals > 1) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    logger.info({ signal }, 'draining');
    // The drain closes or destroys every part within its budget; should anything still
    // hold the process, it exits anyway a moment after the budget (docs/spec.md §7).
    setTimeout(
      () => {
        logger.warn({ signal }, 'drain overran its budget: exiting');
        logger.flush();
        process.exit(0);
      },
      config.drain.shutdownDelayMs + config.drain.timeoutMs + EXIT_GRACE_MS,
    ).unref();
    void gateway
      .drain()
      .then(() => sandbox?.close())
      .then(
        () => {
          logger.flush();
          process.exit(0);
        },
        (err: unknown) => {
          logger.error({ err }, 'drain failed');
          process.exit(1);
        },
      );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // Printed once a signal drains: whoever reads it may stop the process at once.
  if (sandbox) process.stdout.write(sandbox.banner(gateway.mainUrl, gateway.opsUrl));
}

main().catch((err: unknown) => {
  // Scrubbed like a log line: no URL password or token reaches the terminal.
  process.stderr.write(`longrun: failed to start: ${scrubLine((err as Error).stack ?? String(err))}\n`);
  process.exit(1);
});
