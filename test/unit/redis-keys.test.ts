/**
 * Every Redis key and channel name longrun uses, pinned byte for byte: a fleet mixing
 * Workhorse and longrun shares the lock, stop and run keys, and replicas of different
 * builds share the rest during a rolling deploy, so a name may never change by accident.
 * Also: the key names a renewal script builds from a workflow id (renew-leases-1.lua, from
 * `parts`) are the names every other command uses, in both key schemes.
 */
import { describe, expect, it } from 'vitest';
import { hashSlot, tagOfSlot } from '../../src/redis/hash-slot';
import {
  FOLLOW_INTEREST_CHANNEL,
  STOP_CHANNEL,
  clusterKeys,
  followKeys,
  inboxKey,
  keyOfKeyspaceChannel,
  keyspacePattern,
  lockKey,
  lockKeyPatterns,
  redisKeys,
  workflowOfFollowChannel,
  workhorseKeys,
} from '../../src/redis/keys';

describe('key parts', () => {
  for (const keys of [workhorseKeys, clusterKeys]) {
    it(`${keys.scheme}: prefix + id + suffix is the key`, () => {
      for (const id of ['1', '4242', 'a-b_c', 'has}brace', '{tag}', '']) {
        for (const kind of ['lock', 'stop', 'run'] as const) {
          const [prefix, suffix] = keys.parts[kind];
          expect(prefix + id + suffix, `${kind} of ${JSON.stringify(id)}`).toBe(keys[kind](id));
        }
      }
    });
  }
});

describe('the names, byte for byte', () => {
  it('workhorse scheme (the default): Workhorse’s own lock, stop and run keys', () => {
    expect(redisKeys('workhorse')).toBe(workhorseKeys);
    expect(workhorseKeys.lock('42')).toBe('workhorse:duoworkflow:lock:42');
    expect(workhorseKeys.stop('42')).toBe('workhorse:duoworkflow:stop:42');
    expect(workhorseKeys.run('42')).toBe('workhorse:duoworkflow:run:42');
    expect(lockKey('42')).toBe('workhorse:duoworkflow:lock:42');
    expect(workhorseKeys.actor('a1')).toBe('longrun:actor:a1');
    for (const slot of [0, 5_000, 16_383]) expect(workhorseKeys.storeMarker(slot)).toBe('longrun:store');
    expect(workhorseKeys.stopKeyPattern).toBe('workhorse:duoworkflow:stop:*');
    expect(workhorseKeys.workflowOfStopKey('workhorse:duoworkflow:stop:42')).toBe('42');
    expect(workhorseKeys.workflowOfStopKey('workhorse:duoworkflow:lock:42')).toBeUndefined();
  });

  it('cluster scheme: one hash tag per workflow, per actor, per primary’s marker', () => {
    expect(redisKeys('cluster')).toBe(clusterKeys);
    expect(clusterKeys.lock('42')).toBe('longrun:{wf:42}:lock');
    expect(clusterKeys.stop('42')).toBe('longrun:{wf:42}:stop');
    expect(clusterKeys.run('42')).toBe('longrun:{wf:42}:run');
    expect(clusterKeys.actor('a1')).toBe('longrun:{actor:a1}:runs');
    expect(clusterKeys.storeMarker(0)).toBe('longrun:{s7920}:store');
    expect(clusterKeys.storeMarker(5_000)).toBe('longrun:{s12080}:store');
    expect(clusterKeys.storeMarker(16_383)).toBe('longrun:{s9706}:store');
    expect(clusterKeys.stopKeyPattern).toBe('longrun:{wf:*}:stop');
    expect(clusterKeys.workflowOfStopKey('longrun:{wf:42}:stop')).toBe('42');
    expect(clusterKeys.workflowOfStopKey('longrun:{wf:}:stop')).toBeUndefined();
    expect(clusterKeys.workflowOfStopKey('longrun:{wf:42}:lock')).toBeUndefined();
  });

  it('the stop channel, the keyspace notices of stop keys, and the lock keys `longrun store mark` looks for', () => {
    expect(STOP_CHANNEL).toBe('longrun:stop');
    expect(keyspacePattern(3, workhorseKeys.stopKeyPattern)).toBe('__keyspace@3__:workhorse:duoworkflow:stop:*');
    expect(keyOfKeyspaceChannel('__keyspace@0__:workhorse:duoworkflow:stop:42')).toBe('workhorse:duoworkflow:stop:42');
    expect(lockKeyPatterns).toEqual(['workhorse:duoworkflow:lock:*', 'longrun:{wf:*}:lock']);
  });

  it('the follow log: its backlog (also the channel of its appends), its state, the interest channel', () => {
    expect(followKeys('42')).toEqual({ events: 'longrun:{wf:42}:follow:events', state: 'longrun:{wf:42}:follow' });
    expect(workflowOfFollowChannel('longrun:{wf:42}:follow:events')).toBe('42');
    expect(workflowOfFollowChannel('longrun:{wf:42}:follow')).toBeUndefined();
    expect(workflowOfFollowChannel('longrun:follow:interest')).toBeUndefined();
    expect(FOLLOW_INTEREST_CHANNEL).toBe('longrun:follow:interest');
  });

  it('the bridge inbox of a replica', () => {
    expect(inboxKey('r1')).toBe('longrun:{bridge:r1}:inbox');
  });
});

describe('hash slots', () => {
  it('agree with the Cluster specification (CRC16-XMODEM mod 16 384, hash tags)', () => {
    // 12739 is the specification's own example (CRC16 of "123456789" is 0x31C3).
    expect(hashSlot('123456789')).toBe(12_739);
    expect(hashSlot('foo')).toBe(12_182);
    expect(hashSlot('{user1000}.following')).toBe(hashSlot('user1000'));
    // An empty tag is no tag: the whole key is hashed.
    expect(hashSlot('{}x')).toBe(10_595);
    expect(hashSlot('a{}b{c}')).toBe(7_353);
    expect(hashSlot('longrun:{wf:42}:lock')).toBe(hashSlot('wf:42'));
  });

  it('tagOfSlot names a tag hashing to each slot', () => {
    for (const slot of [0, 1, 5_000, 16_383]) expect(hashSlot(`{${tagOfSlot(slot)}}`)).toBe(slot);
    expect([0, 1, 5_000, 16_383].map(tagOfSlot)).toEqual(['s7920', 's28218', 's12080', 's9706']);
  });
});
