/**
 * Every path of this repository a comment or a doc cites exists: a file that moves takes
 * its citations with it. A path is checked where it is surely this repository's — a
 * TypeScript, Lua, HTML or module-script file anywhere (the other projects the docs cite
 * are Ruby, Go and Python), or any file under a folder this repository has — and found
 * from the repository's root, from the citing file's folder or one of its parents, or from
 * src/ (comments say `core/jwt.ts`). Generated output (dist/, bench/out/, test-results/)
 * is not checked. In code only comments are read: strings are the code's own business.
 */
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = path.resolve(__dirname, '../..');
const scanned = [
  'src',
  'sandbox',
  'stack',
  'test',
  'bench',
  'examples',
  'scripts',
  'docs',
  'deploy',
  'packages/client/src',
  'packages/client/test',
  'README.md',
  'BENCHMARKS.md',
  'packages/client/README.md',
];
const skippedDirs = new Set(['node_modules', 'dist', 'out', 'fixtures']);
const generated = /^(?:dist|bench\/out|test-results|node_modules)\//;
/** Extensions that are always this repository's when cited (no cited project outside it is written in them). */
const ours = /\.(?:ts|lua|mjs|cjs|html)$/;
const pathPattern = /(?<![\w@./:-])((?:\.\.?\/)*(?:[\w.-]+\/)+[\w.-]+\.(?:ts|lua|mjs|cjs|html|proto|md|json|ya?ml|sh|svg))(?![\w/])/g;

function filesUnder(entry: string): string[] {
  const full = path.join(root, entry);
  if (!fs.statSync(full).isDirectory()) return [entry];
  return fs
    .readdirSync(full, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? (skippedDirs.has(e.name) ? [] : filesUnder(path.join(entry, e.name))) : [path.join(entry, e.name)]));
}

/** The comments of a TypeScript file, each with the line it starts on. */
function commentsOf(file: string, text: string): Array<{ line: number; text: string }> {
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, ts.LanguageVariant.Standard, text);
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest);
  const out: Array<{ line: number; text: string }> = [];
  for (let kind = scanner.scan(); kind !== ts.SyntaxKind.EndOfFileToken; kind = scanner.scan()) {
    if (kind === ts.SyntaxKind.SingleLineCommentTrivia || kind === ts.SyntaxKind.MultiLineCommentTrivia) {
      out.push({ line: source.getLineAndCharacterOfPosition(scanner.getTokenStart()).line + 1, text: scanner.getTokenText() });
    }
  }
  return out;
}

/** The text to read in `file`, by the line it starts on (a path broken over two lines at a hyphen is joined). */
function citingText(file: string): Array<{ line: number; text: string }> {
  const text = fs.readFileSync(path.join(root, file), 'utf8');
  const parts = /\.(?:ts|mjs)$/.test(file) ? commentsOf(file, text) : [{ line: 1, text }];
  return parts.map((p) => ({ line: p.line, text: p.text.replace(/-\n\s*(?:\*\s*)?/g, '-') }));
}

const topFolders = new Set(
  fs
    .readdirSync(root, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name),
);
const srcFolders = new Set(
  fs
    .readdirSync(path.join(root, 'src'), { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name),
);

function isOurs(cited: string): boolean {
  if (generated.test(cited)) return false;
  if (ours.test(cited)) return true;
  const first = cited.replace(/^(?:\.\.?\/)+/, '').split('/')[0] ?? '';
  return cited.startsWith('.') || topFolders.has(first) || srcFolders.has(first);
}

function resolves(file: string, cited: string): boolean {
  const bases = ['', 'src'];
  for (let dir = path.dirname(file); dir !== '.'; dir = path.dirname(dir)) bases.push(dir);
  return bases.some((base) => fs.existsSync(path.join(root, base, cited)));
}

describe('paths cited in comments and docs', () => {
  it('every one of this repository exists', () => {
    const missing: string[] = [];
    for (const file of scanned.flatMap(filesUnder).filter((f) => /\.(?:ts|mjs|md|lua|html|ya?ml)$/.test(f))) {
      for (const part of citingText(file)) {
        for (const match of part.text.matchAll(pathPattern)) {
          const cited = match[1] as string;
          if (isOurs(cited) && !resolves(file, cited)) missing.push(`${file}:${part.line + part.text.slice(0, match.index).split('\n').length - 1}: ${cited}`);
        }
      }
    }
    expect(missing).toEqual([]);
  });

  it('finds a path that does not exist, in a comment and in a doc', () => {
    expect(resolves('src/coordination/lock-releaser.ts', 'shared/turn-batch.ts')).toBe(false);
    expect(resolves('src/coordination/lock-releaser.ts', 'core/turn-batch.ts')).toBe(true);
    expect(isOurs('shared/turn-batch.ts')).toBe(true);
    expect(isOurs('ee/lib/api/ai/duo_workflows/workflows.rb')).toBe(false);
    expect(isOurs('bench/out/latest.json')).toBe(false);
    const comments = commentsOf('x.ts', "const a = 'src/not/here.ts';\n/** cites src/core/jwt.ts */\n// and owner/jwt.ts\n").map((c) =>
      [...c.text.matchAll(pathPattern)].map((m) => m[1]),
    );
    expect(comments).toEqual([['src/core/jwt.ts'], ['owner/jwt.ts']]);
  });
});
