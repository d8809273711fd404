// A process's fate from its pid (process.h): kill(pid, 0), then /proc/<pid>/stat's state.
#include "core/process.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace dpcore {

ProcessState processState(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return ProcessState::kGone;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return ProcessState::kRunning;  // no procfs: trust kill()
  std::string line;
  std::getline(stat, line);
  // "pid (command) S ...": the command may hold spaces and parentheses, the state follows the
  // last ')'
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return ProcessState::kRunning;
  switch (line[close + 2]) {
    case 'Z':
    case 'X':
      return ProcessState::kGone;
    case 'T':
    case 't':
      return ProcessState::kStopped;
    default:
      return ProcessState::kRunning;
  }
}

void exitAfter(double seconds, int status) {
  std::thread([seconds, status] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    _exit(status);
  }).detach();
}

}  // namespace dpcore
