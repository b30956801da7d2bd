// The ESM half of swap.mjs: `import ... from 'child_process'` resolves to cordon/child_process.
let target;
export function initialize(data) {
  target = data.target;
}
export function resolve(specifier, context, next) {
  if (specifier === 'child_process' || specifier === 'node:child_process') return { url: target, shortCircuit: true };
  return next(specifier, context);
}
