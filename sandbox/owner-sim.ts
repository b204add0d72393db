/**
 * The simulated owner service (a Rails stand-in): a real express server that answers
 * the pre-authorization of docs/spec.md §2 (per-workflow configurable), verifies the
 * Gitlab-Workhorse-Api-Request JWT, serves a few API endpoints for runHTTPRequest to
 * hit, serves its own MCP servers (`gitlab` at /api/v4/mcp, `orbit` at
 * /api/v4/orbit/mcp, for the user's token only), receives segment-end callbacks (§6) and
 * records everything it received.
 *
 * As strict as Rails: the API endpoints sit behind a `require_gitlab_workhorse!`-style
 * guard — a valid Gitlab-Workhorse-Api-Request JWT (iss "gitlab-workhorse") and a
 * Gitlab-Workhorse header, else 403 — as the real workflow and checkpoint endpoints do
 * (the MCP endpoints, which MCP clients other than the gateway use too, need only the
 * user's token). Answers use canonical header names, with GitLab's X-Next-Page/X-Total
 * pagination on `/api/v4/projects/:id/issues`; the project, issue, merge request, repository
 * file and commit resources the workflow service's tools use most want the user's token as
 * Rails' API does (gitlab-api.ts).
 *
 * `POST /api/v4/projects/:id/repository/commits` is as strict as the newest Rails: it takes
 * only a body Workhorse uploaded (`requires :file, type: WorkhorseFile`, lib/api/commits.rb;
 * body-upload.ts), after Workhorse asked `…/commits/authorize` where to put it. A JSON body
 * sent straight to it is refused 400 `file is missing`, as Rails refuses it.
 */
import { RECORD_LIMIT, record } from './recorded';
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { waitForChange } from './wait-for';
import type { AddressInfo } from 'node:net';
import type http from 'node:http';
import express from 'express';
import { verifyJwt, WORKHORSE_ISSUER } from '../src/core/jwt';
import { answerGitLabResource } from './gitlab-api';
import { McpEndpointSimulator } from './mcp-sim';
import { BODY_UPLOAD_FIELD, MULTIPART_FIELDS_HEADER, uploadedFile } from './body-upload';

export interface PreauthConfig {
  detached?: boolean;
  lockConcurrentFlow?: boolean;
  timeoutHTTPRequests?: boolean;
  actorId?: string;
  serverCapabilities?: string[];
  mcpServers?: Record<string, { URL?: string; Headers?: Record<string, string>; Tools?: string[] | null; PreApprovedTools?: string[]; Trusted?: boolean }>;
  /** Extra gRPC metadata for Service.Headers (x-gitlab-oauth-token is always set). */
  serviceHeaders?: Record<string, string>;
  /** Service.URI; default the workflow simulator given at start. */
  serviceUri?: string;
  /** Service.Secure: the gateway must connect with TLS. */
  secure?: boolean;
  /** Answer this status, body and headers instead of a preauth (the owner refusing). */
  deny?: { status: number; body: string; contentType?: string; headers?: Record<string, string | string[]> };
  /** Answer a 200 that is malformed in this way. */
  malformed?: 'content-type' | 'json' | 'missing-uri' | 'missing-workflow-id';
  /** Delay the answer (to test the preauth deadline). */
  delayMs?: number;
  /** CloudServiceForSelfHosted: a self-hosted instance's billing service (URI: the workflow simulator). */
  cloudServiceForSelfHosted?: { URI: string; Headers?: Record<string, string>; Secure?: boolean };
  /** The WebSocket route's answer names this WorkflowID (Rails names none). */
  websocketWorkflowId?: string;
}

/** configure(WEBSOCKET_PREAUTH, …) sets what the WebSocket route's preauth answers. */
export const WEBSOCKET_PREAUTH = '(websocket)';

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  at: number;
  /** The X-Forwarded-For the owner received (what Rails derives the client IP from). */
  forwardedFor: string | undefined;
  /** The address of the peer that connected (longrun, for relayed calls). */
  peer: string | undefined;
}

export interface SegmentEnd {
  workflow_id: string;
  run_id: string;
  reason: string;
  segment_duration_s: number;
  actions: number;
  /** Actions unanswered when the segment ended (absent from gateways older than docs/spec.md §6 `in_flight`). */
  in_flight?: Array<{ kind: string; request_id: string; method: string }>;
}

export interface OwnerSimulatorOptions {
  secret: Uint8Array;
  /** The workflow service address put in Service.URI. */
  workflowServiceUri: string;
  host?: string;
  port?: number;
  /** Defaults for every workflow not configured with configure(). */
  defaults?: PreauthConfig;
  /** The user's API token put in Service.Headers["x-gitlab-oauth-token"]. */
  oauthToken?: string;
  /** How many requests of each kind are kept for assertions, the latest first (recorded.ts). */
  recordLimit?: number;
}

export const OWNER_OAUTH_TOKEN = 'sim-oauth-token-0123456789';

/**
 * Rails' limit on the execute preauth: `check_rate_limit!(:duo_workflow_direct_access, scope:
 * current_user)` (ee/lib/api/ai/duo_workflows/workflows.rb), 50 a minute a user
 * (lib/gitlab/application_rate_limiter.rb), answered 429 with `Retry-After` the interval.
 */
export const RAILS_EXECUTE_RATE_LIMIT: RateLimit = { threshold: 50, intervalMs: 60_000 };

export interface RateLimit {
  /** Requests a user may make in a window; the next one is refused. */
  threshold: number;
  /** The window, from a user's first request in it (Rails' counter expires then); Retry-After is this, in seconds. */
  intervalMs: number;
}

/** What Rails' too_many_requests! answers (its `{ error: … }` rendered as the message). */
export const RATE_LIMITED_BODY = '{"message":{"error":"This endpoint has been requested too many times. Try again later."}}';

/** A commit the simulated commits endpoint made. */
export interface CommitMade {
  projectId: string;
  branch: string;
  commitMessage: string;
  actions: Array<{ action: string; file_path: string; content?: string }>;
  /** The uploaded body the commit was read from (its path under the upload directory). */
  uploadedFrom: string;
}

/** The actions Rails' commits endpoint knows (validate_commit_action!). */
const COMMIT_ACTIONS = ['create', 'update', 'move', 'delete', 'chmod'] as const;
/** What Rails' commits uploader allows by default (Repositories::CommitsUploader DEFAULT_MAX_REQUEST_SIZE). */
const COMMIT_MAX_REQUEST_BYTES = 300 * 1024 * 1024;

export class OwnerServiceSimulator {
  readonly preauths: ReceivedRequest[] = [];
  readonly apiRequests: ReceivedRequest[] = [];
  readonly segmentEnds: SegmentEnd[] = [];
  /** Every segment-end request that passed the JWT check, as received (headers included). */
  readonly segmentEndRequests: ReceivedRequest[] = [];
  readonly rejectedJwt: ReceivedRequest[] = [];
  /** API requests refused with 403 by the Workhorse guard (no Gitlab-Workhorse or no valid JWT). */
  readonly rejectedApi: ReceivedRequest[] = [];
  /** Commits made through `POST /api/v4/projects/:id/repository/commits`. */
  readonly commits: CommitMade[] = [];
  /** Issues in every project's paginated `/api/v4/projects/:id/issues`. */
  issuesPerProject = 7;
  private readonly recordLimit: number;
  /** The owner's own MCP servers: `gitlab` (/api/v4/mcp) and `orbit` (/api/v4/orbit/mcp). */
  readonly mcp: McpEndpointSimulator;
  readonly orbitMcp: McpEndpointSimulator;
  /** Answer the next N segment-end callbacks with this status (to test retries). */
  segmentEndFailures: { remaining: number; status: number } = { remaining: 0, status: 503 };
  /** Rate-limit the execute preauth per user as Rails does (RAILS_EXECUTE_RATE_LIMIT); off (undefined) by default. */
  executeRateLimit: RateLimit | undefined;
  /** Each user's window: its requests so far and when it ends. */
  private readonly rateWindows = new Map<string, { count: number; endsAt: number }>();
  /** Never answer segment-end callbacks (a hung owner): they are recorded, then held open. */
  hangSegmentEnds = false;
  /** Called for every accepted segment-end callback (e.g. to re-dispatch the turn). */
  onSegmentEnd: ((end: SegmentEnd) => void) | undefined;
  private readonly configs = new Map<string, PreauthConfig>();
  /** Handlers mounted with use(), run before the simulator's own routes. */
  private readonly mounted = express.Router();
  /**
   * Tokens whose signature already checked out. The gateway reuses one token for 30 s;
   * verifying it again on every request (WebCrypto key import and HMAC) made this
   * simulator, not the gateway, the bottleneck of the drain and accept benchmarks.
   * The verdict is the same: verifyJwt checks signature and issuer only.
   */
  private readonly verifiedTokens = new Set<string>();
  private readonly events = new EventEmitter();
  /** The commits endpoint's TempPath (Rails' public/uploads/tmp/commits), made when first asked for. */
  private uploadDir: Promise<string> | undefined;
  private closing: Promise<void> | undefined;

  private constructor(
    private readonly server: http.Server,
    readonly url: string,
    private readonly options: OwnerSimulatorOptions,
  ) {
    this.events.setMaxListeners(0);
    this.recordLimit = options.recordLimit ?? RECORD_LIMIT;
    const bearerToken = options.oauthToken ?? OWNER_OAUTH_TOKEN;
    this.mcp = new McpEndpointSimulator({ bearerToken });
    this.orbitMcp = new McpEndpointSimulator({ bearerToken });
  }

  static async start(options: OwnerSimulatorOptions): Promise<OwnerServiceSimulator> {
    const app = express();
    let sim: OwnerServiceSimulator | undefined;
    app.disable('x-powered-by');
    app.disable('etag');
    app.use(express.text({ type: () => true, limit: '16mb' }));
    app.use((req, res, next) => (sim ? sim.mounted(req, res, next) : next()));
    app.use((req, res, next) => (sim ? sim.route(req, res, next) : next()));
    const server = app.listen(options.port ?? 0, options.host ?? '127.0.0.1');
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', reject);
    });
    const { address, port } = server.address() as AddressInfo;
    const host = address.includes(':') ? `[${address}]` : address;
    sim = new OwnerServiceSimulator(server, `http://${host}:${port}`, options);
    return sim;
  }

  /**
   * Mounts a handler (e.g. an owner's own segment-end endpoint, an express Router) before
   * the simulator's routes; what it passes on with next() reaches them. Request bodies
   * arrive as text (req.body is a string).
   */
  use(handler: express.RequestHandler): void {
    this.mounted.use(handler);
  }

  /** Sets how preauth answers for one workflow (merged over the defaults). */
  configure(workflowId: string, config: PreauthConfig): void {
    this.configs.set(workflowId, config);
  }

  waitFor(predicate: () => boolean, timeoutMs = 10_000, what = 'condition'): Promise<void> {
    return waitForChange(this.events, 'owner simulator', predicate, timeoutMs, what);
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      await Promise.allSettled([this.mcp.close(), this.orbitMcp.close()]);
      await new Promise<void>((resolve) => {
        this.server.close(() => resolve());
        this.server.closeAllConnections();
      });
      const uploads = await this.uploadDir?.catch(() => undefined);
      if (uploads) await rm(uploads, { recursive: true, force: true });
    })();
    return this.closing;
  }

  private record(req: express.Request): ReceivedRequest {
    return {
      method: req.method,
      path: req.originalUrl,
      headers: { ...req.headers },
      body: typeof req.body === 'string' ? req.body : '',
      at: Date.now(),
      forwardedFor: req.get('x-forwarded-for'),
      peer: req.socket.remoteAddress,
    };
  }

  private async jwtOk(req: express.Request): Promise<boolean> {
    const token = req.get('gitlab-workhorse-api-request');
    if (token === undefined) return false;
    if (this.verifiedTokens.has(token)) return true;
    const ok = await verifyJwt(this.options.secret, token, WORKHORSE_ISSUER);
    if (ok) {
      if (this.verifiedTokens.size >= 1_000) this.verifiedTokens.clear();
      this.verifiedTokens.add(token);
    }
    return ok;
  }

  private route(req: express.Request, res: express.Response, next: express.NextFunction): void {
    void this.dispatch(req, res).then(
      () => this.events.emit('change'),
      (err: unknown) => next(err),
    );
  }

  private async dispatch(req: express.Request, res: express.Response): Promise<void> {
    const received = this.record(req);
    const executeMatch = /\/api\/v4\/ai\/duo_workflows\/workflows\/([^/]+)\/execute$/.exec(req.path);
    // The follow route's preauth (docs/spec.md §14): a GET of its path; answered as the workflow's execute is.
    const followMatch = req.method === 'GET' ? /\/api\/v4\/ai\/duo_workflows\/workflows\/([^/]+)\/follow$/.exec(req.path) : null;
    // The WebSocket route's preauth (GET, as Workhorse asks it): no workflow in the path.
    const websocketPreauth = req.path === '/api/v4/ai/duo_workflows/ws' && req.method === 'GET';
    const segmentEndMatch = /\/api\/v4\/internal\/ai\/duo_workflows\/workflows\/([^/]+)\/segment_end$/.exec(req.path);
    if ((executeMatch || followMatch || segmentEndMatch || websocketPreauth) && !(await this.jwtOk(req))) {
      record(this.rejectedJwt, received, this.recordLimit);
      res.status(401).json({ message: '401 Unauthorized: missing or invalid Gitlab-Workhorse-Api-Request' });
      return;
    }
    if (executeMatch) {
      record(this.preauths, received, this.recordLimit);
      if (this.rateLimited(req, res)) return;
      await this.answerPreauth(decodeURIComponent(executeMatch[1] as string), res);
      return;
    }
    if (followMatch) {
      record(this.preauths, received, this.recordLimit);
      await this.answerPreauth(decodeURIComponent(followMatch[1] as string), res);
      return;
    }
    if (websocketPreauth) {
      record(this.preauths, received, this.recordLimit);
      await this.answerPreauth(WEBSOCKET_PREAUTH, res);
      return;
    }
    if (segmentEndMatch) {
      record(this.segmentEndRequests, received, this.recordLimit);
      if (this.hangSegmentEnds) return;
      if (this.segmentEndFailures.remaining > 0) {
        this.segmentEndFailures.remaining -= 1;
        res.status(this.segmentEndFailures.status).json({ message: 'simulated failure' });
        return;
      }
      const end = JSON.parse(received.body || '{}') as SegmentEnd;
      record(this.segmentEnds, end, this.recordLimit);
      res.status(204).end();
      this.onSegmentEnd?.(end);
      return;
    }
    const mcp = req.path === '/api/v4/mcp' ? this.mcp : req.path === '/api/v4/orbit/mcp' ? this.orbitMcp : undefined;
    if (mcp) {
      let body: unknown;
      try {
        body = received.body === '' ? undefined : JSON.parse(received.body);
      } catch {
        res.status(400).json({ message: 'body is not JSON' });
        return;
      }
      await mcp.handle(req, res, body);
      return;
    }
    const refusal = await this.workhorseGuard(req);
    if (refusal) {
      record(this.rejectedApi, received, this.recordLimit);
      res.status(403).json({ message: refusal });
      return;
    }
    record(this.apiRequests, received, this.recordLimit);
    await this.answerApi(req, res, received);
  }

  /**
   * Rails' ApplicationRateLimiter, as check_rate_limit! uses it: a counter per user (the
   * caller's credentials; one for anonymous callers) that starts a window at its first
   * request; past the threshold within it, 429 with Retry-After the whole interval.
   */
  private rateLimited(req: express.Request, res: express.Response): boolean {
    const limit = this.executeRateLimit;
    if (!limit) return false;
    const user = req.get('authorization') ?? req.get('private-token') ?? '(anonymous)';
    const now = Date.now();
    let window = this.rateWindows.get(user);
    if (!window || now >= window.endsAt) this.rateWindows.set(user, (window = { count: 0, endsAt: now + limit.intervalMs }));
    window.count += 1;
    if (window.count <= limit.threshold) return false;
    res
      .status(429)
      .set('Retry-After', String(Math.ceil(limit.intervalMs / 1_000)))
      .type('application/json')
      .send(RATE_LIMITED_BODY);
    return true;
  }

  /**
   * Rails' `require_gitlab_workhorse!`: the JWT is verified first (a bad one is a bare
   * 403), then the Gitlab-Workhorse header must be present. Null when the request passes.
   */
  private async workhorseGuard(req: express.Request): Promise<string | null> {
    if (!(await this.jwtOk(req))) return '403 Forbidden';
    if (!req.get('gitlab-workhorse')) return '403 Forbidden - Request should be executed via GitLab Workhorse';
    return null;
  }

  private async answerPreauth(workflowId: string, res: express.Response): Promise<void> {
    const config: PreauthConfig = { ...this.options.defaults, ...this.configs.get(workflowId) };
    if (config.delayMs) await new Promise((r) => setTimeout(r, config.delayMs));
    if (config.deny) {
      for (const [name, value] of Object.entries(config.deny.headers ?? {})) res.setHeader(name, value);
      res
        .status(config.deny.status)
        .type(config.deny.contentType ?? 'application/json')
        .send(config.deny.body);
      return;
    }
    const body = {
      DuoWorkflow: {
        Service: {
          URI: config.malformed === 'missing-uri' ? undefined : (config.serviceUri ?? this.options.workflowServiceUri),
          Headers: { 'x-gitlab-oauth-token': this.options.oauthToken ?? OWNER_OAUTH_TOKEN, ...config.serviceHeaders },
          Secure: config.secure ?? false,
        },
        McpServers: config.mcpServers ?? {},
        ...(config.cloudServiceForSelfHosted ? { CloudServiceForSelfHosted: config.cloudServiceForSelfHosted } : {}),
        LockConcurrentFlow: config.lockConcurrentFlow ?? true,
        ServerCapabilities: config.serverCapabilities ?? ['owner_capability'],
        TimeoutHTTPRequests: config.timeoutHTTPRequests ?? true,
        // Rails names no workflow on the WebSocket route (the client does, in its start) unless configured to.
        WorkflowID: config.malformed === 'missing-workflow-id' ? undefined : workflowId === WEBSOCKET_PREAUTH ? config.websocketWorkflowId : workflowId,
        ...(config.actorId === undefined ? {} : { ActorID: config.actorId }),
      },
      ...(config.detached === undefined ? {} : { Detached: config.detached }),
    };
    if (config.malformed === 'json') {
      res.status(200).type('application/vnd.gitlab-workhorse+json').send('{"DuoWorkflow": ');
    } else if (config.malformed === 'content-type') {
      res.status(200).type('application/json').send(JSON.stringify(body));
    } else {
      res.status(200).type('application/vnd.gitlab-workhorse+json').send(JSON.stringify(body));
    }
  }

  /** API endpoints for relayed runHTTPRequest actions. */
  private async answerApi(req: express.Request, res: express.Response, received: ReceivedRequest): Promise<void> {
    const path = req.path;
    const commits = req.method === 'POST' ? /^\/api\/v4\/projects\/([^/]+)\/repository\/commits(\/authorize)?$/.exec(path) : null;
    if (commits) {
      if (req.get('authorization') !== `Bearer ${this.options.oauthToken ?? OWNER_OAUTH_TOKEN}`) {
        res.status(401).json({ message: '401 Unauthorized' });
      } else if (commits[2]) {
        // workhorse_authorize_commits_body_upload!: where Workhorse is to store the body.
        res
          .status(200)
          .type('application/vnd.gitlab-workhorse+json')
          .send(JSON.stringify({ TempPath: await this.uploads(), MaximumSize: COMMIT_MAX_REQUEST_BYTES }));
      } else {
        await this.answerCommit(req, res, received, decodeURIComponent(commits[1] as string));
      }
    } else if (path === '/api/v4/echo') {
      res.status(200).json({ method: req.method, path: req.originalUrl, body: received.body, headers: req.headers });
    } else if (path === '/api/v4/slow') {
      const ms = Number(req.query['ms'] ?? 10_000);
      const timer = setTimeout(() => res.status(200).json({ slow: true, ms }), ms);
      res.on('close', () => clearTimeout(timer));
    } else if (path === '/api/v4/large') {
      const bytes = Number(req.query['bytes'] ?? 5 * 1024 * 1024);
      res.status(200).type('text/plain').send('x'.repeat(bytes));
    } else if (path === '/api/v4/redirect') {
      res.redirect(302, String(req.query['to'] ?? 'http://127.0.0.1:1/elsewhere'));
    } else if (path === '/api/v4/status') {
      res.status(Number(req.query['code'] ?? 500)).json({ message: 'as asked' });
    } else if (path === '/api/v4/reset') {
      // The connection is reset (RST) instead of answered: a crashed or restarted upstream.
      req.socket.resetAndDestroy();
    } else if (path === '/api/v4/headers') {
      this.answerHeaderShapes(res);
    } else if (/^\/api\/v4\/projects\/[^/]+\/issues$/.test(path)) {
      this.answerIssuesPage(req, res);
    } else if (answerGitLabResource(req, res, received.body, this.options.oauthToken ?? OWNER_OAUTH_TOKEN)) {
      return;
    } else {
      res.status(404).json({ message: '404 Not Found' });
    }
  }

  private uploads(): Promise<string> {
    this.uploadDir ??= mkdtemp(path.join(os.tmpdir(), 'longrun-owner-sim-uploads-'));
    return this.uploadDir;
  }

  /**
   * `POST :id/repository/commits` as the newest Rails serves it: the `file` param must be an
   * UploadedFile, which only Workhorse's body upload makes (body-upload.ts), else Grape's
   * validation answers 400; then the commit's attributes are read from the uploaded file
   * (file_params_from_body_upload: JSON, no Content-Type param) and validated
   * (validate_commits_attrs!). Made: 201 with the commit.
   */
  private async answerCommit(req: express.Request, res: express.Response, received: ReceivedRequest, projectId: string): Promise<void> {
    const form = new URLSearchParams(req.is('application/x-www-form-urlencoded') ? received.body : '');
    const upload = await uploadedFile(this.options.secret, req.get(MULTIPART_FIELDS_HEADER), form, BODY_UPLOAD_FIELD, await this.uploads());
    if (upload.kind === 'refused') {
      if (upload.status === 400) res.status(400).type('text/plain').send(upload.message);
      else res.status(500).json({ message: upload.message });
      return;
    }
    if (upload.kind === 'none') {
      // Grape's `requires :file, type: WorkhorseFile`: absent, or a plain value the type refuses.
      let sent = form.has(BODY_UPLOAD_FIELD);
      if (req.is('application/json')) {
        try {
          const json = JSON.parse(received.body) as unknown;
          sent = typeof json === 'object' && json !== null && BODY_UPLOAD_FIELD in json;
        } catch {
          sent = false;
        }
      }
      res.status(400).json({ error: `${BODY_UPLOAD_FIELD} is ${sent ? 'invalid' : 'missing'}` });
      return;
    }
    let attrs: Record<string, unknown>;
    try {
      attrs = JSON.parse(await readFile(upload.file.path, 'utf8')) as Record<string, unknown>;
      if (typeof attrs !== 'object' || attrs === null || Array.isArray(attrs)) throw new Error('not an object');
    } catch {
      res.status(400).json({ message: 'Invalid json', error: 'Invalid json' });
      return;
    }
    const refusal = commitRefusal(attrs);
    if (refusal) {
      res.status(400).json({ message: `400 Bad request - ${refusal}` });
      return;
    }
    const made: CommitMade = {
      projectId,
      branch: attrs['branch'] as string,
      commitMessage: attrs['commit_message'] as string,
      actions: attrs['actions'] as CommitMade['actions'],
      uploadedFrom: upload.file.path,
    };
    record(this.commits, made, this.recordLimit);
    const id = createHash('sha1').update(`${projectId}\0${made.branch}\0${made.commitMessage}\0${this.commits.length}`).digest('hex');
    res.status(201).json({
      id,
      short_id: id.slice(0, 8),
      title: made.commitMessage.split('\n', 1)[0],
      message: made.commitMessage,
      author_name: 'Sandbox User',
      parent_ids: [],
      stats: { additions: made.actions.length, deletions: 0, total: made.actions.length },
    });
  }

  /**
   * One page of a project's issues, paginated as GitLab's API does it: `page` and
   * `per_page` (default 20, at most 100) in, X-Page, X-Per-Page, X-Total, X-Total-Pages,
   * X-Next-Page and X-Prev-Page (empty when there is none) and Link out.
   */
  private answerIssuesPage(req: express.Request, res: express.Response): void {
    const projectId = req.path.split('/')[4] ?? '';
    const positive = (value: unknown, fallback: number): number => {
      const n = Number(value);
      return Number.isInteger(n) && n > 0 ? n : fallback;
    };
    const perPage = Math.min(100, positive(req.query['per_page'], 20));
    const total = this.issuesPerProject;
    const totalPages = Math.max(1, Math.ceil(total / perPage));
    const page = positive(req.query['page'], 1);
    const first = (page - 1) * perPage;
    const items = Array.from({ length: Math.max(0, Math.min(perPage, total - first)) }, (_, i) => ({
      id: 1_000 + first + i,
      iid: first + i + 1,
      project_id: projectId,
      title: `issue ${first + i + 1}`,
    }));
    const link = (p: number, rel: string): string => `<${req.protocol}://${req.get('host') ?? ''}${req.path}?page=${p}&per_page=${perPage}>; rel="${rel}"`;
    const links = [page < totalPages ? link(page + 1, 'next') : '', page > 1 ? link(page - 1, 'prev') : '', link(1, 'first'), link(totalPages, 'last')];
    res.setHeader('Link', links.filter(Boolean).join(', '));
    res.setHeader('X-Page', String(page));
    res.setHeader('X-Per-Page', String(perPage));
    res.setHeader('X-Total', String(total));
    res.setHeader('X-Total-Pages', String(totalPages));
    res.setHeader('X-Next-Page', page < totalPages ? String(page + 1) : '');
    res.setHeader('X-Prev-Page', page > 1 && page <= totalPages + 1 ? String(page - 1) : '');
    res.status(200).json(items);
  }

  /**
   * An answer with every header shape a relay must handle: a name sent in lower case,
   * repeated headers, a header named in Connection, Keep-Alive, a Proxy-* header, a
   * chunked body with a declared trailer.
   */
  private answerHeaderShapes(res: express.Response): void {
    res.setHeader('x-lower-case', 'kept');
    res.setHeader('X-Multi', ['one', 'two']);
    res.setHeader('WWW-Authenticate', ['Bearer realm="gitlab"', 'Basic realm="gitlab"']);
    res.setHeader('Set-Cookie', ['a=1; Path=/', 'b=2; Path=/']);
    res.setHeader('Connection', 'keep-alive, X-Hop-Secret');
    res.setHeader('X-Hop-Secret', 'for the next hop only');
    res.setHeader('Keep-Alive', 'timeout=5');
    res.setHeader('Proxy-Authenticate', 'Basic realm="proxy"');
    res.setHeader('Trailer', 'X-Checksum');
    res.setHeader('Content-Type', 'application/json');
    res.status(200);
    // Written in parts without a Content-Length: Transfer-Encoding: chunked.
    res.write('{"shapes":');
    res.addTrailers({ 'X-Checksum': 'none' });
    res.end('true}');
  }
}

/** Why Rails' validate_commits_attrs! refuses these attributes, or undefined. */
function commitRefusal(attrs: Record<string, unknown>): string | undefined {
  const blank = (value: unknown): boolean => value === undefined || value === null || value === '' || (Array.isArray(value) && value.length === 0);
  if (blank(attrs['branch'])) return 'branch is required';
  if (blank(attrs['commit_message'])) return 'commit_message is required';
  const actions = attrs['actions'];
  if (blank(actions) || !Array.isArray(actions)) return 'actions is required';
  for (const [index, action] of (actions as Array<Record<string, unknown>>).entries()) {
    if (blank(action?.['action'])) return `actions[${index}][action] is required`;
    if (blank(action['file_path'])) return `actions[${index}][file_path] is required`;
    if (!(COMMIT_ACTIONS as readonly unknown[]).includes(action['action'])) return `actions[${index}][action] must be one of: ${COMMIT_ACTIONS.join(', ')}`;
  }
  return undefined;
}
