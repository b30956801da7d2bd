// The Windows command lookup (lib/resolve.ts), run on any platform with the
// file checks replaced: which PATHEXT extensions are tried (only those
// CreateProcessW runs), and App Execution Aliases (reparse points stat()
// cannot open) found through lstat(). The lookup against real files runs in
// test/win (cmd.test.mjs, security.test.mjs).
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { commandLookupFailed } from '../lib/errors.js';
import { checkWindowsFile, resolveWindows, windowsExtensions, type WindowsFileOps } from '../lib/resolve.js';

const WINDOWS_DEFAULT_PATHEXT = '.COM;.EXE;.BAT;.CMD;.VBS;.VBE;.JS;.JSE;.WSF;.WSH;.MSC;.PY;.PYW';

/** resolveWindows over a set of files that exist (by exact path). */
function lookup(command: string, env: NodeJS.ProcessEnv, files: string[]): string {
  const have = new Set(files);
  return resolveWindows(command, 'C:\\work', env, (code, path) => commandLookupFailed(code, command, path), (p) => (have.has(p) ? 'ok' : 'ENOENT'));
}

describe('Windows lookup: PATHEXT extensions', () => {
  // proves nothing of the contract: the Windows command lookup, pure
  it("only .COM, .EXE, .BAT and .CMD are tried, in PATHEXT's order", () => {
    expect(windowsExtensions(WINDOWS_DEFAULT_PATHEXT)).toEqual(['.com', '.exe', '.bat', '.cmd']);
    expect(windowsExtensions('.PY;.CMD;.exe;.EXE')).toEqual(['.cmd', '.exe']);
  });

  // proves nothing of the contract: the Windows command lookup, pure
  it('a PATHEXT naming none of them (or none at all) gives .COM;.EXE;.BAT;.CMD', () => {
    expect(windowsExtensions('.PY;.PS1')).toEqual(['.com', '.exe', '.bat', '.cmd']);
    expect(windowsExtensions(undefined)).toEqual(['.com', '.exe', '.bat', '.cmd']);
    expect(windowsExtensions('')).toEqual(['.com', '.exe', '.bat', '.cmd']);
  });

  // proves nothing of the contract: the Windows command lookup, pure
  it('a foo.py earlier in PATH does not shadow foo.exe, whatever PATHEXT says', () => {
    const env = { PATH: 'C:\\first;C:\\second', PATHEXT: '.PY;.JS;' + WINDOWS_DEFAULT_PATHEXT };
    expect(lookup('foo', env, ['C:\\first\\foo.py', 'C:\\first\\foo.js', 'C:\\second\\foo.exe'])).toBe('C:\\second\\foo.exe');
    // Named with its extension, a script is still found as given (CreateProcessW then refuses it).
    expect(lookup('foo.py', env, ['C:\\first\\foo.py', 'C:\\second\\foo.exe'])).toBe('C:\\first\\foo.py');
  });

  // proves nothing of the contract: the Windows command lookup, pure
  it('a name found only with an extension CreateProcessW cannot run is not found (ENOENT)', () => {
    const env = { PATH: 'C:\\first', PATHEXT: '.PY;.EXE' };
    expect(() => lookup('foo', env, ['C:\\first\\foo.py'])).toThrow(expect.objectContaining({ code: 'ENOENT' }));
  });
});

describe('Windows lookup: App Execution Aliases', () => {
  const errno = (code: string) => Object.assign(new Error(code), { code });
  /** stat() as Node gives it on an alias (`statError`), lstat() a link or a file. */
  const alias = (statError: string, l: 'link' | 'file' | 'missing'): WindowsFileOps => ({
    statSync: () => {
      throw errno(statError);
    },
    lstatSync: () => {
      if (l === 'missing') throw errno('ENOENT');
      return { isFile: () => l === 'file', isSymbolicLink: () => l === 'link' };
    },
  });

  // proves nothing of the contract: the Windows command lookup, pure
  it('an alias stat() cannot open (EACCES, EPERM, UNKNOWN) but lstat() reads is found', () => {
    expect(checkWindowsFile('C:\\Users\\u\\AppData\\Local\\Microsoft\\WindowsApps\\winget.exe', alias('EACCES', 'link'))).toBe('ok');
    expect(checkWindowsFile('x', alias('UNKNOWN', 'link'))).toBe('ok');
    expect(checkWindowsFile('x', alias('EPERM', 'file'))).toBe('ok');
  });

  // proves nothing of the contract: the Windows command lookup, pure
  it('a dangling link (stat() ENOENT) and a name lstat() cannot read either are not found', () => {
    expect(checkWindowsFile('x', alias('ENOENT', 'link'))).toBe('ENOENT');
    expect(checkWindowsFile('x', alias('EACCES', 'missing'))).toBe('ENOENT');
  });

  // proves nothing of the contract: the Windows command lookup, pure
  it('through PATH: `winget` resolves to the alias in WindowsApps', () => {
    const apps = 'C:\\Users\\u\\AppData\\Local\\Microsoft\\WindowsApps';
    const target = `${apps}\\winget.exe`;
    const fs: WindowsFileOps = {
      statSync: (p) => {
        throw errno(p === target ? 'EACCES' : 'ENOENT');
      },
      lstatSync: (p) => {
        if (p !== target) throw errno('ENOENT');
        return { isFile: () => false, isSymbolicLink: () => true };
      },
    };
    const env = { PATH: `C:\\Windows\\System32;${apps}`, PATHEXT: WINDOWS_DEFAULT_PATHEXT };
    const found = resolveWindows('winget', 'C:\\work', env, (code, path) => commandLookupFailed(code, 'winget', path), (p) => checkWindowsFile(p, fs));
    expect(found).toBe(target);
  });

  // proves nothing of the contract: the Windows command lookup, pure
  it('with the real node:fs: a file is found, a directory is EACCES, a dangling link is ENOENT', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cordon-resolve-'));
    try {
      writeFileSync(join(dir, 'tool.exe'), '');
      symlinkSync(join(dir, 'gone.exe'), join(dir, 'dangling.exe'));
      expect(checkWindowsFile(join(dir, 'tool.exe'))).toBe('ok');
      expect(checkWindowsFile(dir)).toBe('EACCES');
      expect(checkWindowsFile(join(dir, 'dangling.exe'))).toBe('ENOENT');
      expect(checkWindowsFile(join(dir, 'nothing.exe'))).toBe('ENOENT');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
