import { test } from 'node:test';
import assert from 'node:assert/strict';
import { clampRlimits, ownHardLimits, parseProcLimits } from './rlimits.js';

const SAMPLE = `Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max file size             unlimited            unlimited            bytes     
Max processes             96365                96365                processes 
Max open files            1024                 20000                files     
Max locked memory         8388608              8388608              bytes     
Max realtime timeout      unlimited            unlimited            us        
`;

test('parses /proc/<pid>/limits hard limits', () => {
  const l = parseProcLimits(SAMPLE);
  assert.equal(l.get('RLIMIT_NOFILE'), 20000);
  assert.equal(l.get('RLIMIT_NPROC'), 96365);
  assert.equal(l.get('RLIMIT_CPU'), Infinity);
  assert.equal(l.get('RLIMIT_MEMLOCK'), 8388608);
  assert.equal(l.get('RLIMIT_RTTIME'), Infinity);
});

test('clamps hard and soft to our hard limits; -1 means unlimited', () => {
  const l = parseProcLimits(SAMPLE);
  assert.deepEqual(
    clampRlimits(
      [
        { type: 'RLIMIT_NOFILE', hard: 1048576, soft: 1048576 },
        { type: 'RLIMIT_NOFILE', hard: 4096, soft: 1024 },
        { type: 'RLIMIT_NPROC', hard: -1, soft: -1 },
        { type: 'RLIMIT_CORE', hard: -1, soft: 0 },
        { type: 'RLIMIT_CPU', hard: 10, soft: 20 },
      ],
      l,
    ),
    [
      { type: 'RLIMIT_NOFILE', hard: 20000, soft: 20000 },
      { type: 'RLIMIT_NOFILE', hard: 4096, soft: 1024 },
      { type: 'RLIMIT_NPROC', hard: 96365, soft: 96365 },
      { type: 'RLIMIT_CORE', hard: Infinity, soft: 0 },
      { type: 'RLIMIT_CPU', hard: 10, soft: 10 },
    ],
  );
});

test('reads our own limits', () => {
  const l = ownHardLimits();
  assert.ok(l.has('RLIMIT_NOFILE'));
  assert.ok((l.get('RLIMIT_NOFILE') ?? 0) > 0);
});
