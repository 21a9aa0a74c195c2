//! Scatter: the expert-sorted row order of a routing and the q8_1 activations placed in it.
//! Within an expert, rows follow token order (as ggml's `mm_ids_helper`). The launcher
//! (host/src/moe/scatter.rs) runs one of two forms; both give the same bytes.
//!
//! **The chain** (order.rs, rows.rs), five kernels in order (4 and 5 on a second stream beside
//! 1-3 where 4 writes the token buffer):
//! 1. `moe_scatter_count`: CTA per chunk of 256 tokens (`SCATTER_CHUNK`), 256 threads; counts
//!    the chunk's rows per expert in shared memory (`4 * n_experts` bytes) ->
//!    `chunk_counts[chunk][e]`.
//! 2. `moe_scatter_offsets`: one CTA of 1024 threads, each over a run of consecutive experts
//!    (chunk counts read 8 at a time); `expert_bounds` = exclusive scan of the per-expert totals
//!    (a CTA prefix sum, moe/scan.rs); `chunk_counts` becomes the first compact row of each
//!    (chunk, expert).
//! 3. `moe_scatter_place`: CTA of 256 threads per group of 32 tokens (`SCATTER_PLACE_TOKENS`);
//!    its threads load the chunk's row counters into shared memory, advance them past the
//!    chunk's tokens before the group (shared atomic counts, 8 loads in flight each) and stage
//!    the group's ids; then one warp places the group, a lane per token: each lane sets its
//!    token's bit in the mask of each of its experts, then a row's place is the expert's
//!    counter plus the group's earlier tokens of that expert (the mask's lower bits). Writes
//!    `row_token`, `row_dst` (token * top_k + slot) and `row_of` (its inverse).
//! 4. `moe_scatter_quantize`: CTA per token, 8 warps over the 128-value chunks of its row:
//!    quantizes the token's activations to q8_1 D4 once, and writes them to every row the token
//!    was routed to - or, with a token buffer `xt` (at `SCATTER_GATHER_MIN_ROWS` rows and
//!    more), once into `xt` (a block per token and chunk), for step 5.
//! 5. `moe_scatter_gather` (with `xt` only): copies each compact row's blocks from its token's
//!    in `xt`, in 16-byte pieces, so that `xq` is written in order (a warp's stores are 512
//!    contiguous bytes). Step 4's writes to every row scatter 144-byte blocks over `xq`: 0.30
//!    ms at T = 16,384 on the H200, 44 % of the DRAM bandwidth; 4 + 5 take 0.20 ms there, and 4
//!    us more than step 4 alone at T = 512 (a launch, and a buffer written and read again).
//!
//! **One kernel** (one.rs), for runs of few rows: `moe_scatter_one`, a CTA per token, does all
//! of it. Each CTA counts every row's expert itself (the tokens before its own apart), so it
//! knows the expert bounds and its own rows' places without waiting for any other CTA; then it
//! quantizes its token as step 4 and writes its rows. Its work grows with the square of the
//! rows, so the launcher takes it up to `SCATTER_ONE_MAX_ROWS` rows.

mod one;
mod order;
mod rows;
