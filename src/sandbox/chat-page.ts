/**
 * The sandbox's web chat page (GET /-/sandbox/chat on the gateway's main listener): a
 * browser client of the WebSocket route, same-origin with it, so the gateway's Origin
 * check lets it in as it would GitLab's own web chat. Mounted by the sandbox only, through
 * GatewayOptions.sandboxRoutes (src/main.ts); a gateway with an owner serves no page.
 *
 * The page is chat.html beside this file, read at every request (an edit shows on reload)
 * from the package root, as the Lua scripts are: the image copies it too (Dockerfile).
 */
import { readFile } from 'node:fs/promises';
import express from 'express';
import { fromRoot } from '../paths';

export const CHAT_PATH = '/-/sandbox/chat';

const CHAT_FILE = fromRoot('src', 'sandbox', 'chat.html');

/**
 * The page may run its own inline script and style and talk to its own origin (the
 * WebSocket route), nothing else: it loads nothing from anywhere.
 */
const CONTENT_SECURITY_POLICY = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export function chatRoutes(): express.Router {
  const router = express.Router();
  router.get(CHAT_PATH, (_req, res) => {
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
        res.status(500).type('text/plain').send(`the sandbox chat page could not be read: ${(err as Error).message}\n`);
      },
    );
  });
  return router;
}

/** The page's URL on a gateway's main listener. */
export function chatUrl(mainUrl: string): string {
  return `${mainUrl}${CHAT_PATH}`;
}
