// Writes test-log.ts's log: the tree cgroups present at each test's start and end.
import { appendFileSync } from 'node:fs';
import { afterEach, beforeEach, expect } from 'vitest';
import { testLogPath, treeCgroupDir, treeCgroupNames } from './test-log.js';

const dir = treeCgroupDir();

function note(what: 'start' | 'end'): void {
  const { currentTestName, testPath } = expect.getState();
  const test = `${(testPath ?? '').replace(/^.*\/test\//, 'test/')} > ${currentTestName ?? ''} [${process.env.CORDON_TIER ?? 'tier-independent'}]`;
  appendFileSync(testLogPath(), `${what}\t${test}\t${treeCgroupNames(dir).join(' ')}\n`);
}

// Registered before any test file's own hooks: 'start' comes first, 'end' last.
beforeEach(() => note('start'));
afterEach(() => note('end'));
