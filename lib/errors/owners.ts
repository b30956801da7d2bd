// The registry, its owners and kinds: misuse is a typed error (stage
// 'input') before anything runs or stops.
import { CordonError, type CordonErrorCode } from './error.js';

function registryError(message: string, code: CordonErrorCode): CordonError {
  return new CordonError(message, { code, stage: 'input' });
}

export function ownerReleased(owner: string): CordonError {
  return registryError(`Owner "${owner}" was released; get a new handle with registry.owner(id).`, 'ERR_CORDON_OWNER_RELEASED');
}

export function ownerLogOption(): CordonError {
  return registryError(`The option "log" must be true, false or a file path.`, 'ERR_INVALID_ARG_VALUE');
}

export function ownerLabelOption(): CordonError {
  return registryError(`The option "label" must be a string.`, 'ERR_INVALID_ARG_TYPE');
}

export function treeStillLive(id: string): CordonError {
  return registryError(`Tree ${id} is still live; stop it first.`, 'ERR_CORDON_TREE_LIVE');
}

export function treeNotOwned(id: string, owner: string): CordonError {
  return registryError(`Tree ${id} belongs to another owner; owner "${owner}" cannot reach it.`, 'ERR_CORDON_NOT_OWNER');
}

export function unknownTree(owner: string, id: string): CordonError {
  return registryError(`Owner "${owner}" has no tree ${id}.`, 'ERR_CORDON_UNKNOWN_TREE');
}

export function stopTarget(): CordonError {
  return registryError('stop() takes a tree id or { kinds }.', 'ERR_INVALID_ARG_TYPE');
}

export function ownerIdInvalid(): CordonError {
  return registryError('An owner id is a non-empty string.', 'ERR_INVALID_ARG_VALUE');
}

export function ownerExists(owner: string): CordonError {
  return registryError(`Owner "${owner}" already exists.`, 'ERR_CORDON_OWNER_EXISTS');
}

export function kindNameInvalid(): CordonError {
  return registryError('A kind name is a non-empty string.', 'ERR_INVALID_ARG_VALUE');
}

export function kindSpecInvalid(): CordonError {
  return registryError('defineKind(name, { unfinishedWork: boolean })', 'ERR_INVALID_ARG_TYPE');
}

export function kindBuiltIn(name: string): CordonError {
  return registryError(`The kind "${name}" is built in and cannot be redefined.`, 'ERR_INVALID_ARG_VALUE');
}

export function unknownKind(name: string, known: Iterable<string>): CordonError {
  return registryError(`Unknown kind "${name}". Known: ${[...known].join(', ')}; add one with registry.defineKind().`, 'ERR_INVALID_ARG_VALUE');
}
