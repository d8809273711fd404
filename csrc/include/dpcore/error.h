// CommError: a collective that cannot complete (peer died, peers disagree, timeout, earlier
// abort). Surfaces in Python as dpcore.CommError, a RuntimeError.
#pragma once

#include <stdexcept>
#include <string>

namespace dpcore {

class CommError : public std::runtime_error {
 public:
  explicit CommError(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace dpcore
