// The few MPI calls the MPI transport makes, bound at run time to the MPI library that the
// process has loaded (mpi4py loaded it), so dpcore._C builds without MPI and works with whichever
// MPI mpi4py uses. MPI libraries differ in what a handle is (MPICH: an int; Open MPI and the
// standard ABI: a pointer), so Python passes the handles' width (mpi4py's MPI._sizeof) and
// values (MPI._handleof), and every handle travels here as a uint64_t.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dpcore {

class MpiApi {
 public:
  using Handle = uint64_t;  // a communicator, datatype or request, of either width

  // The calls of the loaded MPI library for handles of handleBytes (4 or 8); throws when no
  // MPI library is loaded or the width is neither.
  static std::shared_ptr<MpiApi> load(int handleBytes);
  virtual ~MpiApi() = default;

  // MPI's return codes (0: MPI_SUCCESS); the communicator's error handler must return them
  // (mpi4py sets MPI_ERRORS_RETURN, and duplicates inherit it).
  virtual int isend(const void* buf, int bytes, Handle byteType, int dest, int tag, Handle comm,
                    Handle* request) = 0;
  virtual int irecv(void* buf, int bytes, Handle byteType, int source, int tag, Handle comm,
                    Handle* request) = 0;
  virtual int test(Handle* request, bool* done) = 0;
  virtual int cancel(Handle* request) = 0;
  virtual bool finalized() = 0;  // MPI_Finalized: no MPI call may follow
  virtual std::string errorString(int code) = 0;
};

// Some ranks of an MPI communicator as the transport uses them: its handles, this rank, and for
// every rank its rank in the communicator, which is also its name in messages (the
// communicator is a duplicate of the world's, which the ranks across nodes use in part), and its
// pid where it runs on this host (0 elsewhere), to tell a dead peer from a slow one.
struct MpiEndpoint {
  std::shared_ptr<MpiApi> api;
  MpiApi::Handle comm;
  MpiApi::Handle byteType;  // MPI_BYTE: MPI only carries bytes here
  int rank;
  int size;
  std::vector<int> names;
  std::vector<int64_t> pids;
};

}  // namespace dpcore
