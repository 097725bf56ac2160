/* CRC-64/XZ of byte strings (core/io/crc64.c), for checkpoint pieces. Private to the project
 * (dist/ has core/ on its private include path). Not Collective. */
#ifndef LINATTN_LA_CRC64_H
#define LINATTN_LA_CRC64_H
#include <stddef.h>
#include <stdint.h>

uint64_t la_crc64(const void *data, size_t len);
/* Continue a CRC: la_crc64_update(la_crc64(a, na), b, nb) == la_crc64(a ‖ b). */
uint64_t la_crc64_update(uint64_t crc, const void *data, size_t len);

#endif
