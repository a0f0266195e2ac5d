// Warm restart: the startup load, the periodic saver thread and the final
// save (docs/persistence.md "When it is read and written").

#include "persist/state_saver.hh"

#include <google/protobuf/arena.h>

#include <chrono>

#include "base/log.hh"
#include "persist/snapshot_codec.hh"
#include "runtime/submit.hh"

namespace ic::persist {

namespace {

std::int64_t wall_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// How often the saver thread looks whether a posted slice finished. A slice
// takes milliseconds; polling keeps the reactor side free of any lock.
constexpr std::chrono::microseconds kPollInterval{200};

}  // namespace

namespace {

std::int64_t entries_in(const std::vector<index::Shard*>& shards) {
  std::int64_t n = 0;
  for (const index::Shard* shard : shards) n += shard->entry_count();
  return n;
}

bool stop_asked(const LoadOptions& options) { return options.interrupted && options.interrupted(); }

// Pass 1: every chunk parses and the trailer's checksum matches; nothing kept.
bool verify(StateFileReader& reader, const LoadOptions& options, LoadOutcome* out) {
  state_pb::StateChunk chunk;
  std::string body;
  bool stopped = false;
  while (!(stopped = stop_asked(options)) && reader.next_chunk(&body)) {
    if (!chunk.ParseFromString(body)) {
      out->status = LoadStatus::kCorrupt;
      out->error = "unparsable chunk";
      return false;
    }
    for (const auto& u : chunk.updates()) out->file_entries += u.prefixes_size();
  }
  if (stopped) {
    out->interrupted = true;
    out->status = LoadStatus::kUnreadable;
    out->error = "interrupted by a signal";
    return false;
  }
  out->status = reader.status();
  out->error = reader.error();
  return out->status == LoadStatus::kOk;
}

// Ingests `chunks` into their owner shards, one thread per shard (no reactor
// runs yet, so each thread owns its shard).
void apply_batch(const std::vector<state_pb::StateChunk*>& chunks,
                 const std::vector<index::Shard*>& shards, std::int64_t now_wall_us) {
  const auto cores = static_cast<unsigned>(shards.size());
  std::vector<RestoreCounts> counts(cores);
  std::vector<std::thread> threads;
  for (unsigned core = 0; core < cores; ++core) {
    threads.emplace_back([&, core] {
      for (const state_pb::StateChunk* chunk : chunks)
        restore_owned(*chunk, *shards[core], core, cores, now_wall_us, &counts[core]);
    });
  }
  for (std::thread& t : threads) t.join();
}

// Pass 2: parse and apply a batch of at most options.batch_bytes at a time;
// one arena holds a batch and is reset after it.
bool apply(StateFileReader& reader, const std::vector<index::Shard*>& shards,
           std::int64_t now_wall_us, const LoadOptions& options, LoadOutcome* out) {
  google::protobuf::Arena arena;
  std::vector<state_pb::StateChunk*> batch;
  std::size_t batch_bytes = 0;
  std::string body;
  for (bool more = true; more;) {
    more = reader.next_chunk(&body);
    if (more) {
      auto* chunk = google::protobuf::Arena::CreateMessage<state_pb::StateChunk>(&arena);
      if (!chunk->ParseFromString(body)) {  // verified in pass 1: the inode changed in place
        out->status = LoadStatus::kCorrupt;
        out->error = "unparsable chunk";
        return false;
      }
      batch.push_back(chunk);
      batch_bytes += body.size();
    }
    if (!batch.empty() && (!more || batch_bytes >= options.batch_bytes)) {
      if (stop_asked(options)) {
        out->interrupted = true;
        out->status = LoadStatus::kUnreadable;
        out->error = "interrupted by a signal";
        return false;
      }
      apply_batch(batch, shards, now_wall_us);
      batch.clear();
      batch_bytes = 0;
      arena.Reset();
    }
  }
  out->status = reader.status();
  out->error = reader.error();
  return out->status == LoadStatus::kOk;
}

LoadOutcome load_from(StateFileReader& reader, const std::vector<index::Shard*>& shards,
                      std::int64_t now_wall_us, const LoadOptions& options) {
  LoadOutcome out;
  out.status = reader.status();
  out.error = reader.error();
  if (out.status != LoadStatus::kOk || !verify(reader, options, &out)) return out;
  if (!reader.rewind()) {
    out.status = reader.status();
    out.error = reader.error();
    return out;
  }
  const std::int64_t before = entries_in(shards);
  const bool ok = apply(reader, shards, now_wall_us, options, &out);
  out.entries = entries_in(shards) - before;
  if (!ok) return out;
  const state_pb::StateHeader& header = reader.header();
  out.policy_json = header.policy_json();
  out.templates_json = header.templates_json();
  out.server_version = header.server_version();
  out.created_at_us = header.created_at_us();
  out.stream_name = header.stream_name();
  out.stream_sequence = header.stream_sequence();
  out.stream_created_ns = header.stream_created_ns();
  return out;
}

}  // namespace

LoadOutcome load_state(const std::string& path, const std::vector<index::Shard*>& shards,
                       std::int64_t now_wall_us, const LoadOptions& options) {
  auto reader = StateFileReader::open(path, options.max_file_bytes);
  return load_from(*reader, shards, now_wall_us, options);
}

LoadOutcome load_state_bytes(std::string_view bytes, const std::vector<index::Shard*>& shards,
                             std::int64_t now_wall_us, const LoadOptions& options) {
  auto reader = StateFileReader::over(bytes);
  return load_from(*reader, shards, now_wall_us, options);
}

// One export slice's result, handed from a reactor to the saver thread.
struct StateSaver::Slot {
  std::atomic<bool> ready{false};
  std::string chunk;  // serialized StateChunk ("" when the slice held nothing)
  std::int64_t entries = 0;
  std::uint32_t cursor = 0;
  bool done = false;
  std::string policy_json;
};

StateSaver::StateSaver(Options options, runtime::Runtime& runtime,
                       std::vector<index::Shard*> shards, PersistStats& stats)
    : options_(std::move(options)), runtime_(runtime), shards_(std::move(shards)), stats_(stats) {}

StateSaver::~StateSaver() { stop(); }

void StateSaver::start() {
  thread_ = std::thread([this] { run(); });
}

void StateSaver::stop() {
  stopping_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

void StateSaver::run() {
  using Clock = std::chrono::steady_clock;
  auto next = Clock::now() + std::chrono::microseconds(options_.interval_us);
  while (!stopping_.load(std::memory_order_relaxed)) {
    if (Clock::now() < next) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (std::string error = save_live(); !error.empty() && !stopping_.load()) {
      base::log(base::LogLevel::warn, "state file save failed",
                {{"path", options_.path}, {"error", error}});
    } else if (error.empty() && options_.on_saved) {
      options_.on_saved();
    }
    next = Clock::now() + std::chrono::microseconds(options_.interval_us);
  }
}

bool StateSaver::wait(const std::shared_ptr<Slot>& slot) {
  while (!slot->ready.load(std::memory_order_acquire)) {
    if (stopping_.load(std::memory_order_relaxed)) return false;
    std::this_thread::sleep_for(kPollInterval);
  }
  return true;
}

std::string StateSaver::save_live() {
  const std::int64_t started = wall_now_us();
  // Before any slice: every record up to this position is in what follows.
  const StreamPosition position =
      options_.stream_position ? options_.stream_position() : StreamPosition{};
  // The policy set lives on the cores: read it on core 0.
  auto policy = std::make_shared<Slot>();
  index::Shard* shard0 = shards_[0];
  // From this (non-reactor) thread a submit is never refused: it goes through
  // the runtime's injection queue (runtime/submit.hh).
  runtime::submit(runtime_, 0, [shard0, policy] {
    policy->policy_json = shard0->policies()->source_json();
    policy->ready.store(true, std::memory_order_release);
  });
  if (!wait(policy)) return "stopping";
  std::string error;
  auto writer = open_file(started, policy->policy_json, position, &error);
  if (!writer) return error;
  std::int64_t entries = 0;
  for (unsigned core = 0; core < shards_.size(); ++core) {
    std::uint32_t cursor = 0;
    for (bool done = false; !done;) {
      auto slot = std::make_shared<Slot>();
      index::Shard* shard = shards_[core];
      const std::size_t budget = options_.slice_entries;
      runtime::submit(runtime_, core, [shard, slot, cursor, budget] {
        ChunkBuilder builder(budget);
        std::uint32_t cur = cursor;
        const bool end = shard->export_entries(
            &cur, budget, [&builder](const index::EntryView& v) { builder.add_entry(v); });
        if (end)
          shard->export_stats([&builder](const index::StatsView& v) { builder.add_stats(v); });
        slot->entries = static_cast<std::int64_t>(builder.entries());
        if (!builder.empty()) slot->chunk = builder.take();
        slot->cursor = cur;
        slot->done = end;
        slot->ready.store(true, std::memory_order_release);
      });
      if (!wait(slot)) return "stopping";
      if (!slot->chunk.empty() && !writer->append_chunk(slot->chunk)) break;
      entries += slot->entries;
      cursor = slot->cursor;
      done = slot->done;
    }
  }
  return finish(*writer, entries, started);
}

std::string StateSaver::save_stopped() {
  const std::int64_t started = wall_now_us();
  const StreamPosition position =
      options_.stream_position ? options_.stream_position() : StreamPosition{};
  std::string error;
  auto writer = open_file(started, shards_[0]->policies()->source_json(), position, &error);
  if (!writer) return error;
  std::int64_t entries = 0;
  ChunkBuilder builder(options_.slice_entries);
  auto flush = [&] {
    entries += static_cast<std::int64_t>(builder.entries());
    if (!builder.empty()) writer->append_chunk(builder.take());
  };
  for (index::Shard* shard : shards_) {
    std::uint32_t cursor = 0;
    bool done = false;
    while (!done) {
      done = shard->export_entries(&cursor, options_.slice_entries,
                                   [&](const index::EntryView& v) { builder.add_entry(v); });
      if (done) shard->export_stats([&](const index::StatsView& v) { builder.add_stats(v); });
      flush();
    }
  }
  return finish(*writer, entries, started);
}

std::unique_ptr<StateFileWriter> StateSaver::open_file(std::int64_t started_us,
                                                       std::string policy_json,
                                                       const StreamPosition& position,
                                                       std::string* error) {
  state_pb::StateHeader head;
  head.set_server_version(options_.server_version);
  head.set_created_at_us(started_us);
  head.set_policy_json(std::move(policy_json));
  if (options_.templates_json) head.set_templates_json(options_.templates_json());
  head.set_stream_name(position.stream);
  head.set_stream_sequence(position.sequence);
  head.set_stream_created_ns(position.created_ns);
  auto writer = StateFileWriter::create(options_.path, head, error);
  if (!writer) stats_.record_save(false, 0, 0, 0, 0);
  return writer;
}

std::string StateSaver::finish(StateFileWriter& writer, std::int64_t entries,
                               std::int64_t started_us) {
  std::string error = writer.commit();
  const std::int64_t ended = wall_now_us();
  stats_.record_save(error.empty(), static_cast<double>(ended) / 1e6,
                     static_cast<double>(ended - started_us) / 1e6,
                     static_cast<std::int64_t>(writer.bytes_written()), entries);
  if (error.empty()) {
    base::log(base::LogLevel::debug, "state file saved",
              {{"path", options_.path},
               {"entries", entries},
               {"bytes", writer.bytes_written()},
               {"duration_ms", (ended - started_us) / 1000}});
  }
  return error;
}

}  // namespace ic::persist
