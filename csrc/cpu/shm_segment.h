// One POSIX shared-memory segment per communicator and node. Local rank 0 creates it, the name
// travels over MPI, every rank maps it, and it is unlinked as soon as all have mapped it: from
// then on the kernel frees it when the last rank exits, however that rank ends.
#pragma once

#include <cstddef>
#include <string>

namespace dpcore {

class ShmSegment {
 public:
  // create=true: make a fresh segment of `bytes` (zero-filled) under `name`; else map it.
  ShmSegment(const std::string& name, size_t bytes, bool create);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  void unlink();  // idempotent; called once every rank has mapped the segment
  char* data() const { return data_; }
  size_t size() const { return bytes_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  size_t bytes_;
  char* data_ = nullptr;
  bool owner_;
  bool unlinked_ = false;
};

}  // namespace dpcore
