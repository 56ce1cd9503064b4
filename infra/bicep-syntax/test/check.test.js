// Tests for check.js: the gate must pass valid Bicep, fail broken Bicep with a
// file:line:col location, and refuse to pass when it finds nothing to check.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const checker = path.join(__dirname, '..', 'check.js');

const valid = `targetScope = 'resourceGroup'

@description('Queue name.')
param queueName string = 'orders'

resource ns 'Microsoft.ServiceBus/namespaces@2024-01-01' = {
  name: 'sb-\${uniqueString(resourceGroup().id)}'
  location: resourceGroup().location
  sku: {
    name: 'Standard'
  }
  properties: {
    disableLocalAuth: true
  }
}

resource queue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = {
  parent: ns
  name: queueName
  properties: {
    requiresDuplicateDetection: true
  }
}

output SERVICEBUS_QUEUE string = queue.name
`;

// run writes the given files into a fresh directory and runs the checker on it.
function run(files) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bicep-syntax-'));
  for (const [name, text] of Object.entries(files)) {
    fs.writeFileSync(path.join(dir, name), text);
  }
  const r = spawnSync(process.execPath, [checker, dir], { encoding: 'utf8' });
  fs.rmSync(dir, { recursive: true, force: true });
  return r;
}

test('valid Bicep passes', () => {
  const r = run({ 'main.bicep': valid });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /1 of 1 \.bicep files parse cleanly/);
});

const broken = [
  {
    name: 'unclosed object',
    text: valid.replace(/\n}\n\noutput/, '\n\noutput'),
  },
  {
    name: 'unterminated string',
    text: valid.replace("param queueName string = 'orders'", "param queueName string = 'orders"),
  },
  {
    name: 'missing value after =',
    text: valid.replace("param queueName string = 'orders'", 'param queueName string ='),
  },
  {
    name: 'resource without type string',
    text: valid.replace("resource queue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = {", 'resource queue = {'),
  },
  {
    name: 'property without colon',
    text: valid.replace('disableLocalAuth: true', 'disableLocalAuth true'),
  },
];

for (const tc of broken) {
  test(`broken Bicep fails: ${tc.name}`, () => {
    assert.notEqual(tc.text, valid, 'mutation did not apply');
    const r = run({ 'ok.bicep': valid, 'broken.bicep': tc.text });
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /broken\.bicep:\d+:\d+: (syntax error|missing )/);
    assert.doesNotMatch(r.stdout, /ok\.bicep:\d+/);
    assert.match(r.stdout, /1 of 2 \.bicep files parse cleanly/);
  });
}

test('a directory without .bicep files is an error, not a pass', () => {
  const r = run({ 'README.md': '# nothing here\n' });
  assert.equal(r.status, 2, r.stdout + r.stderr);
});

test('the project\'s own templates parse', () => {
  const r = spawnSync(process.execPath, [checker], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});
