/**
 * A JSON answer written straight on node's response, byte for byte what express's
 * `res.status(s).json(body)` writes with the apps' settings (no ETag, no X-Powered-By):
 * `Content-Type: application/json; charset=utf-8`, its Content-Length, the body. The
 * execute route answers without express (main-app.ts), and every error goes through
 * here, so both paths answer alike.
 */
import type { ServerResponse } from 'node:http';

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}
