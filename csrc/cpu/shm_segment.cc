#include "cpu/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace dpcore {
namespace {
std::runtime_error sysError(const std::string& what, const std::string& name) {
  return std::runtime_error("dpcore shm: " + what + " " + name + ": " + std::strerror(errno));
}
}  // namespace

ShmSegment::ShmSegment(const std::string& name, size_t bytes, bool create)
    : name_(name), bytes_(bytes), owner_(create) {
  int fd = create ? shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600)
                  : shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) throw sysError(create ? "cannot create" : "cannot open", name);
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
