/**
 * Which addresses an external MCP server may have (docs/spec.md §2): not loopback, link-local,
 * private, shared (CGNAT) or unspecified, unless the operator allows them
 * (LONGRUN_MCP_ALLOW_PRIVATE, for tests and on-premise setups). The check runs where
 * the connection is made — in the DNS lookup the socket uses — so a name that resolves
 * to a private address is refused however it is spelled, and a name cannot resolve to a
 * public address when checked and a private one when connected (DNS rebinding).
 */
import dns from 'node:dns';
import net from 'node:net';

/** A connection refused because the server's address is not public. */
export class PrivateAddressError extends Error {
  readonly code = 'ERR_MCP_PRIVATE_ADDRESS';

  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    super(`MCP server ${host} resolves to a non-public address (${address}); set LONGRUN_MCP_ALLOW_PRIVATE=true to allow it`);
    this.name = 'PrivateAddressError';
  }
}

const nonPublic = new net.BlockList();
// IPv4: unspecified, private (RFC 1918), shared/CGNAT (RFC 6598), loopback, link-local
// (cloud metadata services live at 169.254.169.254), and the IETF protocol block.
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
] as const) {
  nonPublic.addSubnet(network, prefix, 'ipv4');
}
// IPv6: unspecified, loopback, unique local (fc00::/7), link-local (fe80::/10).
nonPublic.addAddress('::', 'ipv6');
nonPublic.addAddress('::1', 'ipv6');
nonPublic.addSubnet('fc00::', 7, 'ipv6');
nonPublic.addSubnet('fe80::', 10, 'ipv6');

/** True when `address` (an IP literal) is loopback, link-local, private or otherwise not public. */
export function isNonPublicAddress(address: string): boolean {
  const bare = address.replace(/^\[|\]$/g, '');
  const family = net.isIP(bare);
  if (family === 0) return false;
  if (family === 6) {
    // An IPv4-mapped address (::ffff:10.0.0.1) is the IPv4 address it carries.
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(bare);
    if (mapped) return nonPublic.check(mapped[1] as string, 'ipv4');
    return nonPublic.check(bare, 'ipv6');
  }
  return nonPublic.check(bare, 'ipv4');
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

/**
 * A `lookup` for net/tls connect options that refuses a host any of whose addresses is
 * not public. Refusing on any (not only on all) keeps a mixed answer from being a way in.
 */
export function publicOnlyLookup(hostname: string, options: dns.LookupOptions, callback: LookupCallback): void {
  dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, []);
    const refused = addresses.find((entry) => isNonPublicAddress(entry.address));
    if (refused) return callback(new PrivateAddressError(hostname, refused.address) as NodeJS.ErrnoException, []);
    if (options.all) return callback(null, addresses);
    const first = addresses[0];
    if (!first) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), []);
    callback(null, first.address, first.family);
  });
}

/** The PrivateAddressError somewhere in `err`'s cause chain, if any. */
export function privateAddressCause(err: unknown): PrivateAddressError | undefined {
  let current: unknown = err;
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    if (current instanceof PrivateAddressError) return current;
    current = current.cause;
  }
  return undefined;
}
