/**
 * The sandbox's web chat page (GET /-/sandbox/chat on the gateway's main listener): a
 * browser client of the WebSocket route and of the follow route (its runs view follows any
 * run in flight, detached ones included), same-origin with them, so the gateway's Origin
 * check lets it in as it would GitLab's own web chat. Mounted by the sandbox only, through
 * GatewayOptions.sandboxRoutes (src/main.ts); a gateway with an owner serves no page.
 *
 * The page is chat.html beside this file, read at every request (an edit shows on reload)
 * from the package root, as the Lua scripts are: the image copies it too (Dockerfile).
 */
import { readFile } from 'node:fs/promises';
import type http from 'node:http';
import type { Server, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import express from 'express';
import path from 'node:path';

export const CHAT_PATH = '/-/sandbox/chat';
/**
 * POST /-/sandbox/drop?workflow=<id>: destroys the TCP connection of that workflow's
 * WebSocket as a lost network would — no close frame — which a browser page cannot do
 * itself (its close() always sends one). The gateway sees a connection lost and parks the
 * run (docs/spec.md §12); the page then reconnects with a resume start. Sandbox only.
 */
export const DROP_PATH = '/-/sandbox/drop';
/**
 * GET /-/sandbox/runs: what /runs on the ops listener lists (the runs in flight, each with
 * its followers), on the page's own origin: the page lists them and follows any of them
 * over the follow route (docs/spec.md §14). Sandbox only.
 */
export const RUNS_PATH = '/-/sandbox/runs';

/** Where the runs view reads the runs in flight: the gateway's, once it started (empty before). */
export interface RunsSource {
  list(): unknown[];
}

/**
 * The cookie the page sets, naming its workflow, before it opens a WebSocket: the browser
 * sends it with the upgrade, which is how the drop route finds that workflow's connection.
 */
export const WORKFLOW_COOKIE = 'longrun_sandbox_workflow';

const CHAT_FILE = path.join(__dirname, 'chat.html');

/**
 * The page may run its own inline script and style and talk to its own origin (the
 * WebSocket route), nothing else: it loads nothing from anywhere.
 */
const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/**
 * The main listener's upgraded sockets by the workflow their page's cookie names. The
 * gateway's own upgrade handling is untouched: this only listens beside it, on the server
 * the page was served from, from its first request to a sandbox route on (the page loads
 * before it opens a socket).
 */
class UpgradeWatch {
  private readonly servers = new WeakSet<Server>();
  private readonly sockets = new Map<string, Set<Duplex>>();

  watch(req: express.Request): void {
    const server = (req.socket as Socket & { server?: Server }).server;
    if (!server || this.servers.has(server)) return;
    this.servers.add(server);
    server.on('upgrade', (upgrade: http.IncomingMessage, socket: Duplex) => this.record(upgrade, socket));
  }

  private record(req: http.IncomingMessage, socket: Duplex): void {
    const workflowId = cookie(req.headers.cookie, WORKFLOW_COOKIE);
    if (!workflowId) return;
    let set = this.sockets.get(workflowId);
    if (!set) this.sockets.set(workflowId, (set = new Set()));
    set.add(socket);
    socket.once('close', () => {
      set.delete(socket);
      if (set.size === 0 && this.sockets.get(workflowId) === set) this.sockets.delete(workflowId);
    });
  }

  /** Destroys the workflow's open connections (no close frame); how many there were. */
  drop(workflowId: string): number {
    const open = [...(this.sockets.get(workflowId) ?? [])].filter((socket) => !socket.destroyed);
    for (const socket of open) socket.destroy();
    return open.length;
  }
}

function cookie(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return decodeURIComponent(part.slice(eq + 1).trim());
  }
  return undefined;
}

export function chatRoutes(runs: RunsSource): express.Router {
  const router = express.Router();
  const upgrades = new UpgradeWatch();
  router.get(RUNS_PATH, (_req, res) => {
    res.set('Cache-Control', 'no-store').json({ runs: runs.list() });
  });
  router.post(DROP_PATH, (req, res) => {
    upgrades.watch(req);
    const workflowId = typeof req.query['workflow'] === 'string' ? req.query['workflow'] : '';
    if (!workflowId) {
      res.status(400).json({ error: { code: 'INVALID_REQUEST', message: 'workflow= names the workflow whose connection to drop' } });
      return;
    }
    const dropped = upgrades.drop(workflowId);
    res
      .status(dropped > 0 ? 200 : 404)
      .set('Cache-Control', 'no-store')
      .json({ workflow: workflowId, dropped });
  });
  router.get(CHAT_PATH, (req, res) => {
    upgrades.watch(req);
    readFile(CHAT_FILE).then(
      (page) => {
        res
          .status(200)
          .set({
            'Content-Type': 'text/html; charset=utf-8',
            'Content-Security-Policy': CONTENT_SECURITY_POLICY,
            'Cache-Control': 'no-store',
            'X-Content-Type-Options': 'nosniff',
            'Referrer-Policy': 'no-referrer',
          })
          .send(page);
      },
      (err: unknown) => {
        res
          .status(500)
          .type('text/plain')
          .send(`the sandbox chat page could not be read: ${(err as Error).message}\n`);
      },
    );
  });
  return router;
}

/** The page's URL on a gateway's main listener. */
export function chatUrl(mainUrl: string): string {
  return `${mainUrl}${CHAT_PATH}`;
}
