/**
 * GET /-/openapi.json on the ops listener: longrun's OpenAPI description. The build writes it
 * beside the built gateway (dist/docs/openapi.json, generated from the schemas the code reads
 * with: openapi/); run from the sources, it is the committed docs/openapi.json, which a test
 * holds equal to what the generator makes. Read once, on the first request: off the start
 * and off every other route.
 */
import { readFile } from 'node:fs/promises';
import type express from 'express';
import { GatewayError } from '../core/errors';
import { fromRoot } from '../core/paths';

let document: Promise<Buffer> | undefined;

export const serveOpenApi: express.RequestHandler = (_req, res) => {
  document ??= readFile(fromRoot('docs', 'openapi.json'));
  document.then(
    (text) => res.type('application/json; charset=utf-8').send(text),
    () => {
      // Not kept: a build that adds the file later is served on the next request.
      document = undefined;
      res.status(404).json(new GatewayError('NOT_FOUND', 'no OpenAPI description beside this build (docs/openapi.json)').toBody());
    },
  );
};
