// Node's own types, which these declarations use (NodeJS.*, node:stream ...):
// kept in the emitted index.d.ts (preserve), so that an importer compiles
// where its compiler does not load every @types package by itself
// (TypeScript 7's default `types` is empty).
/// <reference types="node" preserve="true" />
export { spawn, ContainedProcess, type ContainedProcessEvents, type ProcessStreams, type StreamsFor } from './process.js';
export type { SpawnOptions } from './process.js';
export type { ContainedResult, GroupLeaver, Leftover, LimitHit, LimitName, LimitsResult, MemberInfo, Reason, TreeUsage } from './result.js';
export type { Limits, LimitsOption } from './limits.js';
export type { ConfineOption, ConfinedResult, ConfineNetwork, ConfineMechanism } from './confine.js';
export type { LinesFrom } from './lines.js';
export { run } from './run.js';
export type { RunOptions, RunResult, RunOutput, RunResultFor } from './run.js';
export type { RunInput } from './run-stdio.js';
export { capabilities } from './capabilities.js';
export { prepareCgroupLimits } from './cgroup-leaf.js';
export type { CgroupController, CgroupLeafError, CgroupLeafRefusal, CgroupLimitsPrepared, PrepareCgroupLimitsOptions } from './cgroup-leaf.js';
export type { Capabilities, Coverage, Guarantees, EscapeeCatch } from './capabilities.js';
export { CORDON_ERROR_CODES, CordonError, isCordonError } from './errors.js';
export type { AnchorLostSweep, CordonErrorCode } from './errors.js';
export type { Duration, DurationUnit } from './duration.js';
export {
  DEFAULT_GRACE_MS,
  DEFAULT_INTERRUPT_GRACE_MS,
  DEFAULT_WAIT_DELAY_MS,
} from './options.js';
export type { StdioOption, Tier, LeftoversPolicy } from './options.js';
export { Registry, Owner, registry } from './registry.js';
export type { KindSpec, OwnerOptions, OwnerSpawnOptions, TreeInfo, Snapshot, RegistryOptions } from './registry.js';
export type { AdoptableTree } from './adopt.js';
export type { TreeState } from './facts.js';
