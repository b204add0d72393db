import { readFileSync } from 'node:fs';
import { fromRoot } from './paths';

/** The package version, as sent in `Gitlab-Workhorse: longrun-<version>` and User-Agent. */
export const version: string = (
  JSON.parse(readFileSync(fromRoot('package.json'), 'utf8')) as { version: string }
).version;
