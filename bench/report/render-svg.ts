/**
 * A vega-lite spec to an SVG document without a browser or a canvas: vega-lite compiles it,
 * a vega View with `renderer: 'none'` lays it out and `toSVG()` writes it. Text is measured
 * by an estimate (no canvas to measure it with).
 */
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import vm from 'node:vm';
import type * as VegaModule from 'vega';
// By path: vega-lite's package.json names its types only under `exports`, which this
// project's `moduleResolution: node` does not read.
import type * as VegaLiteModule from 'vega-lite/build/index';
import type { TopLevelSpec } from 'vega-lite/build/index';

type Vega = typeof VegaModule;
type VegaLite = typeof VegaLiteModule;

/**
 * vega is ESM with a top-level await (vega-canvas looking for the optional canvas
 * package), which `require()` cannot load, and tsc's CommonJS output turns `import()` into
 * `require()`. A function compiled by vm with the main context's loader keeps Node's own
 * `import()`, under vitest too (whose module runner gives code it evaluates, a Function
 * body included, no `import()` of Node's). Node >= 20.12; it prints an ExperimentalWarning
 * once per process, so it is compiled only when a chart is drawn.
 */
function nativeImport(): (url: string) => Promise<unknown> {
  return vm.runInThisContext('(url) => import(url)', { importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER }) as (url: string) => Promise<unknown>;
}

/** Imports ESM packages resolved from here (not from the working directory). */
function importEsm(...specifiers: string[]): Promise<unknown[]> {
  const load = nativeImport();
  const resolve = createRequire(__filename).resolve;
  return Promise.all(specifiers.map((specifier) => load(pathToFileURL(resolve(specifier)).href)));
}

/** What vega-scenegraph measures a text item with (vega re-exports it; its typings do not). */
interface TextMetrics {
  width(item: { text?: unknown; fontSize?: number; fontWeight?: unknown }, text?: unknown): number;
}

/**
 * Without a canvas, vega estimates a text as 0.8 em per character, half as wide again as
 * sans-serif text runs, and sizes the SVG by it: the subtitles widened every chart by a
 * third of blank space. vega-scenegraph takes a textMetrics.width of the caller's (as
 * vl-convert sets its own); this one is 0.6 em per character, 0.65 em bold.
 */
function sansSerifWidth(item: { text?: unknown; fontSize?: number; fontWeight?: unknown }, text?: unknown): number {
  const value = text ?? item.text;
  const chars = (Array.isArray(value) ? value.join(' ') : String(value ?? '')).length;
  const bold = item.fontWeight === 'bold' || Number(item.fontWeight) >= 600;
  return Math.ceil(chars * (item.fontSize ?? 11) * (bold ? 0.65 : 0.6));
}

async function loadLibraries(): Promise<[Vega, VegaLite]> {
  const [vega, vegaLite] = (await importEsm('vega', 'vega-lite')) as [Vega, VegaLite];
  const metrics = (vega as unknown as { textMetrics?: TextMetrics }).textMetrics;
  if (metrics) metrics.width = sansSerifWidth;
  return [vega, vegaLite];
}

let libraries: Promise<[Vega, VegaLite]> | undefined;

/** A vega-lite spec as an SVG document, rendered without a browser or a canvas. */
export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  libraries ??= loadLibraries().catch((err: unknown) => {
    libraries = undefined;
    throw err;
  });
  const [vega, vegaLite] = await libraries;
  const view = new vega.View(vega.parse(vegaLite.compile(spec).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
