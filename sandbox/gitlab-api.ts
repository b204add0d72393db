/**
 * The GitLab REST resources the workflow service's tools read and write most, as the owner
 * simulator serves them to relayed runHTTPRequest actions (duo_workflow_service/tools:
 * project.py, issue.py, merge_request.py, repository_files.py, commit.py). As strict as
 * Rails' API on what a relay must get right:
 *
 * - the user's OAuth token as `Authorization: Bearer` (the one the preauth gave the
 *   service), else 401 `{"message":"401 Unauthorized"}`;
 * - a repository file's path as one URL-encoded segment (`src%2Fapp.rb`), as Grape's
 *   `:file_path` requires: an unencoded slash is another route, a 404;
 * - `ref` required on repository files (400 `{"error":"ref is missing"}`); a commit is made
 *   only from a body Workhorse uploaded (owner-sim.ts `answerCommit`, as the newest Rails);
 * - a raw file is not in Rails' answer: Rails sends it as Workhorse's job (`send_git_blob`:
 *   200, `Gitlab-Workhorse-Send-Data: git-blob:<base64 JSON>`, an empty body), which
 *   Workhorse's senddata completes from Gitaly; the file as JSON (`…/files/:path`, base64
 *   content) is in Rails' own answer.
 *
 * Resources are made up from their ids, the same on every call. Returns false for a path
 * that is none of these (the simulator's other endpoints answer it).
 */
import { createHash } from 'node:crypto';
import type express from 'express';

/** A file every project's repository has (anything else is a 404, as for a missing file). */
export const REPOSITORY_FILES: Readonly<Record<string, string>> = {
  'README.md': '# sandbox project\n',
  'src/app.rb': 'puts "hello"\n',
};

const PROJECT = /^\/api\/v4\/projects\/([^/]+)(\/.*)?$/;

function project(id: string): Record<string, unknown> {
  return { id: Number(id) || id, name: 'sandbox-project', path_with_namespace: `sandbox/project-${id}`, default_branch: 'main' };
}

function commit(sha: string, message = `commit ${sha.slice(0, 8)}`): Record<string, unknown> {
  return { id: sha, short_id: sha.slice(0, 8), title: message, message, author_name: 'Sandbox User', parent_ids: [] };
}

function badRequest(res: express.Response, error: string): true {
  res.status(400).json({ error });
  return true;
}

type Resource = 'project' | 'issue' | 'merge_request' | 'file_raw' | 'file' | 'commit' | 'commit_diff';

/** Method, path under the project, and what it is; the capture is the resource's id. */
const RESOURCES: ReadonlyArray<readonly [string, RegExp, Resource]> = [
  ['GET', /^$/, 'project'],
  ['GET', /^\/issues\/(\d+)$/, 'issue'],
  ['GET', /^\/merge_requests\/(\d+)$/, 'merge_request'],
  ['GET', /^\/repository\/files\/([^/]+)\/raw$/, 'file_raw'],
  ['GET', /^\/repository\/files\/([^/]+)$/, 'file'],
  ['GET', /^\/repository\/commits\/([0-9a-f]{7,40})$/, 'commit'],
  ['GET', /^\/repository\/commits\/([0-9a-f]{7,40})\/diff$/, 'commit_diff'],
];

/** Answers `req` when it is one of these resources; the body is the relay's, as text. */
export function answerGitLabResource(req: express.Request, res: express.Response, body: string, userToken: string): boolean {
  const match = PROJECT.exec(req.path);
  if (!match) return false;
  const [, id = '', rest = ''] = match;
  let found: { resource: Resource; param: string } | undefined;
  for (const [method, pattern, resource] of RESOURCES) {
    const hit = req.method === method ? pattern.exec(rest) : null;
    if (hit) found = { resource, param: hit[1] ?? '' };
  }
  // The issues list and everything else under a project: the simulator's other answers.
  if (!found) return false;
  if (req.get('authorization') !== `Bearer ${userToken}`) {
    res.status(401).json({ message: '401 Unauthorized' });
    return true;
  }
  const { resource, param } = found;
  const projectId = Number(id) || id;
  switch (resource) {
    case 'project':
      res.status(200).json(project(id));
      return true;
    case 'issue':
      res.status(200).json({ id: 5_000 + Number(param), iid: Number(param), project_id: projectId, title: `issue ${param}`, state: 'opened' });
      return true;
    case 'merge_request':
      res
        .status(200)
        .json({ id: 6_000 + Number(param), iid: Number(param), project_id: projectId, title: `merge request ${param}`, source_branch: 'feature', target_branch: 'main' });
      return true;
    case 'file_raw':
    case 'file':
      return answerFile(req, res, param, resource === 'file_raw');
    case 'commit':
      res.status(200).json(commit(param));
      return true;
    case 'commit_diff':
      res.status(200).json([{ old_path: 'src/app.rb', new_path: 'src/app.rb', diff: '@@ -1 +1 @@\n-puts "hi"\n+puts "hello"\n' }]);
      return true;
  }
}

function answerFile(req: express.Request, res: express.Response, encodedPath: string, raw: boolean): true {
  const ref = req.query['ref'];
  if (typeof ref !== 'string' || ref === '') return badRequest(res, 'ref is missing');
  let filePath: string;
  try {
    filePath = decodeURIComponent(encodedPath);
  } catch {
    return badRequest(res, 'file_path is invalid');
  }
  const content = REPOSITORY_FILES[filePath];
  if (content === undefined) res.status(404).json({ message: '404 File Not Found' });
  else if (raw) {
    const blob = { GitalyServer: { address: 'unix:/var/opt/gitlab/gitaly/gitaly.socket' }, GetBlobRequest: { oid: blobId(filePath), limit: -1 } };
    res
      .status(200)
      .type('text/plain')
      .set('Content-Disposition', `inline; filename="${filePath.split('/').pop() ?? filePath}"`)
      .set('Gitlab-Workhorse-Send-Data', `git-blob:${Buffer.from(JSON.stringify(blob)).toString('base64url')}`)
      .send('');
  } else res.status(200).json({ file_path: filePath, ref, encoding: 'base64', content: Buffer.from(content).toString('base64') });
  return true;
}

/** A blob id for a file, the same every call. */
function blobId(filePath: string): string {
  return createHash('sha1').update(`blob ${filePath}`).digest('hex');
}
