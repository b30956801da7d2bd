// An owner (C7): a session, a conversation, a request; its trees, of kinds,
// listed and stopped as its own and only its own, and the release semantics
// of C8 (detach with a keep-alive, fork, release). The one predicate every
// teardown path of a host asks is hasLiveWork(). Owners are made and found by
// their registry (registry.ts), which this file knows only as OwnerRegistry.
import type { AdoptableTree } from './adopt.js';
import { debug } from './debug.js';
import { duration, type Duration } from './duration.js';
import * as errors from './errors.js';
import type { TreeState } from './facts.js';
import { launchTree } from './launch.js';
import { ownerDirName, ownerLogDir } from './log-file.js';
import { mergeLimits, parseLimits, type Limits } from './limits.js';
import { ContainedProcess, type SpawnOptions, type StreamsFor } from './process.js';
import type { MemberInfo } from './result.js';

export interface KindSpec {
  /** Whether a live tree of this kind counts as unfinished work (keeps hasLiveWork true). */
  unfinishedWork: boolean;
}

export interface OwnerSpawnOptions extends Omit<SpawnOptions, 'log'> {
  /** Default 'command'. */
  kind?: string;
  /** A name for UIs; default the command line. */
  label?: string;
  /** true: a new file (0600) in the owner's directory (0700) under the registry's log directory; a string: that path. */
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

/** One owner's trees in a registry snapshot, each with its live members. */
export type OwnerSnapshotTrees = Array<Omit<TreeInfo, 'liveMembers'> & { members: MemberInfo[] }>;

/** A tree under an owner. */
export interface Entry {
  proc: ContainedProcess;
  kind: string;
  label: string;
}

/** What an owner asks of its registry (registry.ts). */
export interface OwnerRegistry {
  readonly logDir: string;
  readonly grace: number;
  tokenFor(owner: string): string | undefined;
  kind(name: string): KindSpec;
  adoptable(): Promise<AdoptableTree[]>;
  adopt(id: string, options: { token?: string }): Promise<ContainedProcess>;
  ownerOfTree(treeId: string): string | undefined;
  createOwner(id: string): Owner;
  dropOwner(owner: Owner): void;
  track(owner: Owner, entry: Entry): void;
  untrack(treeId: string): void;
  emit(event: string, ...args: unknown[]): boolean;
}

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
  constructor(private readonly registry: OwnerRegistry, id: string) {
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

  /** Start a tree under this owner (its streams' types follow `stdio`, as spawn()'s). */
  spawn<const O extends OwnerSpawnOptions = Record<never, never>>(command: string, args?: readonly string[], options?: O): ContainedProcess<StreamsFor<O>>;
  spawn(command: string, args: readonly string[] = [], options: OwnerSpawnOptions = {}): ContainedProcess {
    this.assertUsable();
    const { kind = 'command', label, log, ...rest } = options;
    this.registry.kind(kind); // an unknown kind is a typed error before anything runs
    const spawnOptions: SpawnOptions = rest;
    const limits = mergeLimits(this.limits, parseLimits('limits', rest.limits));
    if (limits !== undefined) spawnOptions.limits = limits;
    let logStem: string | undefined;
    if (log === true) {
      logStem = safeName(command.split('/').pop() ?? command);
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
    const context = { owner: this.id, kind, label: shown, token: this.registry.tokenFor(this.id), logStem, logDir: () => ownerLogDir(this.registry.logDir, ownerDirName(this.id)) };
    const proc = new ContainedProcess(launchTree(command, args, spawnOptions, context));
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
   * Adopts every adoptable tree of this owner (leased trees whose
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
  snapshotTrees(): OwnerSnapshotTrees {
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
  async stop(target: string | { kinds?: string[]; grace?: Duration }): Promise<void> {
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
  release(options: { grace?: Duration } = {}): Promise<void> {
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
  detach(options: { keepAlive?: Duration } = {}): void {
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
export async function settleAll(promises: Promise<void>[]): Promise<void> {
  const results = await Promise.allSettled(promises);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}
