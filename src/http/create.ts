/**
 * The HTTP part, wired from its settings (docs/spec.md §1): the main listener (the execute
 * route, the internal routes, the other transports' plain routes, upgrades handed to the
 * WebSocket route) and the ops listener, both bound before this resolves.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Closables } from '../core/closables';
import { createMainListener, type MainAppDeps } from './main-app';
import { createOpsApp, type OpsContext } from './ops-app';
import type { HttpSettings, ListenAddress } from './settings';

export interface HttpDeps {
  /** The main listener's routes (its keepalive is the settings'). */
  main: Omit<MainAppDeps, 'keepaliveMs'>;
  ops: OpsContext;
  /** The main listener's 'upgrade' event (the WebSocket route's: http/ does not import it). */
  onUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void;
  closables: Closables;
}

export interface Listeners {
  main: http.Server;
  ops: http.Server;
}

function listen(listener: http.RequestListener, address: ListenAddress): Promise<http.Server> {
  return new Promise((resolve, reject) => {
    const server = http.createServer(listener).listen(address.port, address.host);
    server.once('listening', () => resolve(server));
    server.once('error', reject);
  });
}

function closeServer(server: http.Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}

/** Where `server` listens, as a URL (`http://[::1]:8181` for IPv6). */
export function urlOf(server: http.Server): string {
  const { address, port } = server.address() as AddressInfo;
  return `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
}

/** Binds both listeners; rejects when one cannot bind (what was bound is among the closables). */
export async function createHttp(settings: HttpSettings, deps: HttpDeps): Promise<Listeners> {
  const { closables } = deps;
  const mainListener = createMainListener({ ...deps.main, keepaliveMs: settings.keepaliveMs });
  const main = closables.add('main listener', await listen(mainListener, settings.listen), closeServer, (server) => server.closeAllConnections());
  main.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => deps.onUpgrade(req, socket, head));
  // Long runs: no request or header timeouts on streaming responses.
  main.requestTimeout = 0;
  main.headersTimeout = 60_000;
  main.keepAliveTimeout = 5_000;
  const ops = closables.add('ops listener', await listen(createOpsApp(deps.ops), settings.opsListen), closeServer, (server) => server.closeAllConnections());
  return { main, ops };
}
