/**
 * The Redis Cluster hash slot of a key (the Cluster specification's `HASH_SLOT`):
 * CRC16-XMODEM of the key, or of its hash tag — the text between the first `{` and the
 * first `}` after it, when not empty — modulo 16 384. The batched lease scripts group
 * keys by the primary serving their slot (coordination/redis-backend.ts), so this must
 * agree with the server: test/process/redis-cluster.test.ts compares it with `CLUSTER
 * KEYSLOT`, test/unit/redis-keys.test.ts with the specification's own example.
 */

export const HASH_SLOTS = 16_384;

/** CRC16 with polynomial 0x1021, initial value 0 (XMODEM), one table entry per byte value. */
const TABLE = (() => {
  const table = new Uint16Array(256);
  for (let byte = 0; byte < 256; byte++) {
    let crc = byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[byte] = crc;
  }
  return table;
})();

function crc16(bytes: Uint8Array, start: number, end: number): number {
  let crc = 0;
  for (let i = start; i < end; i++) crc = ((crc << 8) & 0xffff) ^ (TABLE[((crc >> 8) ^ (bytes[i] as number)) & 0xff] as number);
  return crc;
}

const OPEN = 0x7b; // '{'
const CLOSE = 0x7d; // '}'

/** The hash slot (0..16 383) of `key`, hashed as its UTF-8 bytes, as the server does. */
export function hashSlot(key: string): number {
  const bytes = Buffer.from(key, 'utf8');
  const open = bytes.indexOf(OPEN);
  if (open >= 0) {
    const close = bytes.indexOf(CLOSE, open + 1);
    if (close > open + 1) return crc16(bytes, open + 1, close) % HASH_SLOTS;
  }
  return crc16(bytes, 0, bytes.length) % HASH_SLOTS;
}

let tagsBySlot: string[] | undefined;

/**
 * A short hash tag for each slot (`{<tag>}` in a key puts it in that slot): the first
 * names `s<n>` that land on each slot, found once (about 150 000 CRCs, a few ms). Lets a key
 * be placed on the primary serving a given slot (the store marker of each primary).
 */
export function tagOfSlot(slot: number): string {
  if (!tagsBySlot) {
    const tags: string[] = new Array(HASH_SLOTS);
    let found = 0;
    for (let n = 0; found < HASH_SLOTS; n++) {
      const tag = `s${n}`;
      const at = hashSlot(tag);
      if (tags[at] === undefined) {
        tags[at] = tag;
        found += 1;
      }
    }
    tagsBySlot = tags;
  }
  return tagsBySlot[slot] as string;
}
