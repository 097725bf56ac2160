/* CRC-64/XZ (ECMA-182 polynomial, reflected, init and xorout all ones): the checksum of every
 * piece of a checkpoint (docs/design.md §6 "Checkpoints"). Check value of "123456789":
 * 0x995dc9bbdf1939fa (tested in test_core). Byte-at-a-time with one 256-entry table built on
 * first use; a checkpoint is a few MiB, so speed is not the point. Not Collective;
 * thread-safe once the table exists (la_crc64 builds it on the first call of the process). */
#include "la_crc64.h"

static uint64_t table[256];
static int ready;

static void build(void) {
  for (int i = 0; i < 256; i++) {
    uint64_t c = (uint64_t)i;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0xc96c5795d7870f42ULL : c >> 1;
    table[i] = c;
  }
  ready = 1;
}

uint64_t la_crc64_update(uint64_t crc, const void *data, size_t len) {
  if (!ready) build();
  const unsigned char *p = data;
  crc = ~crc;
  for (size_t i = 0; i < len; i++) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint64_t la_crc64(const void *data, size_t len) { return la_crc64_update(0, data, len); }
