// The emulation's cudaMalloc: the memory of dpcore.emulated's ordinary arrays. Each allocation
// is a memfd that a peer maps whole, as CUDA IPC maps the whole allocation behind a pointer
// (cudaIpcGetMemHandle of its base): so comm.register can map a user's buffer into the peers
// without a GPU. And it fails what a GPU leaves undefined: an allocation freed while a live peer
// still maps it aborts the process, saying so (CUDA: "undefined behavior"), and it becomes
// unreadable to its peers when freed or when its owner exits (they fault), as device memory
// does.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/device.h"

namespace dpcore::emulated {

// A fresh allocation of `bytes` (at least 1), holding garbage as cudaMalloc's does.
void* allocate(size_t bytes);
void release(void* p);  // aborts if a live peer still maps it

// The allocation that holds [p, p + bytes): its handle, and p's offset in it. Throws where no
// allocation of this process holds it all (memory from elsewhere cannot be shared).
IpcHandle exportMemory(const void* p, size_t bytes, uint64_t* offset);
bool isHandle(const IpcHandle& handle);  // one of exportMemory's (not a shared segment's name)
// Maps the allocation a peer exported, whole; this process then counts as mapping it until
// closeImport.
void* importMemory(const IpcHandle& handle);
void closeImport(void* base);

}  // namespace dpcore::emulated
