/**
 * Free loopback ports for what must be given a port number rather than listen on 0 itself
 * (a redis-server child, a gateway child process).
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';

/** Where everything a stack starts listens. */
export const HOST = '127.0.0.1';

/**
 * A port that was free a moment ago on `host`: bound on port 0, read, closed. Another
 * process may take it before the caller does; callers that spawn a server on it retry
 * on "address in use" rather than trust it blindly.
 */
export function freePort(host = HOST): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, host, () => {
      const { port } = server.address() as AddressInfo;
      server.close((err) => (err ? reject(err) : resolve(port)));
    });
  });
}

/**
 * Keeps a port that a killed server freed from being taken by another test's server, which
 * the clients and Sentinels still pointed at it would then reach: a listener that resets
 * every connection, as a dead host's port answers. Best effort (taken already: nothing held).
 */
export function holdPort(port: number, host = HOST): Promise<{ close(): Promise<void> }> {
  return new Promise((resolve) => {
    const server = net.createServer((socket) => socket.resetAndDestroy());
    const close = (): Promise<void> => new Promise((done) => server.close(() => done()));
    server.once('error', () => resolve({ close: async () => undefined }));
    server.listen(port, host, () => resolve({ close }));
  });
}
