/**
 * A scenario's stack: stack/'s startStack as every scenario runs it — each simulator in a
 * process of its own, the gateways as the image runs them (stack/deployed-runtime.ts, with
 * --expose-gc), on the run's shared redis-server, emptied first — and a dispatcher's load
 * client on its first gateway. BENCH_GATEWAY_MAIN measures another build's gateway;
 * BENCH_GATEWAY_NODE_ARGS and BENCH_SIM_NODE_ARGS profile the gateways and the simulators.
 */
import { startStack, type Stack, type StackOptions } from '../stack';
import { BUILT_GATEWAY_MAIN } from '../stack/gateway-child';
import { ExecuteClient } from './clients/load';
import type { BenchRedis } from './measure/bench-redis';

/** What lives for the whole bench run: the redis-server and the shared secret. */
export interface BenchEnv {
  redis: BenchRedis;
  secret: Buffer;
}

/** The gateway measured: this build's, or another build's `dist/src/main.js` (e.g. main's, to measure a baseline with this bench). */
export const gatewayMainJs = process.env['BENCH_GATEWAY_MAIN'] || BUILT_GATEWAY_MAIN;

const nodeArgs = (name: string): string[] => (process.env[name] ?? '').split(/\s+/).filter(Boolean);
const gatewayNodeArgs = nodeArgs('BENCH_GATEWAY_NODE_ARGS');

export type BenchStack = Stack<'process', 'process'> & { readonly load: ExecuteClient };

/** The options every scenario's stack starts with (startStack's, for a stack without a load client). */
export function benchStackOptions(env: BenchEnv): StackOptions<'process', 'process'> {
  return {
    gateway: 'process',
    simulators: 'process',
    name: 'gateway',
    redis: env.redis,
    secret: env.secret,
    preauth: { detached: true, lockConcurrentFlow: true },
    children: {
      main: gatewayMainJs,
      nodeArgs: gatewayNodeArgs,
      simulatorNodeArgs: nodeArgs('BENCH_SIM_NODE_ARGS'),
      deployed: true,
      // A long run's logs are not kept: their tail, for an error message.
      outputLimitChars: 8_192,
      // A profiled gateway writes its profile on a clean exit: drained, not killed.
      drainOnClose: gatewayNodeArgs.length > 0,
    },
  };
}

export interface BenchStackOptions extends Pick<StackOptions<'process', 'process'>, 'replicas' | 'name' | 'simulators'> {
  /** LONGRUN_* variables beyond the ones every scenario sets. */
  gatewayEnv?: Record<string, string>;
  /** The load client's connections to the first gateway (default 64). */
  connections?: number;
  /** Another build's dist/src/main.js for the gateways. */
  mainJs?: string;
  /**
   * Empty Redis first (default true). A second stack beside one already running passes
   * false: flushing would take the first gateway's store marker, and fence its starts.
   */
  flush?: boolean;
}

export async function startBenchStack(env: BenchEnv, options: BenchStackOptions = {}): Promise<BenchStack> {
  if (options.flush ?? true) await env.redis.flush();
  const defaults = benchStackOptions(env);
  const stack = await startStack({
    ...defaults,
    ...(options.replicas === undefined ? {} : { replicas: options.replicas }),
    ...(options.name === undefined ? {} : { name: options.name }),
    ...(options.simulators === undefined ? {} : { simulators: options.simulators }),
    env: options.gatewayEnv ?? {},
    children: { ...defaults.children, ...(options.mainJs ? { main: options.mainJs } : {}) },
  });
  const load = new ExecuteClient(stack.url, options.connections);
  const close = stack.close;
  // Assigned onto the stack itself: its getters (workflow, gateway, replicas) stay live.
  return Object.assign(stack, {
    load,
    close: async () => {
      await load.close().catch(() => undefined);
      await close();
    },
  });
}
