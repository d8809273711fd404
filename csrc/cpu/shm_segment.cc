// A POSIX shared-memory segment (shm_segment.h): made or mapped, unlinked once all have it.
#include "cpu/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace dpcore {
namespace {
std::runtime_error sysError(const std::string& what, const std::string& name) {
  return std::runtime_error("dpcore shm: " + what + " " + name + ": " + std::strerror(errno));
}

// Why `bytes` do not fit in the free space of the file system behind `fd` (/dev/shm), or "": a
// segment sized past it maps fine, and then the first page past the free space kills the
// process with SIGBUS and leaves the segment behind.
std::string tooLarge(int fd, size_t bytes) {
  struct statvfs fs;
  if (fstatvfs(fd, &fs) != 0) return "";
  const unsigned long long free = static_cast<unsigned long long>(fs.f_bavail) * fs.f_frsize;
  if (bytes <= free) return "";
  return std::to_string(bytes) + " bytes do not fit in the " + std::to_string(free) +
         " bytes free in /dev/shm";
}
}  // namespace

ShmSegment::ShmSegment(const std::string& name, size_t bytes, bool create)
    : name_(name), bytes_(bytes), owner_(create) {
  int fd = create ? shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600)
                  : shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) throw sysError(create ? "cannot create" : "cannot open", name);
  const std::string full = create ? tooLarge(fd, bytes) : "";
  if (!full.empty()) {
    close(fd);
    shm_unlink(name.c_str());
    throw std::runtime_error("dpcore shm: cannot create " + name + ": " + full);
  }
  if (create && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int saved = errno;
    close(fd);
    shm_unlink(name.c_str());
    errno = saved;
    throw sysError("cannot size", name);
  }
  // MAP_POPULATE: fault every page in now, not in the first collectives, which would then run
  // slow for reasons of their own (and mislead algo auto's tuner, which times them).
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    if (create) shm_unlink(name.c_str());
    throw sysError("cannot map", name);
  }
  data_ = static_cast<char*>(p);
}

ShmSegment::~ShmSegment() {
  if (owner_) unlink();
  if (data_) munmap(data_, bytes_);
}

void ShmSegment::unlink() {
  if (owner_ && !unlinked_) {
    shm_unlink(name_.c_str());
    unlinked_ = true;
  }
}

}  // namespace dpcore
