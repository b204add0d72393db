// Lists the exports of src/ that no other file of the project references (tests, sandbox,
// bench and examples included): `node scripts/lone-exports.mjs`. Each line says whether the
// name is part of another export's signature (`api`: a parameter, result or field type of
// an exported function or class, which callers may need to name) or not (`alone`: only
// this file's code uses it, so `export` can go). Proofs (`…Proof`) are exported only so
// that the compiler keeps them (noUnusedLocals). Exits 0 whatever it finds: a report.
import console from 'node:console';
import fs from 'node:fs';
import path from 'node:path';
import process from 'node:process';
import ts from 'typescript';

const root = process.cwd();
const parsed = ts.getParsedCommandLineOfConfigFile(path.join(root, 'tsconfig.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} });
const host = {
  getScriptFileNames: () => parsed.fileNames,
  getScriptVersion: () => '0',
  getScriptSnapshot: (f) => (fs.existsSync(f) ? ts.ScriptSnapshot.fromString(fs.readFileSync(f, 'utf8')) : undefined),
  getCurrentDirectory: () => root,
  getCompilationSettings: () => parsed.options,
  getDefaultLibFileName: ts.getDefaultLibFilePath,
  fileExists: ts.sys.fileExists,
  readFile: ts.sys.readFile,
  readDirectory: ts.sys.readDirectory,
  directoryExists: ts.sys.directoryExists,
  getDirectories: ts.sys.getDirectories,
};
const service = ts.createLanguageService(host, ts.createDocumentRegistry());
const program = service.getProgram();
const checker = program.getTypeChecker();
const src = path.join(root, 'src') + path.sep;

/** The top-level statement holding `node`, when it is exported. */
function exportedStatement(node) {
  let n = node;
  while (n.parent && !ts.isSourceFile(n.parent)) n = n.parent;
  const modifiers = ts.canHaveModifiers(n) ? (ts.getModifiers(n) ?? []) : [];
  return modifiers.some((m) => m.kind === ts.SyntaxKind.ExportKeyword) ? n : undefined;
}

/** Whether `node` sits in a signature callers see: not in a body, an initializer or a private member's type. */
function inSignature(node, top) {
  for (let n = node; n && n !== top; n = n.parent) {
    if (ts.isBlock(n) || (ts.isVariableDeclaration(n) && n.initializer && node.pos >= n.initializer.pos)) return false;
    const modifiers = ts.canHaveModifiers(n) ? (ts.getModifiers(n) ?? []) : [];
    if (!ts.isParameter(n) && modifiers.some((m) => m.kind === ts.SyntaxKind.PrivateKeyword)) return false;
  }
  return true;
}

const lines = [];
for (const file of program.getSourceFiles()) {
  if (!file.fileName.startsWith(src)) continue;
  const module = checker.getSymbolAtLocation(file);
  if (!module) continue;
  for (const symbol of checker.getExportsOfModule(module)) {
    const declaration = symbol.declarations?.[0];
    if (!declaration || declaration.getSourceFile() !== file) continue;
    const name = ts.getNameOfDeclaration(declaration) ?? declaration;
    const references = (service.findReferences(file.fileName, name.getStart()) ?? []).flatMap((r) => r.references);
    if (references.some((r) => r.fileName !== file.fileName)) continue;
    const api = references.some((r) => {
      if (r.isDefinition) return false;
      const token = ts.getTokenAtPosition(file, r.textSpan.start);
      const top = exportedStatement(token);
      return top !== undefined && !top.getText().startsWith(declaration.getText().slice(0, 40)) && inSignature(token, top);
    });
    lines.push(`${symbol.name.endsWith('Proof') ? 'proof' : api ? 'api  ' : 'alone'}  ${path.relative(root, file.fileName)}  ${symbol.name}`);
  }
}
console.log(lines.sort().join('\n'));
console.log(`${lines.length} exports referenced only in their own file (${lines.filter((l) => l.startsWith('alone')).length} alone)`);
