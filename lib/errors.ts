// The one place lib/ imports errors from. Everything cordon throws or rejects
// with is a CordonError (lib/errors/error.ts) built by a function of the
// catalogue in lib/errors/, one file per concern, so every message and code
// is written once; each code cordon's own errors carry is in
// CORDON_ERROR_CODES (test/errors.test.ts holds lib/ to both).
export * from './errors/error.js';
export * from './errors/input.js';
export * from './errors/launch.js';
export * from './errors/containment.js';
export * from './errors/cleanup.js';
export * from './errors/run.js';
export * from './errors/owners.js';
export * from './errors/leases.js';
export * from './errors/cgroup.js';
export * from './errors/child-process.js';
export * from './errors/node-validation.js';
