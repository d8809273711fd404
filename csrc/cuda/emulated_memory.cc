// The emulation's cudaMalloc (emulated_memory.h). An allocation's memfd holds the user's bytes,
// then a tail of its own: the serial its handle carries (so a handle outlived by its allocation
// is refused, not mapped to whatever took the descriptor's number) and the processes that map
// it, one slot each, which release() reads.
#include "cuda/emulated_memory.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include "cuda/emulated_stream.h"

namespace dpcore::emulated {
namespace {

constexpr int kGarbage = 0xA5;     // what fresh device memory holds, as in emulated_device.cc
constexpr int kImporters = 64;     // processes that may map one allocation at once
constexpr size_t kSerialAt = 56;   // where a handle keeps its serial (after the path)

struct Tail {
  uint64_t serial;
  int32_t importers[kImporters];  // pids; 0: a free slot
};

struct Allocation {
  int fd;
  size_t bytes;  // the user's, before the tail
  uint64_t serial;
};

struct Import {
  size_t mapped;  // the whole file
  int slot;
  int fd;  // kept, to see whether the owner truncated the file (freed it, or exited)
};

std::mutex mutex;
std::map<uintptr_t, Allocation> allocations;  // by base address
std::map<uintptr_t, Import> imports;          // by base address, as mapped here
uint64_t serials = 0;

size_t tailAt(size_t bytes) { return (bytes + 63) / 64 * 64; }
Tail* tailOf(void* base, size_t bytes) {  // an allocation's, of the user's bytes
  return reinterpret_cast<Tail*>(static_cast<char*>(base) + tailAt(bytes));
}
Tail* tailOfFile(void* base, size_t mapped) {  // an import's, mapped whole
  return reinterpret_cast<Tail*>(static_cast<char*>(base) + mapped - sizeof(Tail));
}

// The entry of `map` at address p, taken out of it under the lock (false: none there).
template <class Map>
bool take(Map& map, void* p, typename Map::mapped_type* entry) {
  std::lock_guard<std::mutex> lock(mutex);
  const auto it = map.find(reinterpret_cast<uintptr_t>(p));
  if (it == map.end()) return false;
  *entry = it->second;
  map.erase(it);
  return true;
}

std::string pathOf(const IpcHandle& h) { return std::string(h.bytes, strnlen(h.bytes, kSerialAt)); }

}  // namespace

void* allocate(size_t bytes) {
  if (bytes == 0) bytes = 1;
  const size_t total = tailAt(bytes) + sizeof(Tail);
  const int fd = memfd_create("dpcore-emulated-memory", MFD_CLOEXEC);
  if (fd < 0) throw std::runtime_error("dpcore emulation: memfd_create failed");
  void* p = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(total)) == 0) {
    p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (p == MAP_FAILED) {
    close(fd);
    throw std::bad_alloc();
  }
  std::memset(p, kGarbage, bytes);
  std::lock_guard<std::mutex> lock(mutex);
  const uint64_t serial = ++serials;
  tailOf(p, bytes)->serial = serial;
  allocations[reinterpret_cast<uintptr_t>(p)] = Allocation{fd, bytes, serial};
  unmapAtExit(fd);  // unreadable to the peers once this process is gone
  return p;
}

void release(void* p) {
  Allocation a;
  if (!take(allocations, p, &a)) return;
  const Tail* tail = tailOf(p, a.bytes);
  for (int k = 0; k < kImporters; ++k) {
    const int32_t pid = __atomic_load_n(&tail->importers[k], __ATOMIC_ACQUIRE);
    if (pid != 0 && (kill(pid, 0) == 0 || errno == EPERM)) {
      std::fprintf(stderr, "dpcore emulation: process %d freed device memory that process %d "
                   "still maps (CUDA leaves this undefined; deregister it everywhere first)\n",
                   static_cast<int>(getpid()), static_cast<int>(pid));
      std::abort();
    }
  }
  exitUnmap(a.fd);  // truncated: a peer that still reads it faults
  munmap(p, tailAt(a.bytes) + sizeof(Tail));
}

IpcHandle exportMemory(const void* p, size_t bytes, uint64_t* offset) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mutex);
  auto it = allocations.upper_bound(at);
  if (it == allocations.begin() || (--it, at + bytes > it->first + it->second.bytes)) {
    throw std::invalid_argument("dpcore: this memory is no allocation of the emulated device "
                                "(make it with dpcore.emulated)");
  }
  IpcHandle h;
  std::memset(h.bytes, 0, sizeof(h.bytes));
  const std::string path =
      "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(it->second.fd);
  path.copy(h.bytes, kSerialAt - 1);
  std::memcpy(h.bytes + kSerialAt, &it->second.serial, sizeof(uint64_t));
  *offset = at - it->first;
  return h;
}

bool isHandle(const IpcHandle& handle) { return std::strncmp(handle.bytes, "/proc/", 6) == 0; }

void* importMemory(const IpcHandle& handle) {
  const std::string path = pathOf(handle);
  uint64_t serial;
  std::memcpy(&serial, handle.bytes + kSerialAt, sizeof(serial));
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(Tail)) {
    if (fd >= 0) close(fd);
    throw std::runtime_error("dpcore emulation: cannot open a peer's device memory (" + path +
                             ")");
  }
  const size_t mapped = static_cast<size_t>(st.st_size);
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    close(fd);
    throw std::runtime_error("dpcore emulation: cannot map " + path);
  }
  Tail* tail = tailOfFile(base, mapped);
  if (tail->serial != serial) {
    munmap(base, mapped);
    close(fd);
    throw std::runtime_error("dpcore emulation: a peer's device memory was freed before it "
                             "was mapped here");
  }
  int slot = 0;
  for (int32_t free = 0; slot < kImporters; ++slot, free = 0) {
    if (__atomic_compare_exchange_n(&tail->importers[slot], &free, getpid(), false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      break;
    }
  }
  if (slot == kImporters) {
    munmap(base, mapped);
    close(fd);
    throw std::runtime_error("dpcore emulation: too many processes map one allocation");
  }
  std::lock_guard<std::mutex> lock(mutex);
  imports[reinterpret_cast<uintptr_t>(base)] = Import{mapped, slot, fd};
  return base;
}

void closeImport(void* base) {
  Import i;
  if (!take(imports, base, &i)) return;
  struct stat st;
  if (fstat(i.fd, &st) == 0 && static_cast<size_t>(st.st_size) == i.mapped) {  // else: gone
    __atomic_store_n(&tailOfFile(base, i.mapped)->importers[i.slot], 0, __ATOMIC_RELEASE);
  }
  munmap(base, i.mapped);
  close(i.fd);
}

}  // namespace dpcore::emulated
