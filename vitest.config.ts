import { defineConfig } from 'vitest/config';
import { selectableTiers, type Tier } from './lib/tiers.js';
import { cgroupWritable } from './test/helpers/cgroup.js';
import { watchdog } from './test/helpers/time.js';
import { setsidShimDir, wantSetsidShim } from './test/helpers/setsid-shim.js';

// One suite, every tier: each behavioural test file runs once per containment
// tier this machine has (on Linux the cgroup tier where a cgroup v2 directory
// is writable, the subreaper tier and the process-group tier, which is the
// macOS strategy). Tier-independent files run once.
const tierIndependent = ['test/build-backends.test.ts', 'test/resolve-windows.test.ts', 'test/capabilities.test.ts', 'test/observer.test.ts', 'test/leak-check.test.ts', 'test/process-group.test.ts', 'test/broken-install.test.ts', 'test/protocol.test.ts', 'test/tier-availability.test.ts', 'test/run-types.test.ts', 'test/cgroup-v2-leaf.test.ts', 'test/errors.test.ts', 'test/contract-map.test.ts', 'test/doc-examples.test.ts', 'test/thread-ids.test.ts', 'test/procargs.test.ts', 'test/package.test.ts', 'test/windows-lease-job.test.ts', 'test/types.test.ts', 'test/portable-tests.test.ts', 'test/child-process-types.test.ts', 'test/mutants-list.test.ts'];
// util-linux's setsid where the platform has none (macOS; on Linux when
// CORDON_TEST_SETSID_SHIM=1), and a sleep whose environment ps can read (not
// Apple's): the compiled fixture under those names, first on
// the PATH every worker and every tree inherits (test/helpers/setsid-shim.ts).
if (wantSetsidShim()) {
  let dir: string;
  try {
    dir = setsidShimDir();
  } catch (e) {
    throw new Error(`vitest: the suite's setsid (off Linux, util-linux's is missing) is built with cc, which failed: ${(e as Error).message} (macOS: xcode-select --install)`, { cause: e });
  }
  process.env.PATH = `${dir}:${process.env.PATH ?? '/usr/bin:/bin'}`;
  console.warn(`vitest: setsid and sleep are the suite's own (${dir}/setsid, ${dir}/sleep -> test/fixtures/cordon-fixture.c)`);
}
// The tiers come from cordon's tier table (lib/tiers.ts); whether this machine
// has one is the tests' own check, never cordon's probe (a tier that needs
// more than its platform is listed here).
const machineHas: Partial<Record<Tier, () => boolean>> = { cgroup: cgroupWritable };
const tiers = selectableTiers(process.platform).filter((tier) => machineHas[tier]?.() ?? true);
// A project that cannot run here says so in the run's output, never silently.
for (const tier of selectableTiers(process.platform).filter((t) => !tiers.includes(t))) {
  console.warn(`vitest: the ${tier} project is not run: this machine cannot give it (${tier === 'cgroup' ? 'needs Linux 5.14+ with this host\'s cgroup v2 directory writable: run as root, or in a delegated cgroup (systemd-run --user --scope -p Delegate=yes)' : 'not available here'})`);
}

export default defineConfig({
  test: {
    pool: 'forks',
    // Timing assertions (grace windows, wait delays) need the CPU: two
    // workers on a two-core machine.
    maxWorkers: 2,
    // (Scaled by CORDON_TEST_TIME_SCALE under emulation: test/helpers/time.ts.)
    testTimeout: watchdog(60_000),
    hookTimeout: watchdog(60_000),
    globalSetup: ['test/helpers/global-setup.ts'],
    // Each test's start and end, so a leak found at the end names its tests.
    setupFiles: ['test/helpers/test-log-setup.ts'],
    projects: [
      { extends: true, test: { name: 'tier-independent', include: tierIndependent } },
      // The model of XNU's process table's own tests: only where the model
      // runs (.ci/darwin-model.sh sets CORDON_XNU_MODEL), beside the
      // process-group project on the darwin build.
      ...(process.env.CORDON_XNU_MODEL ? [{ extends: true, test: { name: 'darwin-model', include: ['test/xnu-model/**/*.test.ts'], env: { CORDON_TIER: 'process-group' } } }] : []),
      // Node's own child_process tests against cordon/child_process: only
      // where asked (CORDON_NODE_TESTS=1: .ci/node-tests.sh, a lane of .ci/run),
      // since the first run downloads Node's source (scripts/node-tests/source.mjs).
      ...(process.env.CORDON_NODE_TESTS === '1' ? [{ extends: true, test: { name: 'node-tests', include: ['test/node-tests/**/*.test.ts'] } }] : []),
      ...tiers.map((tier) => ({
        extends: true,
        test: {
          name: tier,
          include: ['test/**/*.test.ts'],
          exclude: [...tierIndependent, 'test/win/**', 'test/xnu-model/**', 'test/node-tests/**'],
          env: { CORDON_TIER: tier },
        },
      })),
    ],
  },
});
