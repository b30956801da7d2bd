// The registry: owners by id (owner.ts), the kinds they may run, and the
// host-wide view of their trees (events, snapshot, releaseAll). Where a
// leased tree whose host is gone comes back: adoptable() lists them,
// adopt() takes one over (adopt.ts) under its owner.
import { EventEmitter } from 'node:events';
import { adoptTree, listAdoptable, type AdoptableTree } from './adopt.js';
import { DEFAULT_GRACE_MS } from './defaults.js';
import { duration, type Duration } from './duration.js';
import * as errors from './errors.js';
import { isToken, leaseOption, ownerToken, type LeaseRecord } from './lease.js';
import { parseLimits, type LimitsOption } from './limits.js';
import { defaultLogDir } from './log-file.js';
import { Owner, settleAll, type Entry, type KindSpec, type OwnerRegistry, type OwnerSnapshotTrees } from './owner.js';
import { ContainedProcess } from './process.js';
import type { ContainedResult, Leftover } from './result.js';

export type { KindSpec, OwnerSpawnOptions, TreeInfo } from './owner.js';
export { Owner } from './owner.js';

export interface Snapshot {
  owners: Array<{
    id: string;
    detached: boolean;
    hasLiveWork: boolean;
    trees: OwnerSnapshotTrees;
  }>;
}

export interface OwnerOptions {
  /** Resource limits for every tree of this owner; a spawn's own `limits` override them one by one. */
  limits?: LimitsOption;
  /** The default lease of this owner's trees (a spawn's own `lease` overrides it). */
  lease?: Duration;
}

export interface RegistryOptions {
  /**
   * Where `log: true` files go, one directory per owner (made 0700 and
   * checked to be this user's alone). Taken as given: the directory's own
   * permissions are the host's. Default: this user's private log
   * directory, <tmpdir>/cordon-logs-<uid> (Windows: %LOCALAPPDATA%\cordon\logs;
   * docs/lifecycle.md).
   */
  logDir?: string;
  /** Teardown grace for release() and stop(). Default 3000 ms. */
  grace?: Duration;
  /**
   * A string the host persists. A leased tree's adoption token is then
   * derived from it and the owner's id, so a restarted host with the same
   * secret adopts a whole owner (owner.adopt()) without stored tokens.
   */
  secret?: string;
}

const BUILT_IN_KINDS: Record<string, KindSpec> = {
  command: { unfinishedWork: false },
  subagent: { unfinishedWork: true },
  workflow: { unfinishedWork: true },
};

export class Registry extends EventEmitter implements OwnerRegistry {
  readonly grace: number;
  private readonly logDirOption: string | undefined;
  private readonly owners = new Map<string, Owner>();
  private readonly kinds = new Map<string, KindSpec>(Object.entries(BUILT_IN_KINDS));
  private readonly treeOwners = new Map<string, string>();
  private readonly secret: string | undefined;

  constructor(options: RegistryOptions = {}) {
    super();
    this.logDirOption = options.logDir;
    this.grace = duration('grace', options.grace, DEFAULT_GRACE_MS);
    if (options.secret !== undefined && (typeof options.secret !== 'string' || options.secret.length === 0)) {
      throw errors.invalidArg('secret', options.secret, 'a non-empty string', 'ERR_INVALID_ARG_TYPE');
    }
    this.secret = options.secret;
  }

  /**
   * Where `log: true` files go (one directory per owner in it): the
   * `logDir` option, else this user's private log directory, made on first
   * use (ERR_CORDON_LOG_DIR where it cannot be had).
   */
  get logDir(): string {
    return this.logDirOption ?? defaultLogDir();
  }

  /** @internal The adoption token of an owner's leased trees under the registry's secret, if it has one. */
  tokenFor(owner: string): string | undefined {
    return this.secret === undefined ? undefined : ownerToken(this.secret, owner);
  }

  /**
   * The leased trees of this user whose anchors are alive (their host may be
   * gone, or attached: leaseLeftMs null), oldest first. Stale records and
   * endpoints (their anchor is gone) are removed on the way.
   */
  async adoptable(): Promise<AdoptableTree[]> {
    return listAdoptable();
  }

  /**
   * Adopts a leased tree whose host is gone: a ContainedProcess registered
   * under its owner (terminate, kill, result, members, leftovers, logPath;
   * stdin is null, a terminal's tree's: its input). It resolves once the anchor's replay has said READY, so
   * `pid` and `state` are known from the start (the request is bounded by
   * 5 s, the replay's READY by 5 s more). The token: the creating host's
   * proc.adoptionToken, or (default) the one this registry's secret gives
   * the tree's owner.
   * ERR_CORDON_ADOPT_DENIED: a wrong token, or another host holds it (of two
   * racing adopters exactly one wins), or (Windows) the tree's pipe is served
   * by another process than its anchor (nothing was sent); ERR_CORDON_UNKNOWN_TREE: no such live
   * leased tree; ERR_CORDON_TIMEOUT: its anchor is alive but did not answer.
   */
  async adopt(id: string, options: { token?: string } = {}): Promise<ContainedProcess> {
    if (typeof id !== 'string' || id.length === 0) throw errors.invalidArg('id', id, 'a tree id from adoptable()', 'ERR_INVALID_ARG_TYPE');
    const token = (options ?? {}).token;
    if (token !== undefined && !isToken(token)) throw errors.adoptToken();
    let leased: LeaseRecord | undefined;
    const tree = await adoptTree(
      id,
      (record) => {
        leased = record;
        // A kind this registry does not know is a typed error before the anchor is asked.
        this.kind(record.kind);
        if (token !== undefined) return token;
        // The secret's token for the tree's owner (read from its record).
        const fromSecret = record.owner === null ? undefined : this.tokenFor(record.owner);
        if (fromSecret === undefined) throw errors.adoptToken();
        return fromSecret;
      },
      this.grace,
    );
    const proc = new ContainedProcess(tree);
    // Resolved only once the replay said READY: proc.pid and proc.state are known.
    await tree.replayed;
    const { owner: ownerId = null, kind, label } = leased!;
    const owner = this.owners.get(ownerId ?? `adopted-${id}`) ?? this.createOwner(ownerId ?? `adopted-${id}`);
    return owner.add(proc, kind, label);
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
    // An adopted tree is tracked once its replay told what it is: what
    // already happened to it is told now, in order, before its settling.
    if (proc.pid !== undefined) this.emit('spawn', { ...info, pid: proc.pid });
    else proc.once('spawn', (pid: number) => this.emit('spawn', { ...info, pid }));
    if (proc.rootExited) this.emit('exit', { ...info, exitCode: proc.exitCode, signal: proc.signalCode });
    else proc.once('exit', (exitCode: number | null, signal: NodeJS.Signals | null) => this.emit('exit', { ...info, exitCode, signal }));
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
