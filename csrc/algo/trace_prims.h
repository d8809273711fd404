// A Prims that only records which verb touched which element range. Running the real ring
// templates against it lets the tests simulate every rank's schedule without any transport.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dpcore {

struct VerbRecord {
  std::string verb;
  size_t start;  // element offset in the buffer the verb reads from or writes to
  size_t count;
};

class TracePrims {
 public:
  // Pointers passed to the templates are offsets from a null base (1 byte per element).
  std::vector<VerbRecord> events;

  void send(const void* src, size_t n) { add("send", src, n); }
  void recv(void* dst, size_t n) { add("recv", dst, n); }
  void recvReduceSend(const void* src, size_t n) { add("recvReduceSend", src, n); }
  void recvReduceCopySend(const void*, void* dst, size_t n) { add("recvReduceCopySend", dst, n); }
  void recvReduceCopy(const void* src, void*, size_t n) { add("recvReduceCopy", src, n); }
  void recvCopySend(void* dst, size_t n) { add("recvCopySend", dst, n); }
  void copySend(const void*, void* dst, size_t n) { add("copySend", dst, n); }

 private:
  void add(const char* verb, const void* p, size_t n) {
    events.push_back({verb, reinterpret_cast<size_t>(p), n});
  }
};

}  // namespace dpcore
