#pragma once
// What a device can hold, for the plans that cap it (Note [device cap] in apps).
#include <cstddef>

#include "zt/core/device.h"

namespace zt {

// Bytes `d` can hold at most: a GPU's memory, sim:0's address space (ZT_SIM_MEMORY_MB); 0 for cpu.
size_t device_capacity(Device d);

}  // namespace zt
