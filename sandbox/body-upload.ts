/**
 * GitLab Workhorse's request-body upload as Rails receives it, for the simulators: Workhorse
 * (workhorse/internal/upload/body_uploader.go) stores a request's body in a file under the
 * `TempPath` Rails' `…/authorize` preauth named, and forwards the request with a form body of
 * the file's fields instead — `file.name`, `file.path`, `file.size`, the hashes, and
 * `file.gitlab-workhorse-upload`, a JWT of the same fields (destination.go
 * `GitLabFinalizeFields`) — plus the `Gitlab-Workhorse-Multipart-Fields` header, a JWT of
 * `{rewritten_fields: {file: <path>}}` (saved_file_tracker.go). Both are HS256 with the
 * Workhorse secret, iss "gitlab-workhorse". Workhorse deletes that header from every request it
 * receives (upstream.go `requestHeaderBlacklist`), so only its own uploads carry it.
 *
 * Rails' Gitlab::Middleware::Multipart turns them into an UploadedFile param, and only then
 * does `requires :file, type: WorkhorseFile` (lib/api/commits.rb) let the request in.
 * uploadedFile() is that middleware's check, as the owner simulator applies it.
 */
import { realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { jwtVerify } from 'jose';
import { WORKHORSE_ISSUER } from '../src/core/jwt';

/** The header listing the fields Workhorse rewrote (upload.RewrittenFieldsHeader). */
export const MULTIPART_FIELDS_HEADER = 'gitlab-workhorse-multipart-fields';
/** The form parameter beside a rewritten field `f` that carries its signed fields: `f.gitlab-workhorse-upload`. */
export const UPLOAD_JWT_SUFFIX = '.gitlab-workhorse-upload';
/** The field a body upload is stored under. */
export const BODY_UPLOAD_FIELD = 'file';

/** The file an upload names, as Rails' UploadedFile has it. */
export interface UploadedFile {
  path: string;
  size: number;
  name: string;
}

/** What the middleware made of a request: no upload, the file, or a refusal with Rails' status. */
export type UploadCheck = { kind: 'none' } | { kind: 'file'; file: UploadedFile } | { kind: 'refused'; status: 400 | 500; message: string };

async function claimsOf(secret: Uint8Array, token: string): Promise<Record<string, unknown> | undefined> {
  try {
    return (await jwtVerify(token, secret, { algorithms: ['HS256'], issuer: WORKHORSE_ISSUER })).payload;
  } catch {
    return undefined;
  }
}

/**
 * Rails' Multipart middleware for the top-level field `field`: without the header, nothing
 * (the form's own `file`, if any, stays a string, which `type: WorkhorseFile` refuses). With
 * it: a header or upload JWT that does not verify, or names no upload for the field, raises
 * in Rails (500); a path outside `allowedDir` (Rails' allowed upload paths) or a file that is
 * not there is UploadedFile's InvalidPathError (400).
 */
export async function uploadedFile(secret: Uint8Array, header: string | undefined, form: URLSearchParams, field: string, allowedDir: string): Promise<UploadCheck> {
  if (header === undefined || header === '') return { kind: 'none' };
  const message = await claimsOf(secret, header);
  const rewritten = message?.['rewritten_fields'];
  if (!rewritten || typeof rewritten !== 'object') return { kind: 'refused', status: 500, message: '500 Internal Server Error' };
  if (!(field in rewritten)) return { kind: 'none' };
  const token = form.get(`${field}${UPLOAD_JWT_SUFFIX}`);
  const upload = token ? (await claimsOf(secret, token))?.['upload'] : undefined;
  if (!upload || typeof upload !== 'object' || Object.keys(upload).length === 0) return { kind: 'refused', status: 500, message: '500 Internal Server Error' };
  const fields = upload as Record<string, unknown>;
  const filePath = typeof fields['path'] === 'string' ? fields['path'] : '';
  let real: string;
  try {
    real = await realpath(filePath);
  } catch {
    return { kind: 'refused', status: 400, message: `${filePath} file does not exist` };
  }
  const root = await realpath(allowedDir);
  if (!real.startsWith(`${root}${path.sep}`)) return { kind: 'refused', status: 400, message: `insecure path used '${filePath}'` };
  const size = (await stat(real)).size;
  return { kind: 'file', file: { path: real, size, name: typeof fields['name'] === 'string' ? fields['name'] : '' } };
}
