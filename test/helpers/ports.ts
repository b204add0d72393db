/**
 * Free loopback ports for tests that must pass a port number to something other than
 * a server they listen with themselves (a redis-server child, a gateway child process).
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A port that was free a moment ago on `host`: bound on port 0, read, closed. Another
 * process may take it before the caller does; callers that spawn a server on it retry
 * on "address in use" rather than trust it blindly.
 */
export function freePort(host = '127.0.0.1'): Promise<number> {
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
export function holdPort(port: number, host = '127.0.0.1'): Promise<{ close(): Promise<void> }> {
  return new Promise((resolve) => {
    const server = net.createServer((socket) => socket.resetAndDestroy());
    const close = (): Promise<void> => new Promise((done) => server.close(() => done()));
    server.once('error', () => resolve({ close: async () => undefined }));
    server.listen(port, host, () => resolve({ close }));
  });
}
