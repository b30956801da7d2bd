// cordon/child_process's argument errors in node:child_process's own shapes
// (its ERR_INVALID_ARG_TYPE, ERR_INVALID_ARG_VALUE, ERR_OUT_OF_RANGE and
// ERR_UNKNOWN_SIGNAL: a TypeError or RangeError with `code` and the message
// Node's validators word), so that code and tests written against Node's
// read them unchanged (Node's own child_process tests check class, code and
// message: scripts/node-tests). They are thrown before anything runs.
import { inspect } from 'node:util';

type NodeArgError = (TypeError | RangeError) & { code: string };

function coded<E extends TypeError | RangeError>(error: E, code: string): E & { code: string } {
  Object.defineProperty(error, 'code', { value: code, enumerable: true, writable: true, configurable: true });
  // Node's errors show as `TypeError [CODE]: ...`, in a stack and as a string.
  error.stack = error.stack?.replace(/^(\w+):/, `$1 [${code}]:`);
  Object.defineProperty(error, 'toString', { value: () => `${error.name} [${code}]: ${error.message}`, enumerable: false, writable: true, configurable: true });
  return error as E & { code: string };
}

// How Node names what it received: `type number (42)`, `an instance of Array`, `null`...
function received(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (typeof value === 'function') return `function ${(value as { name?: string }).name || '<anonymous>'}`;
  if (typeof value === 'object') {
    const name = (value as object).constructor?.name;
    return name ? `an instance of ${name}` : inspect(value, { depth: -1 });
  }
  let shown = inspect(value, { colors: false });
  if (shown.length > 28) shown = `${shown.slice(0, 25)}...`;
  return `type ${typeof value} (${shown})`;
}

const CLASSES = new Set(['Array', 'Buffer', 'TypedArray', 'DataView', 'AbortSignal', 'Function', 'Object', 'URL']);

// `of type string`, `an instance of Array`, `one of type string or an instance of Buffer`...
function expected(types: string[]): string {
  const basic = types.filter((t) => !CLASSES.has(t) && t !== 'int32');
  const instances = types.filter((t) => CLASSES.has(t));
  const parts: string[] = [];
  if (types.includes('int32')) parts.push('an int32');
  if (basic.length === 1) parts.push(`of type ${basic[0]}`);
  else if (basic.length > 1) parts.push(`one of type ${basic.slice(0, -1).join(', ')} or ${basic[basic.length - 1]}`);
  if (instances.length === 1) parts.push(`an instance of ${instances[0]}`);
  else if (instances.length > 1) parts.push(`an instance of ${instances.slice(0, -1).join(', ')} or ${instances[instances.length - 1]}`);
  return parts.join(' or ');
}

function subject(name: string): string {
  return `"${name}" ${name.includes('.') ? 'property' : 'argument'}`;
}

/** Node's ERR_INVALID_ARG_TYPE: `The "options.cwd" property must be of type string. Received type number (1)`. */
export function nodeArgType(name: string, types: string | string[], value: unknown): NodeArgError {
  return coded(new TypeError(`The ${subject(name)} must be ${expected(Array.isArray(types) ? types : [types])}. Received ${received(value)}`), 'ERR_INVALID_ARG_TYPE');
}

/** Node's ERR_INVALID_ARG_VALUE: `The property 'options.serialization' must be one of: ... Received null`. */
export function nodeArgValue(name: string, value: unknown, reason = 'is invalid'): NodeArgError {
  let shown = inspect(value);
  if (shown.length > 128) shown = `${shown.slice(0, 128)}...`;
  return coded(new TypeError(`The ${name.includes('.') ? 'property' : 'argument'} '${name}' ${reason}. Received ${shown}`), 'ERR_INVALID_ARG_VALUE');
}

/** Node's ERR_OUT_OF_RANGE: `The value of "timeout" is out of range. It must be an unsigned integer. Received ...`. */
export function nodeOutOfRange(name: string, range: string, value: unknown): NodeArgError {
  const shown = typeof value === 'number' || typeof value === 'bigint' ? String(value) : inspect(value);
  return coded(new RangeError(`The value of "${name}" is out of range. It must be ${range}. Received ${shown}`), 'ERR_OUT_OF_RANGE');
}

/** Node's ERR_UNKNOWN_SIGNAL. */
export function nodeUnknownSignal(value: unknown): NodeArgError {
  return coded(new TypeError(`Unknown signal: ${String(value)}`), 'ERR_UNKNOWN_SIGNAL');
}
