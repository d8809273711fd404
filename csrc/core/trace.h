// Optional timeline of collectives and their steps (DPCORE_TRACE): streamed to a file per process
// as the run goes, which dpcore/trace merges into Chrome trace events. Off, it costs one branch
// per step.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/choice_log.h"

namespace dpcore {

// Events a streaming Tracer holds at most before it writes them (tests/test_trace.py pins it).
constexpr size_t kTraceBatch = 1024;

struct TraceEvent {
  const char* name;  // collective or verb: string literals only
  int64_t startUs;   // wall clock, so the lanes of ranks on one machine line up
  int64_t durationUs;
  uint64_t seq;      // the collective's sequence number
  int step;          // step within the round (-1: the whole collective)
  uint64_t bytes;
  int algo = -1, dtype = -1, op = -1;  // a whole collective's, once known (codes)
};

// What each collective and ring step ran, for its consumers: the events kept (DPCORE_TRACE;
// take_trace) and the choice log (DPCORE_DEBUG=INFO). Spans are made only while one is on.
class Tracer {
 public:
  bool enabled = false;  // spans are made: keep(true), a stream, or the choice log
  std::vector<TraceEvent> events;  // recorded, not yet taken or written to the stream
  ChoiceLog choices;

  static int64_t nowUs() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch()).count();
  }

  // Record from now on, and append each event to `path` as a JSON line [lane, name, start_us,
  // duration_us, seq, step, bytes, algo, dtype, op] (dpcore/trace reads them back): when a whole
  // collective ends and every kTraceBatch events, so memory stays bounded and a killed process
  // loses at most its last collective's events. O_APPEND and one write per batch keep lines
  // whole when several communicators of a process stream to one file.
  void streamTo(const std::string& path, int lane) {
    int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error("DPCORE_TRACE: cannot open " + path + ": " +
                                         std::strerror(errno));
    closeStream();
    fd_ = fd;
    lane_ = lane;
    keep(true);
  }
  // Keep the events (for take_trace, or the stream), or stop.
  void keep(bool on) {
    keep_ = on;
    enabled = keep_ || choices.on;
  }
  void logChoices(const std::string& prefix) {
    choices.start(prefix);
    enabled = true;
  }
  void record(const TraceEvent& e) {
    if (choices.on && e.step < 0 && e.algo >= 0) choices.note(e.name, e.dtype, e.algo, e.bytes);
    if (!keep_) return;
    events.push_back(e);
    peakHeld_ = std::max(peakHeld_, events.size());
    if (fd_ >= 0 && (e.step < 0 || events.size() >= kTraceBatch)) flush();
  }
  // Write the held events to the stream (none: keep them for take_trace).
  void flush() {
    if (fd_ < 0 || events.empty()) return;
    std::string lines;
    char line[256];
    for (const TraceEvent& e : events) {  // names are string literals: nothing to escape
      int n = std::snprintf(line, sizeof line, "[%d,\"%s\",%lld,%lld,%llu,%d,%llu,%d,%d,%d]\n",
                            lane_, e.name, static_cast<long long>(e.startUs),
                            static_cast<long long>(e.durationUs),
                            static_cast<unsigned long long>(e.seq), e.step,
                            static_cast<unsigned long long>(e.bytes), e.algo, e.dtype, e.op);
      lines.append(line, static_cast<size_t>(std::min<int>(n, sizeof line - 1)));
    }
    events.clear();
    // A failed write (a full disk) drops the batch rather than fail the collective it traces.
    for (size_t done = 0; done < lines.size();) {
      ssize_t n = ::write(fd_, lines.data() + done, lines.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
  }
  // The most events held in memory at once (at most kTraceBatch while streaming).
  size_t peakHeld() const { return peakHeld_; }

  Tracer() = default;
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;
  ~Tracer() {
    flush();
    closeStream();
  }

 private:
  void closeStream() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool keep_ = false;
  int fd_ = -1;
  int lane_ = 0;
  size_t peakHeld_ = 0;
};

// Records [construction, destruction) as one event when tracing is on.
class TraceSpan {
 public:
  TraceSpan(Tracer& tracer, const char* name, uint64_t seq, int step, uint64_t bytes)
      : tracer_(tracer.enabled ? &tracer : nullptr), event_{name, 0, 0, seq, step, bytes, -1, -1, -1} {
    if (tracer_) event_.startUs = Tracer::nowUs();
  }
  ~TraceSpan() {
    if (tracer_) {
      event_.durationUs = Tracer::nowUs() - event_.startUs;
      tracer_->record(event_);
    }
  }
  // What ran: the algorithm (auto resolved), the dtype and the op, for the trace's args.
  void describe(int algo, int dtype, int op) {
    event_.algo = algo;
    event_.dtype = dtype;
    event_.op = op;
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  Tracer* tracer_;
  TraceEvent event_;
};

// The spans of one collective's ring verbs: each verb is one step of one round, and the trace
// labels it with its step in the round.
class StepSpans {
 public:
  StepSpans(Tracer* tracer, uint64_t seq, int verbsPerRound)
      : tracer_(tracer), seq_(seq), verbsPerRound_(verbsPerRound) {}
  TraceSpan next(const char* verb, uint64_t bytes) {
    return TraceSpan(*tracer_, verb, seq_, static_cast<int>(verbs_++ % verbsPerRound_), bytes);
  }

 private:
  Tracer* tracer_;
  uint64_t seq_;
  int verbsPerRound_;
  uint64_t verbs_ = 0;
};

}  // namespace dpcore
