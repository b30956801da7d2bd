// The README's guarantee table, generated from the tier table (tiers.ts) so the
// two cannot drift (test/capabilities.test.ts compares them): one column per
// selectable tier and platform, in the table's order.
import { tierGuarantees, type Guarantees } from './capabilities.js';
import { PLATFORMS, TIERS, type Tier, type TierSpec } from './tiers.js';

const ROWS: Array<[keyof Guarantees, string]> = [
  ['containedBeforeExec', 'C1 contained before the command runs'],
  ['catchesEscapees', 'C2 setsid / double-fork / nohup escapees caught'],
  ['pidReuseSafe', 'C2 never signals a recycled pid'],
  ['gracefulStop', 'C3 graceful stop of the whole tree'],
  ['stopCostIsTheTree', "C3 stopping reads the tree alone (cost does not grow with the host's other processes)"],
  ['waitDelay', 'C4 bounded output drain (waitDelay)'],
  ['survivesHostSigkill', 'C8 tree ends when the host is SIGKILLed'],
  ['survivesAnchorDeath', 'tree ends when its anchor is killed'],
  ['anchorLossSwept', "when its anchor is killed, the host kills what it can still identify as the tree's (ERR_CORDON_ANCHOR_LOST says what)"],
  ['reapsOrphans', 'C9 orphans reaped by the anchor'],
  ['limits', 'memory / process / CPU limits (cgroup: where controllers are delegated, v2, or v1 is writable; Job Object: set with best-effort only, enforcement not observed)'],
  ['terminal', 'contained terminal (pty option): every guarantee above with the command on a pseudo-terminal (Windows: not claimed by the tier; capabilities() gives it where it finds ConPTY, Windows 10 1809+ but not Wine, which only the GitHub Windows job runs)'],
  ['terminalOutputKept', "C13 a terminal's last output kept for a host whose event loop stalls as the tree ends (as a pipe's)"],
  ['confine', 'confine option: writes, reads and network confined by the kernel, every descendant included (Linux: Landlock, network namespace with CAP_SYS_ADMIN; macOS: a Seatbelt profile)'],
  ['cgroupNamespace', 'command in a cgroup namespace of its tree (host with CAP_SYS_ADMIN)'],
  ['holdsHostileMembers', 'contains a hostile member with the host\'s privileges (not a sandbox)'],
];

interface Column {
  title: string;
  platform: NodeJS.Platform;
  tier: Tier;
  pidfd: boolean;
}

function columns(): Column[] {
  const out: Column[] = [];
  for (const spec of TIERS) {
    if (!spec.selectable) continue;
    const readme = (spec as TierSpec).readme ?? {};
    for (const platform of spec.platforms) {
      const where = PLATFORMS[platform]!;
      const title = `${where.name}, ${readme.label ?? spec.name} tier${readme.defaultWhen ? ` (${readme.defaultWhen})` : ''}`;
      out.push({ title, platform, tier: spec.name, pidfd: where.pidfd });
    }
  }
  return out;
}

// 'marked' by platform: whose environment the anchor can read decides (docs/tiers.md, macOS).
const MARKED: Partial<Record<NodeJS.Platform, string>> = {
  linux: "if they keep the tree's environment marker (not env -i) where the anchor may read it (not a non-dumpable program such as ssh-agent, unless the host may ptrace it)",
  darwin:
    "third-party programs: if they keep the tree's environment marker (not env -i); Apple's SIP-protected, other restricted and setuid programs (their environment is withheld): only if the anchor saw them, or the process that forked them, as members (macOS 15.4+; before, only until they exec): not after a double fork through a process that exited unseen",
};

// What a 'yes' means where it was never observed: macOS's confine is built from
// Apple's documented behaviour and run only on the model of XNU (docs/confine.md).
const UNOBSERVED: Partial<Record<NodeJS.Platform, Partial<Record<keyof Guarantees, string>>>> = {
  darwin: { confine: 'yes by construction, never observed on a Mac (a Seatbelt profile applied before exec; checked on the model of XNU only for where and when it is applied)' },
};

function cell(value: boolean | string, platform: NodeJS.Platform, key: keyof Guarantees): string {
  const unobserved = UNOBSERVED[platform]?.[key];
  if (value === true && unobserved) return unobserved;
  if (value === true || value === 'always') return 'yes';
  if (value === false || value === 'never') return 'no';
  if (value === 'marked') return MARKED[platform] ?? "if they keep the tree's environment marker (not env -i)";
  return value;
}

export function guaranteeTable(): string {
  const cols = columns();
  const header = `| guarantee | ${cols.map((c) => c.title).join(' | ')} |`;
  const rule = `| --- | ${cols.map(() => '---').join(' | ')} |`;
  const data = cols.map((c) => tierGuarantees(c.platform, c.tier, c.pidfd).guarantees);
  const lines = ROWS.map(([key, title]) => `| ${title} | ${data.map((g, i) => cell(g[key], cols[i]!.platform, key)).join(' | ')} |`);
  return [header, rule, ...lines].join('\n');
}
