/**
 * JSON Schema 2020-12 validation against docs/openapi.json's component schemas (ajv), for the
 * tests that hold the document to what the gateway reads and writes.
 */
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import { expect } from 'vitest';

const BASE = 'https://longrun.invalid/openapi.json';

export interface SchemaValidator {
  /** The validator of `components.schemas.<name>`. */
  of(name: string): ValidateFunction;
  /** Asserts `value` is a `<name>`, naming what is wrong otherwise. */
  expectValid(name: string, value: unknown, what?: string): void;
}

export function schemaValidator(document: { components: { schemas: Record<string, unknown> } }): SchemaValidator {
  // strict off: the document's own annotations (format int64, contentEncoding) are no validation keywords.
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  ajv.addSchema({ $id: BASE, components: { schemas: document.components.schemas } });
  const of = (name: string): ValidateFunction => {
    const validate = ajv.getSchema(`${BASE}#/components/schemas/${name}`);
    if (!validate) throw new Error(`no schema ${name}`);
    return validate;
  };
  return {
    of,
    expectValid(name, value, what) {
      const validate = of(name);
      const ok = validate(value);
      expect(ok, `${what ?? name}: ${JSON.stringify(validate.errors)} in ${JSON.stringify(value).slice(0, 400)}`).toBe(true);
    },
  };
}
