/**
 * A spike's client, in a process of its own (forked through ../ipc.ts): SPIKE_VARIANT
 * names the variant (variants.ts), SPIKE_TARGET its server. It connects, warms up, then
 * reports ready; each `run` question runs one load shape and answers this process's CPU
 * per call and the latencies. It exits when the driver disconnects.
 */
import { serveIpc } from '../processes/ipc';
import { runShape, warmUp, type ShapeResult, type ShapeSpec } from './load';
import { variants } from './variants';

export type ClientQueries = {
  run: { args: ShapeSpec; result: ShapeResult };
};

async function main(): Promise<void> {
  const name = process.env['SPIKE_VARIANT'] ?? '';
  const make = variants[name];
  if (!make) throw new Error(`SPIKE_VARIANT must be one of ${Object.keys(variants).join(', ')}, got ${JSON.stringify(name)}`);
  const variant = await make(process.env['SPIKE_TARGET'] ?? '');
  await warmUp(variant.call);
  process.once('disconnect', () => void variant.close());
  serveIpc<ClientQueries>(name, { run: (spec) => runShape(variant.call, spec) });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
