/**
 * The shared HS256 secret (docs/spec.md §2) a stack's gateways, owner and callers sign with:
 * fixed by default, so a failure reproduces, and written in Workhorse's secret-file format
 * (base64 of 32 bytes) for the gateways, which read LONGRUN_SECRET_FILE. The one writer of
 * that file for tests, benchmarks and stacks.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** 32 bytes, the length Workhorse's secret file must hold. */
export const testSecret: Buffer = Buffer.from('longrun-test-secret-0123456789ab', 'utf8');

/** A different 32-byte secret, for "signed with the wrong secret" cases. */
export const wrongSecret: Buffer = Buffer.from('not-the-longrun-secret-987654321', 'utf8');

if (testSecret.length !== 32 || wrongSecret.length !== 32) throw new Error('test secrets must be 32 bytes');

/**
 * Writes `secret` (default testSecret) base64-encoded, newline-terminated as Workhorse
 * writes it, to a file in a fresh temporary directory. Returns the file's path; remove
 * it with removeSecretFile.
 */
export async function writeSecretFile(secret: Buffer = testSecret): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'longrun-secret-'));
  const file = path.join(dir, 'secret');
  await writeFile(file, `${secret.toString('base64')}\n`, { mode: 0o600 });
  return file;
}

/** Removes a file written by writeSecretFile, with its directory. */
export async function removeSecretFile(file: string): Promise<void> {
  await rm(path.dirname(file), { recursive: true, force: true });
}
