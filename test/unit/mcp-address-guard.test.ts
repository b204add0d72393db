/**
 * Which addresses an external MCP server may have (docs/spec.md §2): not loopback, link-local,
 * private, shared or unspecified — in either family, and however an IPv4 address is
 * wrapped — and the lookup that enforces it where the connection is made.
 */
import { describe, expect, it } from 'vitest';
import { PrivateAddressError, isNonPublicAddress, privateAddressCause, publicOnlyLookup } from '../../src/mcp/address-guard';
import { resolveServer } from '../../src/mcp/servers';

describe('isNonPublicAddress', () => {
  it.each([
    '127.0.0.1',
    '127.255.0.9',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '::',
    '::1',
    '[::1]',
    'fe80::1',
    'fd12:3456::1',
    '::ffff:10.0.0.1',
    '::ffff:127.0.0.1',
  ])('%s is not public', (address) => {
    expect(isNonPublicAddress(address)).toBe(true);
  });

  it.each(['8.8.8.8', '172.32.0.1', '100.128.0.1', '203.0.113.9', '2001:4860:4860::8888', '::ffff:8.8.8.8', 'example.com'])('%s is public (or not an address)', (address) => {
    expect(isNonPublicAddress(address)).toBe(false);
  });
});

describe('publicOnlyLookup', () => {
  it('refuses a name that resolves to loopback, with an error the discovery recognises', async () => {
    const err = await new Promise<unknown>((resolve) => publicOnlyLookup('localhost', {}, (e) => resolve(e)));
    expect(err).toBeInstanceOf(PrivateAddressError);
    expect(privateAddressCause(new Error('fetch failed', { cause: err }))).toBe(err);
    expect((err as Error).message).toMatch(/localhost resolves to a non-public address .*LONGRUN_MCP_ALLOW_PRIVATE/);
  });
});

describe('resolveServer', () => {
  const owner = new URL('https://gitlab.example.com/gitlab/');

  it("puts the owner's own servers under the owner URL, whatever URL they are given", () => {
    expect(resolveServer('gitlab', { URL: 'http://10.0.0.1/x' }, owner, false)).toMatchObject({
      ok: true,
      endpoint: { kind: 'owner', url: new URL('https://gitlab.example.com/gitlab/api/v4/mcp') },
    });
    expect(resolveServer('orbit', {}, owner, false)).toMatchObject({ ok: true, endpoint: { kind: 'owner', url: new URL('https://gitlab.example.com/gitlab/api/v4/orbit/mcp') } });
  });

  it.each([
    [{}, /no URL/],
    [{ URL: 'mcp.example.com/mcp' }, /not an absolute URL/],
    [{ URL: 'file:///etc/passwd' }, /scheme file: is not http or https/],
    [{ URL: 'https://user:secret@mcp.example.com/mcp' }, /credentials/],
    [{ URL: 'http://169.254.169.254/latest' }, /non-public address \(169\.254\.169\.254\)/],
    [{ URL: 'http://[::1]:8080/mcp' }, /non-public address/],
  ])('refuses an external server configured as %j', (config, reason) => {
    const resolved = resolveServer('docs', config, owner, false);
    expect(resolved.ok).toBe(false);
    expect(resolved.ok ? '' : resolved.reason).toMatch(reason);
  });

  it('allows a private address with LONGRUN_MCP_ALLOW_PRIVATE', () => {
    expect(resolveServer('docs', { URL: 'http://10.0.0.5:3000/mcp' }, owner, true)).toMatchObject({ ok: true, endpoint: { kind: 'external' } });
  });
});
