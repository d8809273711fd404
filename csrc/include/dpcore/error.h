// CommError: a collective that cannot complete (peer died, peers disagree, timeout, earlier
// abort). Surfaces in Python as dpcore.CommError, a RuntimeError.
//
// A call the peers' headers show cannot work, though each rank's arguments alone looked fine
// (core/call.h: misfit), is refused by every rank alike before any data moves, and so leaves the
// communicator usable: InvalidCall (ValueError in Python) on the ranks whose arguments were at
// fault, Refused (a CommError) on the others.
#pragma once

#include <stdexcept>
#include <string>

namespace dpcore {

class CommError : public std::runtime_error {
 public:
  explicit CommError(const std::string& what) : std::runtime_error(what) {}
};

class Refused : public CommError {
 public:
  explicit Refused(const std::string& what) : CommError(what) {}
};

class InvalidCall : public std::invalid_argument {
 public:
  explicit InvalidCall(const std::string& what) : std::invalid_argument(what) {}
};

}  // namespace dpcore
