// The README's guarantee table, generated from tierGuarantees() so the two
// cannot drift (test/capabilities.test.ts compares them).
import { tierGuarantees, type Guarantees } from './capabilities.js';

const ROWS: Array<[keyof Guarantees, string]> = [
  ['containedBeforeExec', 'C1 contained before the command runs'],
  ['catchesEscapees', 'C2 setsid / double-fork / nohup escapees caught'],
  ['pidReuseSafe', 'C2 never signals a recycled pid'],
  ['gracefulStop', 'C3 graceful stop of the whole tree'],
  ['waitDelay', 'C4 bounded output drain (waitDelay)'],
  ['survivesHostSigkill', 'C8 tree ends when the host is SIGKILLed'],
  ['survivesAnchorDeath', 'tree ends when its anchor is killed'],
  ['reapsOrphans', 'C9 orphans reaped by the anchor'],
  ['limits', 'memory / pid limits'],
  ['cgroupNamespace', 'command in a cgroup namespace of its tree (host with CAP_SYS_ADMIN)'],
  ['holdsHostileMembers', 'contains a hostile member with the host\'s privileges (not a sandbox)'],
];

const COLUMNS = [
  { title: 'Linux, cgroup tier (default where a cgroup is writable)', platform: 'linux', tier: 'cgroup', pidfd: true },
  { title: 'Linux, subreaper tier (default otherwise)', platform: 'linux', tier: 'subreaper', pidfd: true },
  { title: 'Linux, process-group tier', platform: 'linux', tier: 'process-group', pidfd: true },
  { title: 'macOS, process-group tier', platform: 'darwin', tier: 'process-group', pidfd: false },
  { title: 'Windows, Job Object tier', platform: 'win32', tier: 'job-object', pidfd: false },
] as const;

function cell(value: boolean | string): string {
  if (value === true || value === 'always') return 'yes';
  if (value === false || value === 'never') return 'no';
  return value;
}

export function guaranteeTable(): string {
  const header = `| guarantee | ${COLUMNS.map((c) => c.title).join(' | ')} |`;
  const rule = `| --- | ${COLUMNS.map(() => '---').join(' | ')} |`;
  const data = COLUMNS.map((c) => tierGuarantees(c.platform, c.tier, c.pidfd).guarantees);
  const lines = ROWS.map(([key, title]) => `| ${title} | ${data.map((g) => cell(g[key])).join(' | ')} |`);
  return [header, rule, ...lines].join('\n');
}
