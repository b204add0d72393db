/**
 * This side of a WebSocket's close handshake (RFC 6455 §7): the close frame sent once, and a
 * client that does not answer it within the close timeout cut off. Apart from the
 * connection's phase (connection.ts): whatever the run is doing, the socket may be closing.
 */
import type { WebSocket } from 'ws';
import type { Close } from './close-codes';

export class CloseHandshake {
  private timer: NodeJS.Timeout | undefined;
  private closeSent = false;

  constructor(
    private readonly socket: WebSocket,
    private readonly timeoutMs: number,
    /** Told of each close frame sent (metrics). */
    private readonly onSend: (close: Close) => void,
  ) {}

  /** Whether this side sent its close frame: what the client sends after is not read, and its close echoes ours. */
  get sent(): boolean {
    return this.closeSent;
  }

  /** Sends `close` unless the socket is no longer open; cuts the socket off when no close answers within the timeout. */
  send(close: Close): void {
    if (this.socket.readyState !== this.socket.OPEN) return;
    this.closeSent = true;
    this.onSend(close);
    this.socket.close(close.code, close.reason);
    this.timer = setTimeout(() => this.socket.terminate(), this.timeoutMs);
  }

  /** The socket closed: the timer goes. */
  dispose(): void {
    clearTimeout(this.timer);
  }
}
