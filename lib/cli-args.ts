// The CLI's arguments, read with node:util's parseArgs: what each subcommand
// takes, and a usage error (one line, exit 2) for anything else.
import { resolve as resolvePath } from 'node:path';
import { parseArgs } from 'node:util';
import { parseDuration } from './duration.js';
import { cliLimit } from './limits.js';
import { cliMessage } from './cli-messages.js';
import type { LeftoversPolicy, Tier } from './options.js';
import type { SpawnOptions } from './process.js';

/** A usage error: what is wrong, as one line; the CLI prints it with a pointer to --help and exits 2. */
export class UsageError extends Error {}

/** `cordon run` / `cordon leaks`: what comes before the command. */
const RUN_FLAGS = {
  timeout: { type: 'string' },
  grace: { type: 'string' },
  'interrupt-grace': { type: 'string' },
  'wait-delay': { type: 'string' },
  leftovers: { type: 'string' },
  tier: { type: 'string' },
  log: { type: 'string' },
  lease: { type: 'string' },
  pty: { type: 'boolean' },
  'confine-write': { type: 'string', multiple: true },
  'deny-read': { type: 'string', multiple: true },
  network: { type: 'string' },
  'best-effort': { type: 'boolean' },
  memory: { type: 'string' },
  'max-processes': { type: 'string' },
  cpu: { type: 'string' },
  report: { type: 'boolean' },
  json: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

export interface RunArgs {
  options: SpawnOptions;
  report: boolean;
  /** --pty (run only): the command on a terminal of its own, the user's attached to it. */
  pty: boolean;
  /** --json <file>: the report as JSON there ('-': one line on stderr). */
  json: string | undefined;
  /** --help was given: print the usage, run nothing. */
  help: boolean;
  command: string;
  args: string[];
}

/** parseArgs' own refusals, as one short line each. */
function usage(err: unknown): never {
  const e = err as NodeJS.ErrnoException;
  const option = /'(-[^' ]+)/.exec(e.message)?.[1];
  if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') throw new UsageError(`unknown option ${option ?? ''}`.trim());
  if (e.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    if (/argument missing/.test(e.message)) throw new UsageError(`${option} needs a value`);
    if (/ambiguous/.test(e.message)) throw new UsageError(`${option} needs a value (a value that starts with a dash is written ${option}=-…)`);
    throw new UsageError(e.message.split('\n')[0]!);
  }
  if (e.code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') throw new UsageError(`unexpected argument ${/'([^']*)'/.exec(e.message)?.[1] ?? ''}`.trim());
  throw err;
}

/**
 * `[options] [--] <command> [args...]`: the options end at `--` or at the
 * first argument that is not one (the command's own flags are its own).
 */
export function parseRunArgs(argv: string[], what: 'run' | 'leaks'): RunArgs {
  // Where the command starts, read the way parseArgs reads the options (a
  // string option takes the next argument as its value).
  const { tokens } = parseArgs({ args: argv, options: RUN_FLAGS, strict: false, allowPositionals: true, tokens: true });
  let head = argv.length;
  let commandAt = argv.length;
  for (const token of tokens) {
    if (token.kind === 'option-terminator') {
      head = token.index;
      commandAt = token.index + 1;
      break;
    }
    if (token.kind === 'positional') {
      head = commandAt = token.index;
      break;
    }
  }
  const strict = (args: string[]) => parseArgs({ args, options: RUN_FLAGS, strict: true, allowPositionals: false }).values;
  let values: ReturnType<typeof strict>;
  try {
    values = strict(argv.slice(0, head));
  } catch (err) {
    usage(err);
  }
  const options: SpawnOptions = { stdio: 'inherit' };
  // A duration that does not parse is a usage error (exit 2), like any other bad flag.
  const durationOf = (flag: string, text: string) => {
    try {
      return parseDuration(`--${flag}`, text);
    } catch (err) {
      throw new UsageError(cliMessage(err));
    }
  };
  if (values.timeout !== undefined) options.timeout = durationOf('timeout', values.timeout);
  if (values.grace !== undefined) options.grace = durationOf('grace', values.grace);
  if (values['interrupt-grace'] !== undefined) options.interruptGrace = durationOf('interrupt-grace', values['interrupt-grace']);
  if (values['wait-delay'] !== undefined) options.waitDelay = durationOf('wait-delay', values['wait-delay']);
  if (values.lease !== undefined) options.lease = durationOf('lease', values.lease);
  if (values.leftovers !== undefined) {
    if (what === 'leaks') throw new UsageError('leaks keeps the leftovers to report them: --leftovers does not apply');
    options.leftovers = values.leftovers as LeftoversPolicy;
  }
  if (values.tier !== undefined) options.tier = values.tier as Tier;
  if (values.log !== undefined) options.log = values.log;
  if (values['best-effort']) options.containment = 'best-effort';
  for (const flag of ['memory', 'max-processes', 'cpu'] as const) {
    const text = values[flag];
    if (text === undefined) continue;
    try {
      cliLimit(`--${flag}`, text, (options.limits ??= {}));
    } catch (err) {
      throw new UsageError(cliMessage(err));
    }
  }
  // Any confine flag confines the tree (the confine option): writes only below
  // --confine-write (none given: its own TMPDIR alone). Relative paths are the shell's: from here.
  if (values['confine-write'] !== undefined || values['deny-read'] !== undefined || values.network !== undefined) {
    const network = values.network;
    if (network !== undefined && network !== 'none' && network !== 'loopback' && network !== 'all') throw new UsageError('--network takes none, loopback or all');
    options.confine = {
      write: (values['confine-write'] ?? []).map((p) => resolvePath(p)),
      ...(values['deny-read'] ? { denyRead: values['deny-read'].map((p) => resolvePath(p)) } : {}),
      ...(network !== undefined ? { network } : {}),
    };
  }
  if (values.pty && what === 'leaks') throw new UsageError('leaks captures the output through pipes: --pty does not apply');
  const help = values.help === true;
  const command = argv[commandAt];
  if (command === undefined && !help) throw new UsageError(`${what} needs a command`);
  return { options, report: values.report === true, pty: values.pty === true, json: values.json, help, command: command ?? '', args: argv.slice(commandAt + 1) };
}

/** `cordon ps [--json]`. */
export function parsePsArgs(argv: string[]): { json: boolean } {
  try {
    const { values } = parseArgs({ args: argv, options: { json: { type: 'boolean' } }, strict: true, allowPositionals: false });
    return { json: values.json === true };
  } catch (err) {
    return usage(err);
  }
}

/** `cordon adopt <id> --token <token>`. */
export function parseAdoptArgs(argv: string[]): { id: string; token: string } {
  let parsed: { values: { token?: string }; positionals: string[] };
  try {
    parsed = parseArgs({ args: argv, options: { token: { type: 'string' } }, strict: true, allowPositionals: true });
  } catch (err) {
    return usage(err);
  }
  const [id, extra] = parsed.positionals;
  if (extra !== undefined) throw new UsageError(`unexpected argument ${extra}`);
  if (id === undefined || parsed.values.token === undefined) throw new UsageError('adopt needs a tree id (cordon ps) and --token');
  return { id, token: parsed.values.token };
}
