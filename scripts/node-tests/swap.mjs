// Preloaded (`node --import`) into one of Node's own child_process tests
// (scripts/node-tests/run.mjs): `child_process` and `node:child_process`, by
// require() or import, are cordon/child_process instead. What cordon's module
// does not offer is not borrowed from Node's: a test that uses it fails, and
// the names it asked for are appended to $CORDON_NODE_TESTS_MISSING, so the
// table can say why the test does not apply.
import { appendFileSync } from 'node:fs';
import Module, { register } from 'node:module';
import { pathToFileURL } from 'node:url';

const target = process.env.CORDON_NODE_TESTS_MODULE;
if (!target) throw new Error('swap.mjs: CORDON_NODE_TESTS_MODULE (the path of dist/child_process.js) is not set');
const missingLog = process.env.CORDON_NODE_TESTS_MISSING;
const cordon = await import(pathToFileURL(target).href);

// Names a test may read without meaning to use them (util.inspect, jest-like
// probes, Symbol lookups, module interop) are not reported as missing.
const benign = new Set(['then', '__esModule', 'default', 'constructor', 'toJSON', 'inspect', 'prototype']);
const facade = new Proxy(
  { ...cordon },
  {
    get(obj, key) {
      if (typeof key === 'string' && !(key in obj) && !benign.has(key) && missingLog) appendFileSync(missingLog, `${key}\n`);
      return obj[key];
    },
  },
);

const load = Module._load;
Module._load = function (request, parent, isMain) {
  if (request === 'child_process' || request === 'node:child_process') return facade;
  return load.call(this, request, parent, isMain);
};

register(new URL('./swap-hooks.mjs', import.meta.url), { data: { target: pathToFileURL(target).href } });
