// What peer links deliver to one session (docs/rpc-protocol.md section 8).
//
// A host's session on worker B owns a PeerInbox once the host asked for a
// ticket (PEER_TICKET). Sessions of B that other workers opened as peer links
// (PEER_ATTACH with that ticket) post the bytes of their PEER_PUSH frames
// here, from their own threads; the owning session takes an event's bytes
// when its stream reaches the host's PEER_WAIT for it, and writes them into
// its own buffers itself. So every buffer is only ever touched by the thread
// of the session that owns it, and a push names handles only of the session
// its ticket names: a handle of any other session is not found there.
//
//   // B, the host's session:                 // B, a peer link's session:
//   inbox = PeerInbox::create(shared);         inbox->attach(source, label);
//   auto parts = inbox->take(source, event,    inbox->post(source, push, deadline);
//                            deadline, cancel); inbox->detach(source, why);   // the link ended
//   inbox->close();                            // the session ended: posters stop
//
// Bounds: everything waiting is charged to the worker's memory budget and
// capped per inbox (a poster waits for room, up to its deadline): each
// part's bytes (a failure's message, at most kMaxString) plus kPartOverhead,
// and kEventOverhead per event; events waiting per source and parts per
// event are capped; at most kMaxPeerSources sources attach.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "protocol/messages.h"

namespace weft::rpc {

struct WorkerShared;

class PeerInbox {
 public:
  // One part of an event: bytes for [offset, + bytes.size()) of buffer handle.
  struct Part {
    uint64_t handle = 0;
    uint64_t offset = 0;
    std::vector<uint8_t> bytes;
  };

  PeerInbox(WorkerShared& shared, size_t cap_bytes);
  ~PeerInbox();  // gives back the budget of what was never taken
  PeerInbox(const PeerInbox&) = delete;
  PeerInbox& operator=(const PeerInbox&) = delete;

  // Peer side. attach returns "" or why the source cannot attach.
  std::string attach(uint32_t source, const std::string& label);
  // Queues one PEER_PUSH; waits for room until deadline. Returns "" or why
  // the link must end (the inbox closed, no room in time, too many events).
  std::string post(uint32_t source, const PeerPushRequest& push, std::chrono::steady_clock::time_point deadline);
  // The link of source ended (why: how); its events still waiting are kept,
  // a wait for one that never completed fails naming why.
  void detach(uint32_t source, const std::string& why);
  // Whether events of source wait to be taken (the link then holds state).
  bool waiting(uint32_t source);

  // Owner side: blocks until event `event` of `source` is complete, then
  // returns its parts (and forgets it). Throws Error: disconnected when the
  // source's link ended first or pushed a failure (naming its label),
  // disconnected when cancel or the worker stops, out_of_memory... never;
  // invalid_input never (the owner checks the parts' handles itself).
  std::vector<Part> take(uint32_t source, uint64_t event, std::chrono::steady_clock::time_point deadline,
                         const std::atomic<bool>& cancel);
  // The owner ended: every poster and attach from now on is refused.
  void close();

 private:
  struct Pending {
    std::vector<Part> parts;
    bool complete = false;
    std::optional<std::string> failure;  // the pusher's message
    size_t charged = 0;                  // bytes of bytes_ (and the budget) this event holds
  };
  struct Source {
    std::string label;
    bool attached = false;
    std::optional<std::string> ended;  // why the link ended
    std::map<uint64_t, Pending> events;
  };
  static constexpr size_t kMaxEventsPerSource = 4096;
  // A sender makes a part per kMaxPushBytes (64 MiB) of an event: 1024 parts
  // are 64 GiB, more than any buffer a session may hold.
  static constexpr size_t kMaxPartsPerEvent = 1024;

 public:
  // What a part and an event cost beyond their bytes (the Part, its
  // vector's allocation, a map node, an allocator's headers): charged like
  // bytes, so that pushes of nothing still fill the inbox and the budget.
  static constexpr size_t kPartOverhead = 96;
  static constexpr size_t kEventOverhead = 160;

 private:

  WorkerShared& shared_;
  const size_t cap_bytes_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<uint32_t, Source> sources_;
  size_t bytes_ = 0;  // waiting, and charged to the worker's budget
  bool closed_ = false;
};

// The worker's tickets: which inbox each names. A ticket is 32 random bytes,
// compared in constant time; the entry goes when its session does.
class PeerRegistry {
 public:
  void add(const Ticket& ticket, const std::shared_ptr<PeerInbox>& inbox);
  void remove(const Ticket& ticket);
  std::shared_ptr<PeerInbox> find(const Ticket& ticket);

 private:
  std::mutex mu_;
  std::vector<std::pair<Ticket, std::weak_ptr<PeerInbox>>> entries_;
};

}  // namespace weft::rpc
