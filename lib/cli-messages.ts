// The library's errors in the CLI's words. A CordonError's message speaks to
// a program calling spawn() (`The option "tier"`, `a PATH in env`,
// `registry.adoptable()`); a CLI user has flags, the environment and other
// cordon commands instead. The CLI prints every error through cliMessage(),
// which rewrites the parts that name the API, keyed on the error's code and
// the option it names; the code itself (printed as [CODE]) never changes,
// and a message no rule knows is printed as the library wrote it.

/** spawn()'s option names as the CLI spells them (the flag that sets each, or where it comes from). */
const FLAGS: Readonly<Record<string, string>> = {
  tier: '--tier',
  leftovers: '--leftovers',
  timeout: '--timeout',
  grace: '--grace',
  interruptGrace: '--interrupt-grace',
  waitDelay: '--wait-delay',
  lease: '--lease',
  log: '--log',
  pty: '--pty',
  containment: '--best-effort',
  CORDON_TIER: 'CORDON_TIER (in the environment)',
};

/** The CLI's name for an option the library names, or undefined when the CLI has no such option. */
function flagOf(name: string): string | undefined {
  return name.startsWith('--') ? name : Object.hasOwn(FLAGS, name) ? FLAGS[name] : undefined;
}

interface Rule {
  /** The codes the rule applies to. */
  codes: readonly string[];
  /** What it rewrites (the replacement may use $1…). */
  from: RegExp;
  to: string | ((...groups: string[]) => string);
}

/** `'a', 'b', 'c'` (the library quotes the values an option takes) as a CLI user types them: `a, b, c`. */
const unquote = (list: string) => list.replace(/'([^']*)'/g, '$1');

const RULES: readonly Rule[] = [
  // invalidArg(): `The option "tier" must be one of 'cgroup', …. Received "bogus".`
  {
    codes: ['ERR_INVALID_ARG_VALUE', 'ERR_INVALID_ARG_TYPE'],
    from: /^The option "([^"]+)" must be (.*)\. Received (.*)\.$/s,
    to: (whole, name, expected, got) => {
      const flag = flagOf(name!);
      return flag === undefined ? whole! : `${flag} must be ${unquote(expected!)}; got ${got}.`;
    },
  },
  // Command lookup (ENOENT): the CLI has no env option.
  { codes: ['ENOENT'], from: /, or pass an absolute path or a PATH in env\.$/, to: ', or give its absolute path, or set PATH in the environment to include its directory.' },
  // adopt(): an unknown tree, a refusal, a malformed token.
  { codes: ['ERR_CORDON_UNKNOWN_TREE'], from: /list them with registry\.adoptable\(\)\.$/, to: 'list them with cordon ps.' },
  {
    codes: ['ERR_CORDON_ADOPT_DENIED'],
    from: /Adopt with the token the creating host had \(proc\.adoptionToken\), or the owner's id and the registry's secret\.$/,
    to: 'Adopt it with the --token that cordon run --lease printed when it started the tree.',
  },
  {
    codes: ['ERR_INVALID_ARG_VALUE'],
    from: /^adopt\(id, \{ token \}\) takes the tree's adoption token \(32 hex characters\), or a Registry with a `secret`\.$/,
    to: "--token takes the tree's adoption token (32 hex characters), as cordon run --lease printed it.",
  },
  // Containment and limits refused: the CLI's --best-effort, --tier and cordon capabilities.
  { codes: ['ERR_CORDON_CONTAINMENT'], from: /^The tier '([^']*)' is not available/, to: '--tier $1 is not available' },
  { codes: ['ERR_CORDON_CONTAINMENT'], from: /\(capabilities\(\)\.guarantees\.limits and its notes say where it can\)/, to: '(cordon capabilities: guarantees.limits and its notes say where it can)' },
  { codes: ['ERR_CORDON_CONTAINMENT'], from: /Use the cgroup tier where/, to: 'Use --tier cgroup where' },
  { codes: ['ERR_CORDON_CONTAINMENT'], from: /containment: 'best-effort' to run without the limits \(the result says limits\.applied false\)\./, to: '--best-effort to run without the limits (--report says they were not applied).' },
  {
    codes: ['ERR_CORDON_CONTAINMENT'],
    from: /containment: 'best-effort' to run with them set where the OS takes them \(the result says which in limits\.accepted, and limits\.applied false\)\./,
    to: '--best-effort to run with them set where the OS takes them (--json says which in limits.accepted).',
  },
  { codes: ['ERR_CORDON_CONTAINMENT'], from: /Use containment: 'best-effort' to run with the strongest tier available, or see capabilities\(\)\.$/, to: 'Use --best-effort to run with the strongest tier available, or see cordon capabilities.' },
  // --pty where cordon has no terminal (a Windows without ConPTY, Wine).
  {
    codes: ['ERR_CORDON_UNSUPPORTED'],
    from: /^The option "pty" is not supported here: (.*)capabilities\(\)\.terminal is false(.*)Run the command with pipes \(the default stdio\) instead\.$/s,
    to: '--pty is not supported here: $1cordon capabilities says guarantees.terminal false$2Run the command without --pty.',
  },
  // --lease where this process's Job Object would end the leased tree (Windows).
  { codes: ['ERR_CORDON_LEASE_JOB'], from: /or spawn without `lease`\./, to: 'or run without --lease.' },
  // The CLI's own working directory is gone: it has no cwd option.
  { codes: ['ENOENT', 'EACCES', 'ENOTDIR', 'ESTALE', 'EIO'], from: /^The host's own working directory/, to: 'The current directory' },
  { codes: ['ENOENT', 'EACCES', 'ENOTDIR', 'ESTALE', 'EIO'], from: /Pass an existing directory as cwd, or process\.chdir\(\) the host to one\.$/, to: 'cd to an existing directory and run cordon again.' },
];

/** `err`'s message as a CLI user should read it (rules above; unchanged where none applies). */
export function cliMessage(err: unknown): string {
  const e = err as { message?: unknown; code?: unknown };
  let message = typeof e?.message === 'string' ? e.message : String(err);
  const code = typeof e?.code === 'string' ? e.code : '';
  for (const rule of RULES) {
    if (!rule.codes.includes(code)) continue;
    message = typeof rule.to === 'string' ? message.replace(rule.from, rule.to) : message.replace(rule.from, rule.to as (...groups: string[]) => string);
  }
  return message;
}
