#pragma once
// The one cross-core verb (docs/architecture.md "Across cores"): run work on
// a given core and, optionally, a reply back on the calling core.
//
//   try_submit(cores, core, fn)                 fn() on `core`; shed
//   submit(cores, core, fn, Wait{})             fn() on `core`; wait
//   try_submit_to(cores, core, arg, fn, reply)  r = fn(arg) on `core`, then
//                                               reply(r) here; shed
//   submit_to(cores, core, arg, fn, reply, Wait{})   the same; wait
//   submit_later / try_submit_later             submit / try_submit, but a
//                                               local fn runs at the end of
//                                               this turn, not inline
//
// Local fast path: `core` == the calling core runs fn (and reply) inline, now:
// no mailbox, no allocation, no type erasure. Otherwise the work is moved
// into one Task in the (calling core → core) mailbox, whose depth
// (Runtime::Options::mailbox_depth) bounds the work in flight per target
// core. On a full mailbox the caller chose:
//   shed  the work is handed back intact (`fn`, or `arg` for the round trip)
//         for the caller to answer "overloaded" with;
//   wait  it is retried from the calling core's timer every Wait::retry_us
//         until accepted, or dropped on the calling core once
//         Wait::give_up_after_us passed (< 0: never).
// The reply's return trip always waits and never gives up: an answer
// travelling back is never dropped (their number is bounded by the calls in
// flight). Mailboxes are FIFO per (from, to) pair: two submits from one core
// to another run in order.
//
// From a thread that is not one of the runtime's reactors (the state saver,
// the main thread) nothing is local and nothing is refused: the work goes
// through Runtime's injection queue.
//
// Lifetimes: fn and arg are destroyed on `core` (after fn ran), the reply on
// the calling core; captures must be safe to move across threads (plain
// values, pointers to objects outliving the runtime, weak handles).

#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

#include "runtime/cores.hh"

namespace ic::runtime {

// How long a "wait" submit keeps retrying a full mailbox.
struct Wait {
  std::int64_t retry_us = 100;         // delay between attempts, µs
  std::int64_t give_up_after_us = -1;  // < 0: retry until accepted
};

// A reply that does not travel back: with it, try_submit_to / submit_to are
// one-way calls that still hand `arg` back when shed.
struct NoReply {
  template <typename... Args>
  void operator()(Args&&...) const {}
};

namespace detail {

// Pushes `task` to `core`, or retries from the calling core's timer (see Wait).
// `give_up_at_us`: monotonic µs after which the task is dropped; INT64_MAX never.
void push_or_wait(Cores& cores, unsigned core, Task task, std::int64_t retry_us,
                  std::int64_t give_up_at_us);

std::int64_t give_up_at(Cores& cores, const Wait& wait);

template <typename Arg, typename Fn, typename Reply>
void run_and_reply(Arg&& arg, Fn& fn, Reply& reply) {
  if constexpr (std::is_void_v<std::invoke_result_t<Fn&, std::remove_reference_t<Arg>&>>) {
    fn(arg);
    reply();
  } else {
    reply(fn(arg));
  }
}

// The remote half of a round trip: runs on the target core, then sends the
// reply (with the result moved in) back to `back`, waiting if need be.
template <typename Arg, typename Fn, typename Reply>
struct RoundTrip {
  Cores* cores;
  unsigned back;
  Arg arg;
  Fn fn;
  Reply reply;

  void operator()() {
    if constexpr (std::is_same_v<Reply, NoReply>) {
      fn(arg);
    } else if constexpr (std::is_void_v<std::invoke_result_t<Fn&, Arg&>>) {
      fn(arg);
      push_or_wait(*cores, back, Task(std::move(reply)), Wait{}.retry_us, INT64_MAX);
    } else {
      push_or_wait(*cores, back, Task([reply = std::move(reply), result = fn(arg)]() mutable {
        reply(std::move(result));
      }),
                   Wait{}.retry_us, INT64_MAX);
    }
  }
};

// The remote half of try_submit / try_submit_later.
template <typename Fn>
std::optional<Fn> try_push_fn(Cores& cores, unsigned core, Fn fn) {
  Task task(std::move(fn));
  if (cores.try_push(core, task)) return std::nullopt;
  return std::move(task).template take<Fn>();
}

inline void push_waiting(Cores& cores, unsigned core, Task task, const Wait& wait) {
  push_or_wait(cores, core, std::move(task), wait.retry_us, give_up_at(cores, wait));
}

}  // namespace detail

// Runs `fn()` on `core`. Returns std::nullopt once it ran (local) or was
// queued, or `fn` itself, untouched, when the mailbox towards `core` is full.
template <typename Fn>
[[nodiscard]] std::optional<Fn> try_submit(Cores& cores, unsigned core, Fn fn) {
  if (core == cores.current_core()) {
    fn();
    return std::nullopt;
  }
  return detail::try_push_fn(cores, core, std::move(fn));
}

// Runs `fn()` on `core`, waiting on a full mailbox (see Wait).
template <typename Fn>
void submit(Cores& cores, unsigned core, Fn fn, Wait wait = {}) {
  if (core == cores.current_core()) {
    fn();
    return;
  }
  detail::push_waiting(cores, core, Task(std::move(fn)), wait);
}

// Runs `fn(arg)` on `core`, then `reply(result)` (or `reply()` when fn returns
// void) on the calling core. Locally `fn` gets `arg` itself (no copy, no
// move); remotely a moved copy. Returns std::nullopt once it ran or was
// queued, or `arg`, untouched, when the mailbox towards `core` is full (fn and
// reply are then destroyed here, unrun).
template <typename Arg, typename Fn, typename Reply>
[[nodiscard]] std::optional<std::decay_t<Arg>> try_submit_to(Cores& cores, unsigned core, Arg&& arg,
                                                             Fn fn, Reply reply) {
  const unsigned here = cores.current_core();
  if (core == here) {
    detail::run_and_reply(arg, fn, reply);
    return std::nullopt;
  }
  using Trip = detail::RoundTrip<std::decay_t<Arg>, Fn, Reply>;
  Task task(Trip{&cores, here, std::forward<Arg>(arg), std::move(fn), std::move(reply)});
  if (cores.try_push(core, task)) return std::nullopt;
  return std::move(std::move(task).template take<Trip>().arg);
}

// Runs `fn(arg)` on `core` and `reply(result)` here, waiting on a full
// mailbox (see Wait; a given-up round trip runs neither fn nor reply).
template <typename Arg, typename Fn, typename Reply>
void submit_to(Cores& cores, unsigned core, Arg&& arg, Fn fn, Reply reply, Wait wait = {}) {
  const unsigned here = cores.current_core();
  if (core == here) {
    detail::run_and_reply(arg, fn, reply);
    return;
  }
  detail::push_waiting(cores, core,
                       Task(detail::RoundTrip<std::decay_t<Arg>, Fn, Reply>{
                           &cores, here, std::forward<Arg>(arg), std::move(fn), std::move(reply)}),
                       wait);
}

// As try_submit(), but a local `fn` runs at the end of the calling core's
// turn instead of inline (see submit_later).
template <typename Fn>
[[nodiscard]] std::optional<Fn> try_submit_later(Cores& cores, unsigned core, Fn fn) {
  if (core == cores.current_core()) {
    cores.defer(Task(std::move(fn)));
    return std::nullopt;
  }
  return detail::try_push_fn(cores, core, std::move(fn));
}

// As submit(), but a local `fn` runs at the end of the calling core's turn
// instead of inline: for code that must not re-enter itself (a fan-out hub
// that posts while iterating its subscribers).
template <typename Fn>
void submit_later(Cores& cores, unsigned core, Fn fn, Wait wait = {}) {
  if (core == cores.current_core()) {
    cores.defer(Task(std::move(fn)));
    return;
  }
  detail::push_waiting(cores, core, Task(std::move(fn)), wait);
}

}  // namespace ic::runtime
