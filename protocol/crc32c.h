/* CRC-32C (Castagnoli), the checksum OP_MSG carries when flag bit 0 is set.
 *
 * opmsg_crc32c() picks the fastest path at run time. Both paths are public
 * so tests can check they agree; crc32c_hw() must only be called when
 * crc32c_hw_available() says so. */
#ifndef MG_PROTOCOL_CRC32C_H
#define MG_PROTOCOL_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Byte-at-a-time table implementation; runs anywhere. */
uint32_t crc32c_sw(const uint8_t *p, size_t n);

/* True when this CPU has the SSE4.2 crc32 instruction. */
bool crc32c_hw_available(void);

/* SSE4.2 implementation; falls back to crc32c_sw() on other architectures. */
uint32_t crc32c_hw(const uint8_t *p, size_t n);

#endif
