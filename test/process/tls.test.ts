/**
 * Service.Secure (docs/spec.md §2/§3): the gateway reaches the workflow service over TLS, and
 * refuses a plaintext connection when Secure is set. The gateway runs as a child process
 * trusting a test CA through grpc-js's GRPC_DEFAULT_SSL_ROOTS_FILE_PATH.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OwnerServiceSimulator } from '../../sandbox/owner-sim';
import { WorkflowServiceSimulator } from '../../sandbox/workflow-sim';
import { startReplica, type Replica } from '../helpers/replicas';
import { removeSecretFile, testSecret, writeSecretFile } from '../helpers/secret';

let dir: string;
let secure: WorkflowServiceSimulator;
let plain: WorkflowServiceSimulator;
let owner: OwnerServiceSimulator;
let replica: Replica;
let secretFile: string;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'longrun-tls-'));
  const key = path.join(dir, 'key.pem');
  const cert = path.join(dir, 'cert.pem');
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'],
    { stdio: 'ignore' },
  );
  secure = await WorkflowServiceSimulator.start({ tls: { key: readFileSync(key), cert: readFileSync(cert) } });
  plain = await WorkflowServiceSimulator.start();
  owner = await OwnerServiceSimulator.start({ secret: testSecret, workflowServiceUri: `localhost:${secure.port}`, defaults: { detached: false, secure: true } });
  secretFile = await writeSecretFile();
  replica = await startReplica('tls', { LONGRUN_OWNER_URL: owner.url, LONGRUN_SECRET_FILE: secretFile, GRPC_DEFAULT_SSL_ROOTS_FILE_PATH: cert });
});

afterAll(async () => {
  await replica?.child.kill();
  await Promise.allSettled([owner?.close(), secure?.close(), plain?.close(), removeSecretFile(secretFile)]);
  rmSync(dir, { recursive: true, force: true });
});

describe('TLS to the workflow service', () => {
  it('Secure: true connects with TLS and the turn completes', async () => {
    const res = await replica.execute('900', [{ op: 'checkpoint', text: 'over tls' }, { op: 'end' }]);
    expect(res.status).toBe(200);
    expect(secure.callsFor('900')[0]?.ended?.how).toBe('ok');
  });

  it('Secure: true against a plaintext service fails before the response: 502, no call recorded', async () => {
    owner.configure('901', { detached: false, secure: true, serviceUri: plain.address });
    const res = await replica.execute('901', [{ op: 'end' }]);
    expect(res.status).toBe(502);
    expect((res.body['error'] as Record<string, unknown>)['code']).toBe('WORKFLOW_SERVICE_UNAVAILABLE');
    expect(plain.calls).toHaveLength(0);
  });
});
