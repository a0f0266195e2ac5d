// LookupRoute step 5 (docs/lookup.md): which input a lookup keys on — the
// wire chain, the exact prefix_hash, or the fingerprint chain of token_ids
// (docs/fingerprint.md) — as the tenant's enableChainMatching decides.

#include "fingerprint/fingerprint.hh"
#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

bool Shard::Impl::resolve_tokens(LookupState& st) {
  const std::span<const std::uint32_t> tokens = st.q.token_ids;
  const std::int32_t bs = cfg.engine_block_size;
  if (tokens.size() > cfg.max_token_ids || bs <= 0) return false;
  const std::size_t blocks = fingerprint::wire_prefix_hashes(tokens, bs, fingerprint_buf);
  if (blocks == 0) return false;
  token_chain.clear();
  for (std::size_t i = 0; i < blocks; ++i)
    token_chain.emplace_back(fingerprint_buf.data() + i * 8, 8);
  token_counts.assign(blocks, bs);
  chain_hashes = token_chain;
  chain_counts = token_counts;
  return true;
}

bool Shard::Impl::resolve_input(LookupState& st) {
  const LookupQuery& q = st.q;
  chain_hashes = {};
  chain_counts = {};
  const bool has_arrays = !q.block_hashes.empty() || !q.block_token_counts.empty();
  if (!st.pol.enable_chain_matching) {
    if (!q.prefix_hash.empty()) {
      st.exact_hash = q.prefix_hash;
      st.exact_tokens = q.prefix_token_count;
      return true;
    }
    // prompt_text needs a tokenizer (none loaded); nothing supplied: no key.
    if (q.token_ids.empty()) return false;
    st.echo_tokens = st.ctx.token_ids_from_prompt;
    if (!resolve_tokens(st)) return false;
    // The exact key is the last block hash with the total count.
    st.exact_hash = chain_hashes.back();
    st.exact_tokens = static_cast<std::int64_t>(chain_hashes.size()) * cfg.engine_block_size;
    chain_hashes = {};
    chain_counts = {};
    return true;
  }
  if (!q.prefix_hash.empty() || has_arrays) {
    // Malformed arrays: never downgrade to prefix_hash.
    if (q.block_hashes.size() != q.block_token_counts.size()) return false;
    if (!q.block_hashes.empty()) {
      st.chain = true;
      chain_hashes = q.block_hashes;
      chain_counts = q.block_token_counts;
    } else {
      st.exact_hash = q.prefix_hash;
      st.exact_tokens = q.prefix_token_count;
    }
    return true;
  }
  if (!q.token_ids.empty()) {
    st.echo_tokens = st.ctx.token_ids_from_prompt;
    st.chain = true;
    return resolve_tokens(st);
  }
  // prompt_text: no tokenizer is loaded for any model yet → fail open.
  if (q.has_prompt_text) return false;
  st.exact_tokens = q.prefix_token_count;  // exact lookup on an empty prefix_hash
  return true;
}

}  // namespace ic::index
