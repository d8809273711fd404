// What became of a process on this host, from its pid: how a transport that knows its peers'
// pids tells a dead or stopped peer from a slow one.
#pragma once

#include <sys/types.h>

namespace dpcore {

enum class ProcessState { kRunning, kStopped, kGone };

// kGone: no such pid, or a zombie (killed, not yet reaped). kStopped: SIGSTOP or a debugger.
ProcessState processState(pid_t pid);
inline bool processAlive(pid_t pid) { return processState(pid) != ProcessState::kGone; }

// Ends this process with _exit(status) after `seconds`, unless it has ended by then: from a
// thread of its own, so it works where no Python code runs any more (in MPI_Finalize, which
// runs after the interpreter has finalized, waiting for a peer that failed).
void exitAfter(double seconds, int status);

}  // namespace dpcore
