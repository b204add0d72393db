import { readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * This package's version, sent in the client's User-Agent (`longrun-client/<version>`).
 * Read from the package's own package.json, one folder above this file both in src/ (tests)
 * and in dist/ (installed).
 */
export const version: string = (JSON.parse(readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8')) as { version: string }).version;
