/**
 * Writes the OpenAPI description: `node dist/openapi/main.js <file>` (`npm run openapi`
 * writes docs/openapi.json; `npm run build` the copy beside the built gateway).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { openApiText } from './text';

const file = process.argv[2];
if (!file) {
  process.stderr.write('usage: node dist/openapi/main.js <file>\n');
  process.exit(2);
}
mkdirSync(path.dirname(file), { recursive: true });
writeFileSync(file, openApiText());
