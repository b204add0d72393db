/**
 * One runHTTPRequest's end (an OwnerCall's, owner-call.ts) as the workflow service is
 * answered it (docs/spec.md §6): the owner's status, headers (canonical names,
 * relayedResponseHeaders) and body up to the cap, or the error text.
 */
import type { RelayErrorType } from './words';
import { relayedResponseHeaders } from './http-headers';
import { networkErrorText } from './network-errors';
import type { CallEnd } from './owner-call';

/** An owner answer as HttpResponse carries it: canonical header names (docs/spec.md §6). */
export interface RelayAnswer {
  statusCode: number;
  headers: Record<string, string>;
  body: string;
}

export type RelayResult =
  | ({ ok: true } & RelayAnswer)
  /** A body over the cap keeps its answer (status, headers, the body up to the cap) beside the error. */
  | ({ ok: false; error: string; type: RelayErrorType } & Partial<RelayAnswer>);

const ABORTED: RelayResult = Object.freeze({ ok: false, type: 'aborted', error: 'request aborted' });
const TIMED_OUT: RelayResult = Object.freeze({ ok: false, type: 'timeout', error: 'request timed out' });

/** `buf` without a trailing, incomplete UTF-8 sequence (a body cut at the cap may end mid-character). */
function wholeCharacters(buf: Buffer): Buffer {
  let lead = buf.length - 1;
  while (lead >= 0 && buf.length - lead <= 3 && ((buf[lead] as number) & 0xc0) === 0x80) lead -= 1;
  if (lead < 0) return buf;
  const first = buf[lead] as number;
  const width = first >= 0xf0 ? 4 : first >= 0xe0 ? 3 : first >= 0xc0 ? 2 : 1;
  return buf.length - lead < width ? buf.subarray(0, lead) : buf;
}

/** Rails' instruction to Workhorse to fill the answer's body in (canonical name, as relayedResponseHeaders writes it). */
const SEND_DATA_HEADER = 'Gitlab-Workhorse-Send-Data';

function sendDataError(value: string): string {
  const kind = /^[a-z-]+(?=:)/.exec(value)?.[0] ?? 'unknown';
  return `the owner answered with Gitlab-Workhorse-Send-Data (${kind}), a body only GitLab Workhorse can fill in: point LONGRUN_RELAY_URL at Workhorse`;
}

/** What the workflow service is told of a relayed call's end; `bodyLimit` was the call's. */
export function relayResult(end: CallEnd, bodyLimit: number, target: string): RelayResult {
  switch (end.kind) {
    case 'aborted':
      return ABORTED;
    case 'timeout':
      return TIMED_OUT;
    case 'network':
      return { ok: false, type: 'network', error: networkErrorText(end.error, target) };
    case 'answer': {
      const answer = { statusCode: end.statusCode, headers: relayedResponseHeaders(end.rawHeaders), body: (end.overflow ? wholeCharacters(end.body) : end.body).toString('utf8') };
      // Rails left the body to Workhorse (a blob, an archive, a diff from Gitaly): passed on as
      // it is, the service would read the empty body as the content. Only a relay that did not
      // pass Workhorse (LONGRUN_RELAY_URL elsewhere) sees the header; Workhorse consumes it.
      const sendData = answer.headers[SEND_DATA_HEADER];
      if (sendData !== undefined) return { ok: false, type: 'send_data', error: sendDataError(sendData), ...answer };
      if (!end.overflow) return { ok: true, ...answer };
      return { ok: false, type: 'too_large', error: `response body exceeded size limit (${bodyLimit} bytes)`, ...answer };
    }
  }
}
