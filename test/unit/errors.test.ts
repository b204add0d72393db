/**
 * Every error code the code can produce is documented in one table, and an unexpected
 * error leaks nothing to the client.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { Writable } from 'node:stream';
import express from 'express';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { errorCatalog } from '../../src/core/errors';
import { sendError } from '../../src/http/error-response';
import { createLogger } from '../../src/core/log';

const root = path.resolve(__dirname, '../..');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    return statSync(full).isDirectory() ? sourceFiles(full) : full.endsWith('.ts') ? [full] : [];
  });
}

describe('error codes', () => {
  it('every code in the catalogue, and every code thrown in src/, is in docs/errors.md', () => {
    const doc = readFileSync(path.join(root, 'docs/errors.md'), 'utf8');
    const documented = new Set([...doc.matchAll(/^\|[^|]*\| `([A-Z_]+)` \|/gm)].map((m) => m[1]));
    const thrown = new Set<string>();
    for (const file of sourceFiles(path.join(root, 'src'))) {
      for (const m of readFileSync(file, 'utf8').matchAll(/new GatewayError\(\s*'([A-Z_]+)'/g)) thrown.add(m[1] as string);
    }
    expect(thrown.size).toBeGreaterThan(5);
    for (const code of [...Object.keys(errorCatalog), ...thrown]) expect(documented.has(code), `${code} missing from docs/errors.md`).toBe(true);
    for (const code of documented) expect(Object.keys(errorCatalog), `${code} documented but unknown`).toContain(code);
  });

  it('an unexpected error is a 500 INTERNAL without its detail, logged with it', async () => {
    const logged: Buffer[] = [];
    const logger = createLogger('info', new Writable({ write: (c: Buffer, _e, cb) => (logged.push(Buffer.from(c)), cb()) }));
    const app = express();
    app.get('/boom', (_req, res) => {
      sendError(res, new Error('secret database password in stack'), logger);
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    try {
      const res = await request(`http://127.0.0.1:${(server.address() as AddressInfo).port}/boom`);
      const text = await res.body.text();
      expect(res.statusCode).toBe(500);
      expect(JSON.parse(text)).toEqual({ error: { code: 'INTERNAL', message: 'internal error', retryable: true } });
      expect(text).not.toContain('secret');
      expect(Buffer.concat(logged).toString()).toContain('secret database password');
    } finally {
      await new Promise((r) => server.close(r));
    }
  });
});
