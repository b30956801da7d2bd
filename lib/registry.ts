// Owners and kinds (CONTRACT C7) and release semantics (C8), above the native
// seam so every tier gets them. One predicate, hasLiveWork(), answers "is this
// owner still doing something" for every teardown path of a host.
import { EventEmitter } from 'node:events';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { debug } from './debug.js';
import { duration } from './duration.js';
import * as errors from './errors.js';
import { DEFAULT_GRACE_MS } from './defaults.js';
import type { SpawnOptions } from './options.js';
import { mergeLimits, parseLimits, type Limits, type LimitsOption } from './limits.js';
import { ADOPTION, ContainedProcess, LEASE_CONTEXT, type ContainedResult, type Leftover, type TreeState } from './process.js';
import {
  isToken,
  leaseOption,
  leaseOwner,
  listAdoptable,
  listAdoptableWindows,
  ownerToken,
  requestAdoption,
  requestWindowsAdoption,
  type AdoptableTree,
  type LeaseRecord,
} from './lease.js';

export interface KindSpec {
  /** Whether a live tree of this kind counts as unfinished work (keeps hasLiveWork true). */
  unfinishedWork: boolean;
}

export interface OwnerSpawnOptions extends Omit<SpawnOptions, 'log'> {
  /** Default 'command'. */
  kind?: string;
  /** A name for UIs; default the command line. */
  label?: string;
  /** true: a file under the registry's log directory; a string: that path. */
  log?: boolean | string;
}

export interface TreeInfo {
  id: string;
  owner: string;
  kind: string;
  label: string;
  pid: number | undefined;
  cwd: string;
  logPath: string | undefined;
  state: TreeState;
  startedAt: number;
  /** Live processes of the tree right now, as the OS lists them. */
  liveMembers: number;
}

export interface SnapshotMember {
  pid: number;
  ppid: number;
  command: string;
}

export interface Snapshot {
  owners: Array<{
    id: string;
    detached: boolean;
    hasLiveWork: boolean;
    trees: Array<Omit<TreeInfo, 'liveMembers'> & { members: SnapshotMember[] }>;
  }>;
}

export interface OwnerOptions {
  /** Resource limits for every tree of this owner; a spawn's own `limits` override them one by one. */
  limits?: LimitsOption;
  /** issue #17: the default lease of this owner's trees (a spawn's own `lease` overrides it). */
  lease?: number | string;
}

export interface RegistryOptions {
  /** Where `log: true` files go. Default <tmpdir>/cordon-logs. */
  logDir?: string;
  /** Teardown grace for release() and stop(). Default 3000 ms. */
  grace?: number;
  /**
   * issue #17: a string the host persists. A leased tree's adoption token is
   * then derived from it and the owner's id, so a restarted host with the
   * same secret adopts a whole owner (owner.adopt()) without stored tokens.
   */
  secret?: string;
}

interface Entry {
  proc: ContainedProcess;
  kind: string;
  label: string;
}

const BUILT_IN_KINDS: Record<string, KindSpec> = {
  command: { unfinishedWork: false },
  subagent: { unfinishedWork: true },
  workflow: { unfinishedWork: true },
};

function safeName(s: string): string {
  return s.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 80) || '_';
}

export class Owner {
  readonly id: string;
  private readonly trees = new Map<string, Entry>();
  private detachedUntil: number | undefined;
  private detachTimer: NodeJS.Timeout | undefined;
  private releasing: Promise<void> | undefined;
  /** The default limits of this owner's trees (OwnerOptions). */
  limits: Limits | undefined;
  /** The default lease of this owner's trees in ms (OwnerOptions). */
  lease: number | undefined;

  /** @internal use registry.owner(id) */
  constructor(private readonly registry: Registry, id: string) {
    this.id = id;
  }

  get released(): boolean {
    return this.releasing !== undefined;
  }

  get detached(): boolean {
    return this.detachedUntil !== undefined;
  }

  private assertUsable(): void {
    if (this.releasing) {
      throw errors.ownerReleased(this.id);
    }
  }

  /** Start a tree under this owner. */
  spawn(command: string, args: string[] = [], options: OwnerSpawnOptions = {}): ContainedProcess {
    this.assertUsable();
    const { kind = 'command', label, log, ...rest } = options;
    this.registry.kind(kind); // an unknown kind is a typed error before anything runs
    const spawnOptions: SpawnOptions = rest;
    const limits = mergeLimits(this.limits, parseLimits('limits', rest.limits));
    if (limits !== undefined) spawnOptions.limits = limits;
    if (log === true) {
      const dir = join(this.registry.logDir, safeName(this.id));
      mkdirSync(dir, { recursive: true });
      spawnOptions.log = join(dir, `${safeName(command.split('/').pop() ?? command)}-${Date.now()}-${process.hrtime.bigint() % 100000n}.log`);
    } else if (typeof log === 'string') {
      spawnOptions.log = log;
    } else if (log !== undefined && log !== false) {
      throw errors.ownerLogOption();
    }
    if (label !== undefined && typeof label !== 'string') {
      throw errors.ownerLabelOption();
    }
    if (spawnOptions.lease === undefined && this.lease !== undefined) spawnOptions.lease = this.lease;
    const shown = label ?? [command, ...args].join(' ');
    Object.assign(spawnOptions, {
      [LEASE_CONTEXT]: { owner: this.id, kind, label: shown, token: this.registry.tokenFor(this.id), logDir: join(this.registry.logDir, safeName(this.id)) },
    });
    const proc = new ContainedProcess(command, args, spawnOptions);
    return this.add(proc, kind, shown);
  }

  /** @internal A tree this owner now holds (spawned, or adopted). */
  add(proc: ContainedProcess, kind: string, label: string): ContainedProcess {
    const entry: Entry = { proc, kind, label };
    this.trees.set(proc.id, entry);
    this.registry.track(this, entry);
    return proc;
  }

  /**
   * issue #17: adopts every adoptable tree of this owner (leased trees whose
   * host is gone), with the registry's `secret`. Resolves with the adopted
   * processes; a tree another host adopted first is left out, and so is
   * one whose anchor did not answer in time (adoptable() lists it with
   * `answered: false`; registry.adopt() of it is ERR_CORDON_TIMEOUT).
   */
  async adopt(): Promise<ContainedProcess[]> {
    this.assertUsable();
    const token = this.registry.tokenFor(this.id);
    if (token === undefined) throw errors.adoptToken();
    const out: ContainedProcess[] = [];
    for (const tree of await this.registry.adoptable()) {
      if (tree.owner !== this.id) continue;
      try {
        out.push(await this.registry.adopt(tree.id, { token }));
      } catch (err) {
        const code = (err as errors.CordonError).code;
        if (code !== 'ERR_CORDON_ADOPT_DENIED' && code !== 'ERR_CORDON_UNKNOWN_TREE' && code !== 'ERR_CORDON_TIMEOUT') throw err;
        debug('owner %s: tree %s not adopted: %s', this.id, tree.id, (err as Error).message);
      }
    }
    return out;
  }

  /** Drop an ended tree from list() (ended trees stay listed for inspection until then). */
  forget(id: string): void {
    const proc = this.get(id);
    if (isLive(proc)) throw errors.treeStillLive(id);
    this.trees.delete(id);
    this.registry.untrack(id);
  }

  private info(entry: Entry): TreeInfo {
    const { proc } = entry;
    return {
      id: proc.id,
      owner: this.id,
      kind: entry.kind,
      label: entry.label,
      pid: proc.pid,
      cwd: proc.cwd,
      logPath: proc.logPath,
      state: proc.state,
      startedAt: proc.startedAt,
      liveMembers: proc.members().length,
    };
  }

  /** This owner's trees, and only this owner's. */
  list(): TreeInfo[] {
    return [...this.trees.values()].map((e) => this.info(e));
  }

  /** @internal */
  snapshotTrees(): Snapshot['owners'][number]['trees'] {
    return [...this.trees.values()].map((e) => {
      const { liveMembers: _ignored, ...info } = this.info(e);
      return { ...info, members: e.proc.members() };
    });
  }

  /** A tree of this owner, by id; another owner's id is a typed error. */
  get(id: string): ContainedProcess {
    const entry = this.trees.get(id);
    if (entry) return entry.proc;
    if (this.registry.ownerOfTree(id) !== undefined) {
      throw errors.treeNotOwned(id, this.id);
    }
    throw errors.unknownTree(this.id, id);
  }

  /**
   * Terminate one tree by id, or every tree of the given kinds (all kinds when
   * none are named). Resolves at quiescence of those trees.
   */
  async stop(target: string | { kinds?: string[]; grace?: number }): Promise<void> {
    if (typeof target === 'string') {
      await this.get(target).terminate({ grace: this.registry.grace });
      return;
    }
    if (typeof target !== 'object' || target === null) {
      throw errors.stopTarget();
    }
    const kinds = target.kinds;
    if (kinds !== undefined) for (const k of kinds) this.registry.kind(k);
    const grace = duration('grace', target.grace, this.registry.grace);
    const chosen = [...this.trees.values()].filter((e) => kinds === undefined || kinds.includes(e.kind));
    await settleAll(chosen.map((e) => e.proc.terminate({ grace })));
  }

  /**
   * The one predicate for every teardown path: true while a tree of an
   * unfinished-work kind is live, or while any tree is live and the owner is
   * detached within its keep-alive.
   */
  hasLiveWork(): boolean {
    for (const e of this.trees.values()) {
      if (!isLive(e.proc)) continue;
      if (this.registry.kind(e.kind).unfinishedWork) return true;
      if (this.detached) return true;
    }
    return false;
  }

  /** Session deleted, replaced or resumed away: every tree of every kind is terminated gracefully. */
  release(options: { grace?: number } = {}): Promise<void> {
    if (this.releasing) return this.releasing;
    let grace: number;
    try {
      grace = duration('grace', (options ?? {}).grace, this.registry.grace);
    } catch (err) {
      return Promise.reject(err);
    }
    clearTimeout(this.detachTimer);
    const procs = [...this.trees.values()].map((e) => e.proc);
    // The id is free at once: registry.owner(id) from here on is a new owner,
    // never this released one.
    this.registry.dropOwner(this);
    this.releasing = settleAll(procs.map((p) => p.terminate({ grace }))).finally(() => {
      for (const id of this.trees.keys()) this.registry.untrack(id);
      this.trees.clear();
      this.registry.emit('release', this.id);
    });
    return this.releasing;
  }

  /**
   * Release started by cordon itself (detach, keep-alive expiry): nobody
   * awaits it, so a cleanup failure is reported as a 'cleanup-failed' event
   * and a process warning instead of crashing the host as an unhandled
   * rejection. It is never reported as success.
   */
  private releaseInBackground(why: string): void {
    this.release().catch((error: unknown) => {
      debug('owner %s: release after %s failed: %s', this.id, why, (error as Error).message);
      this.registry.emit('cleanup-failed', { owner: this.id, error });
      process.emitWarning(error as Error);
    });
  }

  /**
   * The view went away: trees keep running. registry.owner(id) within
   * `keepAlive` re-attaches; after it, the owner is released. An owner with no
   * live tree is released at once.
   */
  detach(options: { keepAlive?: number } = {}): void {
    this.assertUsable();
    const keepAlive = duration('keepAlive', options.keepAlive, 0);
    if (![...this.trees.values()].some((e) => isLive(e.proc))) {
      this.releaseInBackground('detach');
      return;
    }
    clearTimeout(this.detachTimer);
    this.detachedUntil = Date.now() + keepAlive;
    this.detachTimer = setTimeout(() => {
      debug('owner %s: keep-alive of %d ms over, releasing', this.id, keepAlive);
      this.releaseInBackground('keep-alive expiry');
    }, keepAlive);
    this.detachTimer.unref();
  }

  /** @internal registry.owner(id) on a detached owner. */
  reattach(): void {
    clearTimeout(this.detachTimer);
    this.detachTimer = undefined;
    this.detachedUntil = undefined;
  }

  /** A new owner with no trees; this one keeps its trees running. */
  fork(newId: string): Owner {
    this.assertUsable();
    return this.registry.createOwner(newId);
  }
}

function isLive(proc: ContainedProcess): boolean {
  const s = proc.state;
  return s === 'starting' || s === 'running' || s === 'leftovers';
}

/** Wait for every promise; then rethrow the first failure (never swallowed). */
async function settleAll(promises: Promise<void>[]): Promise<void> {
  const results = await Promise.allSettled(promises);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}

export class Registry extends EventEmitter {
  readonly logDir: string;
  readonly grace: number;
  private readonly owners = new Map<string, Owner>();
  private readonly kinds = new Map<string, KindSpec>(Object.entries(BUILT_IN_KINDS));
  private readonly treeOwners = new Map<string, string>();
  private readonly secret: string | undefined;

  constructor(options: RegistryOptions = {}) {
    super();
    this.logDir = options.logDir ?? join(tmpdir(), 'cordon-logs');
    this.grace = duration('grace', options.grace, DEFAULT_GRACE_MS);
    if (options.secret !== undefined && (typeof options.secret !== 'string' || options.secret.length === 0)) {
      throw errors.invalidArg('secret', options.secret, 'a non-empty string', 'ERR_INVALID_ARG_TYPE');
    }
    this.secret = options.secret;
  }

  /** @internal The adoption token of an owner's leased trees under the registry's secret, if it has one. */
  tokenFor(owner: string): string | undefined {
    return this.secret === undefined ? undefined : ownerToken(this.secret, owner);
  }

  /**
   * issue #17: the leased trees of this user whose anchors are alive (their
   * host may be gone, or attached: leaseLeftMs null). Stale records and
   * endpoints (their anchor is gone) are removed on the way.
   */
  async adoptable(): Promise<AdoptableTree[]> {
    return process.platform === 'win32' ? listAdoptableWindows() : listAdoptable();
  }

  /**
   * issue #17: adopts a leased tree whose host is gone: a ContainedProcess
   * registered under its owner (terminate, kill, result, members, leftovers,
   * logPath; stdin is null). The token: the creating host's
   * proc.adoptionToken, or (default) the one this registry's secret gives
   * the tree's owner. ERR_CORDON_ADOPT_DENIED: a wrong token, or another host
   * holds it (of two racing adopters exactly one wins);
   * ERR_CORDON_UNKNOWN_TREE: no such live leased tree.
   */
  async adopt(id: string, options: { token?: string } = {}): Promise<ContainedProcess> {
    if (typeof id !== 'string' || id.length === 0) throw errors.invalidArg('id', id, 'a tree id from adoptable()', 'ERR_INVALID_ARG_TYPE');
    let token = (options ?? {}).token;
    if (token !== undefined && !isToken(token)) throw errors.adoptToken();
    // A kind this registry does not know is a typed error before the anchor is asked.
    const check = (record: LeaseRecord) => void this.kind(record.kind);
    const secretToken = (owner: string | null | undefined) => {
      if (owner === undefined) throw errors.unknownLease(id);
      const t = owner === null ? undefined : this.tokenFor(owner);
      if (t === undefined) throw errors.adoptToken();
      return t;
    };
    // POSIX asks the anchor synchronously; Windows connects to its named pipe (asynchronous).
    const adoption =
      process.platform === 'win32'
        ? await requestWindowsAdoption(id, token ?? secretToken(leaseOwner(id)), check)
        : (() => {
            // The secret's token for the tree's owner (read from its record).
            token ??= secretToken(leaseOwner(id));
            return requestAdoption(id, token, check);
          })();
    const r = adoption.record;
    const ownerId = r.owner ?? `adopted-${r.id}`;
    const owner = this.owners.get(ownerId) ?? this.createOwner(ownerId);
    const proc = new ContainedProcess(r.command, r.args, { grace: this.grace, [ADOPTION]: adoption } as never);
    return owner.add(proc, r.kind, r.label);
  }

  /**
   * The owner with this id: created, or re-attached if it was detached.
   * `options.limits`, when given, becomes the default limits of its trees.
   */
  owner(id: string, options: OwnerOptions = {}): Owner {
    if (typeof id !== 'string' || id.length === 0) throw errors.ownerIdInvalid();
    const limits = parseLimits('owner limits', (options ?? {}).limits);
    const lease = leaseOption((options ?? {}).lease);
    const existing = this.owners.get(id);
    if (existing) {
      existing.reattach();
      if (limits !== undefined) existing.limits = limits;
      if (lease !== undefined) existing.lease = lease;
      return existing;
    }
    const owner = this.createOwner(id);
    if (limits !== undefined) owner.limits = limits;
    if (lease !== undefined) owner.lease = lease;
    return owner;
  }

  /** @internal */
  createOwner(id: string): Owner {
    if (typeof id !== 'string' || id.length === 0) throw errors.ownerIdInvalid();
    if (this.owners.has(id)) throw errors.ownerExists(id);
    const owner = new Owner(this, id);
    this.owners.set(id, owner);
    return owner;
  }

  /** @internal */
  dropOwner(owner: Owner): void {
    if (this.owners.get(owner.id) === owner) this.owners.delete(owner.id);
  }

  /** Declare a kind, saying whether its live trees count as unfinished work. */
  defineKind(name: string, spec: KindSpec): void {
    if (typeof name !== 'string' || name.length === 0) throw errors.kindNameInvalid();
    if (typeof spec !== 'object' || spec === null || typeof spec.unfinishedWork !== 'boolean') {
      throw errors.kindSpecInvalid();
    }
    if (name in BUILT_IN_KINDS) throw errors.kindBuiltIn(name);
    this.kinds.set(name, { unfinishedWork: spec.unfinishedWork });
  }

  /** @internal */
  kind(name: string): KindSpec {
    const spec = this.kinds.get(name);
    if (!spec) {
      throw errors.unknownKind(name, this.kinds.keys());
    }
    return spec;
  }

  /** @internal */
  ownerOfTree(treeId: string): string | undefined {
    return this.treeOwners.get(treeId);
  }

  /** @internal */
  track(owner: Owner, entry: Entry): void {
    const { proc } = entry;
    this.treeOwners.set(proc.id, owner.id);
    const info = { owner: owner.id, id: proc.id, kind: entry.kind, label: entry.label };
    proc.once('spawn', (pid: number) => this.emit('spawn', { ...info, pid }));
    proc.once('exit', (exitCode: number | null, signal: NodeJS.Signals | null) => this.emit('exit', { ...info, exitCode, signal }));
    proc.on('leftovers', (leftovers: Leftover[], fate: string) => this.emit('leftovers', { ...info, leftovers, fate }));
    proc.result.then(
      (result: ContainedResult) => this.emit('settled', { ...info, result }),
      (error: unknown) => this.emit('settled', { ...info, error }),
    );
  }

  /** @internal */
  untrack(treeId: string): void {
    this.treeOwners.delete(treeId);
  }

  /** "Is this owner still doing something?" for a host's teardown paths. */
  hasLiveWork(ownerId: string): boolean {
    return this.owners.get(ownerId)?.hasLiveWork() ?? false;
  }

  /** Alias of hasLiveWork(ownerId). */
  isUnfinishedWork(ownerId: string): boolean {
    return this.hasLiveWork(ownerId);
  }

  /** Ids of the owners that exist now. */
  ownerIds(): string[] {
    return [...this.owners.keys()];
  }

  /** A JSON-able picture of owners, their trees and the live members of each tree. */
  snapshot(): Snapshot {
    return {
      owners: [...this.owners.values()].map((o) => ({
        id: o.id,
        detached: o.detached,
        hasLiveWork: o.hasLiveWork(),
        trees: o.snapshotTrees(),
      })),
    };
  }

  /** Release every owner (e.g. on an orderly host shutdown). */
  releaseAll(options: { grace?: number } = {}): Promise<void> {
    return settleAll([...this.owners.values()].map((o) => o.release(options)));
  }
}

/** The registry most hosts need: one per process. */
export const registry = new Registry();
