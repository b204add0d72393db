/** The document as the file holds it: two-space JSON and a final newline. */
import { openApiDocument } from './document';

export function openApiText(): string {
  return `${JSON.stringify(openApiDocument(), null, 2)}\n`;
}
