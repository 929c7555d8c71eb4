// CRC-32C (Castagnoli), the checksum checkpoint manifests carry for each file.
#ifndef R2SP_COMMON_CRC32C_H_
#define R2SP_COMMON_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace r2sp {

// The CRC-32C of [data, data + n), continuing from `crc` (0 to start).
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

}  // namespace r2sp

#endif  // R2SP_COMMON_CRC32C_H_
