// Optional timeline of collectives and their steps (DPCORE_TRACE): dpcore/trace.py writes it as
// Chrome trace events. Off, it costs one branch per step.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace dpcore {

struct TraceEvent {
  const char* name;  // collective or verb: string literals only
  int64_t startUs;   // wall clock, so the lanes of ranks on one machine line up
  int64_t durationUs;
  uint64_t seq;      // the collective's sequence number
  int step;          // step within the round (-1: the whole collective)
  uint64_t bytes;
  int algo = -1, dtype = -1, op = -1;  // a whole collective's, once known (codes)
};

class Tracer {
 public:
  bool enabled = false;
  std::vector<TraceEvent> events;

  static int64_t nowUs() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch()).count();
  }
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
      tracer_->events.push_back(event_);
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
