/**
 * The owner's refusal of a preauth, passed back to the caller as Workhorse does (docs/spec.md
 * §2): its status, its end-to-end headers, the first 32 KiB of its body, and
 * X-Longrun-Error-Code: PREAUTH_DENIED.
 */
import type { ServerResponse } from 'node:http';
import type { PreauthDenial } from '../owner/owner-client';

export function passDenial(res: ServerResponse, denial: PreauthDenial): void {
  res.statusCode = denial.status;
  for (const [name, value] of Object.entries(denial.headers)) res.setHeader(name, value);
  res.setHeader('X-Longrun-Error-Code', 'PREAUTH_DENIED');
  res.end(denial.body);
}
