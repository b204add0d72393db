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
import type { OwnerServiceSimulator } from '../../sandbox/owner-sim';
import { WorkflowServiceSimulator } from '../../sandbox/workflow-sim';
import { startStack, type Stack } from '../../stack';
import type { GatewayChild as Replica } from '../../stack/gateway-child';

let dir: string;
let stack: Stack<'process'> | undefined;
let secure: WorkflowServiceSimulator;
let plain: WorkflowServiceSimulator;
let owner: OwnerServiceSimulator;
let replica: Replica;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'longrun-tls-'));
  const key = path.join(dir, 'key.pem');
  const cert = path.join(dir, 'cert.pem');
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'],
    { stdio: 'ignore' },
  );
  plain = await WorkflowServiceSimulator.start();
  // The owner names the TLS workflow service by the certificate's name.
  stack = await startStack({
    gateway: 'process',
    replicas: ['tls'],
    workflow: { tls: { key: readFileSync(key), cert: readFileSync(cert) } },
    workflowHost: 'localhost',
    preauth: { detached: false, secure: true },
    env: { GRPC_DEFAULT_SSL_ROOTS_FILE_PATH: cert },
  });
  ({ owner, workflow: secure, gateway: replica } = stack);
});

afterAll(async () => {
  await stack?.close();
  await plain?.close();
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
