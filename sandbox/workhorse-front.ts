/**
 * A Workhorse-like front for the simulated owner: what LONGRUN_RELAY_URL points at beside a
 * real GitLab (Workhorse's own listener), reduced to the parts a relayed call meets. A real
 * HTTP server that forwards to the owner simulator, as Workhorse's upstream router does
 * (workhorse/internal/upstream/upstream.go, routes.go; proxy/proxy.go):
 *
 * - a request outside the relative URL root is answered 404 `Not found "<path>"`; routes
 *   match the path without the root, and the request goes on with it;
 * - `Gitlab-Workhorse-Multipart-Fields` is deleted from every request (only Workhorse's own
 *   uploads may carry it);
 * - `POST …/projects/:id/repository/commits` goes through the request-body uploader
 *   (upload/body_uploader.go): Rails' `…/authorize` preauth (the request's headers, no body,
 *   `Gitlab-Workhorse` and a fresh `Gitlab-Workhorse-Api-Request`) names `TempPath` and
 *   `MaximumSize`; the body is stored in a file there; the request goes on with the file's
 *   fields as a form body and the signed `Gitlab-Workhorse-Multipart-Fields` header
 *   (body-upload.ts), and the file is removed once Rails has answered. A refused preauth is
 *   passed back as it is;
 * - everything else is proxied as it came; every forwarded request gets `Gitlab-Workhorse:
 *   <its version>`, `Gitlab-Workhorse-Proxy-Start` and the peer appended to `X-Forwarded-For`
 *   (Go's reverse proxy).
 *
 * Left out: send-data answers (Gitlab-Workhorse-Send-Data passes through unreplaced),
 * blocking of internal answers, per-route body limits, the other upload routes.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { SignJWT } from 'jose';
import { Pool } from 'undici';
import { WORKHORSE_ISSUER } from '../src/core/jwt';
import { BODY_UPLOAD_FIELD, MULTIPART_FIELDS_HEADER, UPLOAD_JWT_SUFFIX } from './body-upload';

export interface WorkhorseFrontOptions {
  /** The owner (Rails) it forwards to: its origin. */
  upstream: string;
  /** Workhorse's secret: it signs its preauths and uploads with it. */
  secret: Uint8Array;
  /** GitLab's relative URL root ("/gitlab"), "" or absent at the domain root. */
  relativeUrlRoot?: string;
  /** What it sends as `Gitlab-Workhorse` (its version). */
  version?: string;
  host?: string;
}

/** One request the front handled: how it was routed, and the status it answered. */
export interface FrontRequest {
  method: string;
  path: string;
  route: 'body_upload' | 'proxy' | 'not_found';
  status: number;
  /** body_upload: the file the body was stored in (removed once Rails answered). */
  uploadPath?: string;
}

/** The body uploader's route (routes.go: `apiProjectPattern + /repository/commits\z`, POST). */
const COMMITS_ROUTE = /^\/api\/v4\/projects\/[^/]+\/repository\/commits$/;
/** Headers of one connection, never forwarded (RFC 9110 §7.6.1). */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host', 'content-length']);
const PREAUTH_CONTENT_TYPE = 'application/vnd.gitlab-workhorse+json';

function sign(secret: Uint8Array, claims: Record<string, unknown>): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setIssuer(WORKHORSE_ISSUER).setIssuedAt().sign(secret);
}

/** Writes an owner's answer back to the client: its status, end-to-end headers and body. */
function passBack(res: http.ServerResponse, status: number, headers: Record<string, string | string[] | undefined>, body: Buffer): void {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  res.writeHead(status, out).end(body);
}

async function readBody(req: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export class WorkhorseFront {
  readonly requests: FrontRequest[] = [];
  private readonly pool: Pool;
  private readonly root: string;
  private readonly version: string;
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly server: http.Server,
    readonly url: string,
    private readonly options: WorkhorseFrontOptions,
  ) {
    this.pool = new Pool(new URL(options.upstream).origin, { connections: 16 });
    this.root = (options.relativeUrlRoot ?? '').replace(/\/+$/, '');
    this.version = options.version ?? 'v18.0.0-sim';
  }

  static async start(options: WorkhorseFrontOptions): Promise<WorkhorseFront> {
    let front: WorkhorseFront | undefined;
    const server = http.createServer((req, res) => {
      void front?.serve(req, res).catch(() => {
        if (!res.headersSent) res.writeHead(502).end();
        else res.destroy();
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, options.host ?? '127.0.0.1', resolve);
    });
    const { address, port } = server.address() as AddressInfo;
    front = new WorkhorseFront(server, `http://${address.includes(':') ? `[${address}]` : address}:${port}`, options);
    return front;
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      await new Promise<void>((resolve) => {
        this.server.close(() => resolve());
        this.server.closeAllConnections();
      });
      await this.pool.destroy();
    })();
    return this.closing;
  }

  private async serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const target = req.url ?? '/';
    const pathname = target.split('?', 1)[0] as string;
    // The URL prefix check: the root itself and everything under it.
    if (this.root !== '' && pathname !== this.root && !pathname.startsWith(`${this.root}/`)) {
      this.requests.push({ method: req.method ?? '', path: target, route: 'not_found', status: 404 });
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end(`Not found ${JSON.stringify(pathname)}\n`);
      return;
    }
    const routed = pathname.slice(this.root.length) || '/';
    const body = await readBody(req);
    const headers = this.forwarded(req);
    if (req.method === 'POST' && COMMITS_ROUTE.test(routed)) return this.uploadBody(res, target, headers, body);
    const status = await this.proxy(res, req.method ?? 'GET', target, headers, body);
    this.requests.push({ method: req.method ?? '', path: target, route: 'proxy', status });
  }

  /** The request's end-to-end headers, less the upload header, plus what Workhorse's proxy sets. */
  private forwarded(req: http.IncomingMessage): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value === undefined || HOP_BY_HOP.has(name) || name === MULTIPART_FIELDS_HEADER) continue;
      out[name] = Array.isArray(value) ? value.join(', ') : value;
    }
    const peer = req.socket.remoteAddress ?? '';
    out['x-forwarded-for'] = out['x-forwarded-for'] ? `${out['x-forwarded-for']}, ${peer}` : peer;
    out['gitlab-workhorse'] = this.version;
    out['gitlab-workhorse-proxy-start'] = String(process.hrtime.bigint());
    return out;
  }

  /** Forwards a request to the owner and writes its answer back; the status. */
  private async proxy(res: http.ServerResponse, method: string, target: string, headers: Record<string, string>, body: Buffer): Promise<number> {
    const answer = await this.pool.request({ method: method as 'GET', path: target, headers, body: body.length > 0 ? body : undefined });
    passBack(res, answer.statusCode, answer.headers, Buffer.from(await answer.body.arrayBuffer()));
    return answer.statusCode;
  }

  /** The request-body uploader: preauth, store, forward the file's fields, remove the file. */
  private async uploadBody(res: http.ServerResponse, target: string, headers: Record<string, string>, body: Buffer): Promise<void> {
    const entry: FrontRequest = { method: 'POST', path: target, route: 'body_upload', status: 0 };
    this.requests.push(entry);
    const [pathname, query] = target.split(/\?(.*)/s, 2) as [string, string | undefined];
    const authorize = await this.pool.request({
      method: 'POST',
      path: `${pathname}/authorize${query === undefined ? '' : `?${query}`}`,
      headers: { ...headers, 'gitlab-workhorse-api-request': await sign(this.options.secret, {}) },
    });
    const answer = Buffer.from(await authorize.body.arrayBuffer());
    if (authorize.statusCode !== 200) {
      // PreAuthorizeHandler: Rails' refusal goes back to the client as it is.
      entry.status = authorize.statusCode;
      passBack(res, authorize.statusCode, authorize.headers, answer);
      return;
    }
    const type = String(authorize.headers['content-type'] ?? '')
      .split(';', 1)[0]
      ?.trim();
    const preauth = type === PREAUTH_CONTENT_TYPE ? (JSON.parse(answer.toString('utf8')) as { TempPath?: string; MaximumSize?: number }) : undefined;
    if (!preauth?.TempPath) {
      entry.status = 500;
      res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('Internal Server Error\n');
      return;
    }
    if (preauth.MaximumSize && body.length > preauth.MaximumSize) {
      entry.status = 413;
      res
        .writeHead(413, { 'content-type': 'text/plain; charset=utf-8' })
        .end(`RequestBody: upload failed: the upload size ${body.length} is over maximum of ${preauth.MaximumSize} bytes: entity is too large`);
      return;
    }
    await mkdir(preauth.TempPath, { recursive: true, mode: 0o700 });
    const stored = path.join(preauth.TempPath, `gitlab-workhorse-upload${randomBytes(6).toString('hex')}`);
    entry.uploadPath = stored;
    const started = process.hrtime.bigint();
    await writeFile(stored, body, { mode: 0o600 });
    try {
      const fields: Record<string, string> = {
        name: 'upload',
        path: stored,
        remote_url: '',
        remote_id: '',
        size: String(body.length),
        upload_duration: String(Number(process.hrtime.bigint() - started) / 1e9),
      };
      for (const hash of ['md5', 'sha1', 'sha256', 'sha512']) fields[hash] = createHash(hash).update(body).digest('hex');
      const form = new URLSearchParams();
      for (const [name, value] of Object.entries(fields)) form.set(`${BODY_UPLOAD_FIELD}.${name}`, value);
      form.set(`${BODY_UPLOAD_FIELD}${UPLOAD_JWT_SUFFIX}`, await sign(this.options.secret, { upload: fields }));
      const rewritten = await sign(this.options.secret, { rewritten_fields: { [BODY_UPLOAD_FIELD]: stored } });
      // The signing proxy: the API request JWT is Workhorse's own, signed now.
      const upload = {
        ...headers,
        'content-type': 'application/x-www-form-urlencoded',
        [MULTIPART_FIELDS_HEADER]: rewritten,
        'gitlab-workhorse-api-request': await sign(this.options.secret, {}),
      };
      entry.status = await this.proxy(res, 'POST', target, upload, Buffer.from(form.toString()));
    } finally {
      await rm(stored, { force: true });
    }
  }
}
