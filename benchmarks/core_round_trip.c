// Which state is the machine in? Two processes pinned to CPUs 0 and 1 bounce a counter through
// a shared cache line; the round trip shows whether the cores share a last-level cache (on the
// development VM ~110 ns) or sit on different dies (~500 ns), which decides how fast every
// shared-memory handoff is (benchmarks/results/2026-12-01-cpu.md).
//
//   gcc -O2 benchmarks/core_round_trip.c -o /tmp/core_round_trip && /tmp/core_round_trip
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
  const long iters = 200000;
  // two counters 512 bytes apart: each has one writer, so only the handoff moves lines
  _Atomic long* line = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  _Atomic long *ping = line, *pong = line + 64;
  pid_t child = fork();
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(child == 0 ? 1 : 0, &cpus);
  sched_setaffinity(0, sizeof cpus, &cpus);
  if (child == 0) {
    for (long i = 1; i <= iters; i++) {
      while (atomic_load(ping) != i) {
      }
      atomic_store(pong, i);
    }
    _exit(0);
  }
  double start = now();
  for (long i = 1; i <= iters; i++) {
    atomic_store(ping, i);
    while (atomic_load(pong) != i) {
    }
  }
  double took = now() - start;
  waitpid(child, NULL, 0);
  printf("cross-core round trip: %.0f ns\n", took / iters * 1e9);
  return 0;
}
