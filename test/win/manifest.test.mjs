// cordon-anchor.exe carries an application manifest
// (native/win/cordon-anchor.manifest, linked in by scripts/build-win-mingw.sh):
// longPathAware, so that where Windows allows long paths (LongPathsEnabled,
// Windows 10 1607+) the anchor's own file calls (the command's working
// directory, its lookup) take paths past MAX_PATH; asInvoker. Wine does not
// apply MAX_PATH as Windows does, so the effect is not observable here: what
// is tested is the manifest the loader reads (RT_MANIFEST 1), read out of the
// package's anchor and the release build by manifest.exe (fixtures/manifest.cc).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { execFileSync } from 'node:child_process';
import { anchorExe, existsSync, join, nativeFixture, pkgDir, underWine } from './helpers.mjs';

const { exe: manifestExe, skip: noManifestExe } = nativeFixture('manifest');

// Only the mingw-w64 build links it (scripts/build-win-mingw.sh: .ci/windows.sh
// and the prebuilds that ship); binding.gyp and CMakeLists.txt (MSVC builds
// from source, the GitHub windows job) do not yet.
const notMingw = !underWine && 'only the mingw-w64 build (the shipped prebuilds, .ci/windows.sh) links the manifest yet; this anchor is an MSVC build';

// proves nothing of the contract: the anchor's manifest
test("cordon-anchor.exe's manifest says longPathAware and asInvoker (the package's anchor and the release build)", { skip: noManifestExe || notMingw }, () => {
  const release = join(pkgDir, 'test-bin', 'cordon-anchor-release.exe');
  const exes = [anchorExe, ...(existsSync(release) ? [release] : [])];
  for (const exe of exes) {
    const text = execFileSync(manifestExe, [exe], { encoding: 'utf8', timeout: 30000, windowsHide: true });
    assert.match(text, /<longPathAware[^>]*>\s*true\s*<\/longPathAware>/, `${exe}: longPathAware true`);
    assert.match(text, /<requestedExecutionLevel level="asInvoker"/, `${exe}: asInvoker`);
  }
});
