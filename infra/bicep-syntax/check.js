#!/usr/bin/env node
// check.js is the Bicep syntax gate. It parses every .bicep file under the
// given paths (files or directories, default ../bicep) with the tree-sitter
// Bicep grammar and prints file:line:col for every ERROR or MISSING node.
//
// Exit status: 0 when every file parses cleanly, 1 when any file has a syntax
// error, 2 on a usage or setup error (no .bicep file found, grammar missing).
//
// This is a syntax check only: it does not resolve symbols, types, API
// versions or module parameters the way the Bicep compiler does.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const Parser = require('web-tree-sitter');

// bicepFiles returns the .bicep files at or under p, sorted for stable output.
function bicepFiles(p) {
  const st = fs.statSync(p);
  if (st.isFile()) return [p];
  const out = [];
  for (const entry of fs.readdirSync(p, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
    const full = path.join(p, entry.name);
    if (entry.isDirectory()) out.push(...bicepFiles(full));
    else if (entry.isFile() && entry.name.endsWith('.bicep')) out.push(full);
  }
  return out.sort();
}

// problems walks the syntax tree and returns one entry per ERROR or MISSING
// node. Descent stops at an ERROR node: its children add no information.
function problems(tree) {
  const found = [];
  const cursor = tree.walk();
  let descend = true;
  for (;;) {
    const node = cursor.currentNode;
    if (descend && (node.type === 'ERROR' || node.isMissing)) {
      found.push({
        row: node.startPosition.row + 1,
        col: node.startPosition.column + 1,
        what: node.isMissing ? `missing ${node.type}` : 'syntax error',
      });
      descend = false;
    }
    if (descend && cursor.gotoFirstChild()) continue;
    descend = true;
    while (!cursor.gotoNextSibling()) {
      if (!cursor.gotoParent()) return found;
    }
  }
}

async function main(argv) {
  const roots = argv.length > 0 ? argv : [path.join(__dirname, '..', 'bicep')];
  const files = roots.flatMap(bicepFiles);
  if (files.length === 0) {
    console.error(`check-bicep-syntax: no .bicep files under ${roots.join(', ')}`);
    return 2;
  }
  await Parser.init();
  const wasm = require.resolve('tree-sitter-bicep/tree-sitter-bicep.wasm');
  const parser = new Parser();
  parser.setLanguage(await Parser.Language.load(wasm));

  let bad = 0;
  for (const file of files) {
    const tree = parser.parse(fs.readFileSync(file, 'utf8'));
    const found = tree.rootNode.hasError ? problems(tree) : [];
    if (tree.rootNode.hasError && found.length === 0) {
      found.push({ row: 1, col: 1, what: 'syntax error' });
    }
    for (const p of found) console.log(`${file}:${p.row}:${p.col}: ${p.what}`);
    if (found.length > 0) bad++;
    tree.delete();
  }
  parser.delete();
  const ok = files.length - bad;
  console.log(`check-bicep-syntax: ${ok} of ${files.length} .bicep files parse cleanly`);
  return bad === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => { process.exitCode = code; },
  (err) => { console.error(`check-bicep-syntax: ${err.stack || err}`); process.exitCode = 2; },
);
