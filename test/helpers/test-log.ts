// Which tests saw which cgroups: at every test's start and end each worker
// appends the tree cgroups then present below its cgroup to one file per run
// (CORDON_TEST_RUN), so the global teardown can name the tests during which a
// leaked cgroup appeared. (A cgroup directory's ctime cannot tell: kernfs
// stamps an inode when it is looked up, not when the directory is made.) The
// hooks that write it are test-log-setup.ts, a setup file of every project.
import { readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { cgroupMount, cgroupOf } from './cgroup.js';
import { RUN_VAR } from './procs.js';

export function testLogPath(): string {
  return `${tmpdir()}/cordon-test-log-${process.env[RUN_VAR] ?? 'run'}`;
}

const TREE_CGROUP = /^cordon-\d+(-[0-9a-f]+)?$/;

/** The directory that holds this process's trees' cgroups, if cgroup v2 is mounted. */
export function treeCgroupDir(): string | undefined {
  if (process.platform !== 'linux') return undefined;
  const mount = cgroupMount();
  const own = mount && cgroupOf('self');
  return own ? (own === '/' ? mount : mount + own) : undefined;
}

/** The tree cgroups (cordon-<anchor pid>-…) now in `dir`. */
export function treeCgroupNames(dir: string | undefined): string[] {
  try {
    return dir ? readdirSync(dir).filter((n) => TREE_CGROUP.test(n)) : [];
  } catch {
    return [];
  }
}

/**
 * The tests during which the cgroup `name` appeared: those whose end saw it
 * and whose start did not (a worker's test and whatever ran beside it on the
 * other worker), else the first test that saw it.
 */
export function testsThatSaw(name: string): string[] {
  let text: string;
  try {
    text = readFileSync(testLogPath(), 'utf8');
  } catch {
    return [];
  }
  const started = new Map<string, boolean>();
  const appeared: string[] = [];
  let first: string | undefined;
  for (const line of text.split('\n')) {
    const [what, test, names = ''] = line.split('\t');
    if (!test) continue;
    const saw = names.split(' ').includes(name);
    if (saw) first ??= test;
    if (what === 'start') started.set(test, saw);
    else if (saw && started.get(test) === false) appeared.push(test);
  }
  return appeared.length ? appeared : first ? [first] : [];
}
