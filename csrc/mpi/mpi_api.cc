// The MPI calls of mpi_api.h, looked up by dlsym in the MPI library mpi4py loaded.
#include "mpi/mpi_api.h"

#include <dlfcn.h>
#include <link.h>

#include <stdexcept>

namespace dpcore {
namespace {

// The address of `name` in whichever loaded object defines it, or null.
void* findLoaded(const char* name) {
  struct Search {
    const char* name;
    void* found;
  } search{name, nullptr};
  dl_iterate_phdr([](dl_phdr_info* info, size_t, void* data) {
    auto* s = static_cast<Search*>(data);
    if (!info->dlpi_name || !info->dlpi_name[0]) return 0;
    void* handle = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    if (!handle) return 0;
    s->found = dlsym(handle, s->name);
    dlclose(handle);  // drops only the reference NOLOAD took
    return s->found ? 1 : 0;
  }, &search);
  return search.found;
}

template <class T>
T bind(const char* name) {
  void* f = findLoaded(name);
  if (!f) {
    throw std::runtime_error(std::string("dpcore: no MPI library loaded (") + name +
                             " not found); import mpi4py.MPI first");
  }
  return reinterpret_cast<T>(f);
}

// H: the library's handle type, by width.
template <class H>
class Calls : public MpiApi {
 public:
  Calls()
      : isend_(bind<decltype(isend_)>("MPI_Isend")), irecv_(bind<decltype(irecv_)>("MPI_Irecv")),
        test_(bind<decltype(test_)>("MPI_Test")), cancel_(bind<decltype(cancel_)>("MPI_Cancel")),
        finalized_(bind<decltype(finalized_)>("MPI_Finalized")),
        errorString_(bind<decltype(errorString_)>("MPI_Error_string")) {}

  int isend(const void* buf, int bytes, Handle type, int dest, int tag, Handle comm,
            Handle* request) override {
    H r{};
    int rc = isend_(buf, bytes, of(type), dest, tag, of(comm), &r);
    *request = to(r);
    return rc;
  }
  int irecv(void* buf, int bytes, Handle type, int source, int tag, Handle comm,
            Handle* request) override {
    H r{};
    int rc = irecv_(buf, bytes, of(type), source, tag, of(comm), &r);
    *request = to(r);
    return rc;
  }
  int test(Handle* request, bool* done) override {
    H r = of(*request);
    int flag = 0;
    alignas(8) char status[64];  // larger than any library's MPI_Status
    int rc = test_(&r, &flag, status);
    *request = to(r);
    *done = flag != 0;
    return rc;
  }
  int cancel(Handle* request) override {
    H r = of(*request);
    return cancel_(&r);
  }
  bool finalized() override {
    int flag = 0;
    return finalized_(&flag) != 0 || flag != 0;
  }
  std::string errorString(int code) override {
    char text[1024];
    int length = 0;
    if (errorString_(code, text, &length) != 0) return "MPI error " + std::to_string(code);
    return std::string(text, length);
  }

 private:
  static H of(Handle h) {
    if constexpr (sizeof(H) == 4) return static_cast<H>(static_cast<uint32_t>(h));
    else return reinterpret_cast<H>(static_cast<uintptr_t>(h));
  }
  static Handle to(H h) {
    if constexpr (sizeof(H) == 4) return static_cast<uint32_t>(h);
    else return reinterpret_cast<uintptr_t>(h);
  }
  int (*isend_)(const void*, int, H, int, int, H, H*);
  int (*irecv_)(void*, int, H, int, int, H, H*);
  int (*test_)(H*, int*, void*);
  int (*cancel_)(H*);
  int (*finalized_)(int*);
  int (*errorString_)(int, char*, int*);
};

}  // namespace

std::shared_ptr<MpiApi> MpiApi::load(int handleBytes) {
  if (handleBytes == 4) return std::make_shared<Calls<int32_t>>();
  if (handleBytes == 8) return std::make_shared<Calls<void*>>();
  throw std::invalid_argument("dpcore: MPI handles of " + std::to_string(handleBytes) +
                              " bytes: expected 4 (MPICH) or 8 (Open MPI, the MPI ABI)");
}

}  // namespace dpcore
