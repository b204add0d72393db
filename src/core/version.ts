import { readFileSync } from 'node:fs';
import { fromRoot } from './paths';

/** The package version, as sent in `Gitlab-Workhorse: longrun-<version>` and User-Agent. */
export const version: string = (JSON.parse(readFileSync(fromRoot('package.json'), 'utf8')) as { version: string }).version;

/** `Gitlab-Workhorse` on every request to the owner (docs/spec.md §6: Rails' require_gitlab_workhorse! checks it). */
export const gitlabWorkhorseHeader = `longrun-${version}`;

/** longrun's own User-Agent (to the owner; appended to the caller's towards the workflow service). */
export const userAgent = `longrun/${version}`;
