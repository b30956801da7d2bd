export { spawn, ContainedProcess } from './process.js';
export type { ContainedResult, GroupLeaver, Leftover, LimitKind, LimitName, LimitsResult, MemberInfo, Reason, TreeUsage } from './process.js';
export type { Limits, LimitsOption } from './limits.js';
export type { LinesFrom } from './lines.js';
export { run } from './run.js';
export type { RunOptions, RunResult } from './run.js';
export { capabilities } from './capabilities.js';
export { prepareCgroupLimits } from './cgroup-leaf.js';
export type { CgroupController, CgroupLeafError, CgroupLeafRefusal, CgroupLimitsPrepared, PrepareCgroupLimitsOptions } from './cgroup-leaf.js';
export type { Capabilities, Coverage, Guarantees, EscapeeCatch } from './capabilities.js';
export { CordonError, isCordonError } from './errors.js';
export type { CordonErrorCode } from './errors.js';
export {
  DEFAULT_GRACE_MS,
  DEFAULT_INTERRUPT_GRACE_MS,
  DEFAULT_WAIT_DELAY_MS,
} from './options.js';
export type { SpawnOptions, StdioOption, Tier, LeftoversPolicy } from './options.js';
export { Registry, Owner, registry } from './registry.js';
export type { KindSpec, OwnerOptions, OwnerSpawnOptions, TreeInfo, Snapshot, SnapshotMember, RegistryOptions } from './registry.js';
export type { AdoptableTree } from './lease.js';
export type { TreeState } from './process.js';
