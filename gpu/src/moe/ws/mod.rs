//! The weight-stationary expert products (the Pascal-class design): a thread per weight row,
//! integer arithmetic only - no `dp4a`, no `mma` - so the kernels assemble for sm_60.
//!
//! Grid: x = one `MmqTile` (expert, up to `COLS` of its activation rows) per CTA, built by the
//! host from the expert bounds, largest expert first; y = 128-row slice of the output features.
//! Block: `WS_THREADS` (128) threads, thread r owning weight row `128 y + r`.
//! K loop: steps of 128 values (one D4 activation block per row). The CTA packs the step's
//! activations of its rows in pairs into shared memory - word `x0 + x1 * 2^20` per K value (see
//! `gpu::pairs`, tested on the host) - with their scales; then each thread, for each 32-value group of
//! its row in ascending K, decodes the group once (the shared decoders of `gpu::formats`, bytes
//! sign-extended with `prmt`), and for every pair of rows sums the 32 products with one
//! `mad.wide.s32` per value and splits the 64-bit sum into the two rows' exact int32 sums.
//! Each row's float epilogue is MMQ's (`quant::mmq_step_32` / `mmq_step_16`) in ascending K, so
//! the outputs are the MMQ path's bytes.
//!
//! Tiers: `COLS` = 16, 32 or 64 rows per CTA (`layout::WS_COLS`); the `_fast` variant of the
//! 32-row tier (WS_FAST, opt-in) enters a fully unrolled body for its exact number of row pairs
//! through a `match` (a jump table) instead of testing each pair per group, and keeps the scales
//! `[group][row]` so a pair's two scales are one 8-byte load. Same arithmetic, same bytes.
//! The K loop: ws/body.rs. Launcher: host/src/moe/expert/split/launch.rs.

mod body;

use body::ws_body;

use crate::formats::WeightBlock;
use crate::layout::{
    BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, BlockIq4NlDev, BlockQ2_0Dev,
    BlockQ8_0,
};
use crate::layout::{MmqParams, MmqTile};
use crate::ptx::ctaid_x;

/// The product (see the module doc).
///
/// # Safety
/// Parameters and buffers as `layout::MmqParams` describes, the tiles holding at most `COLS`
/// rows each; launched with `WS_THREADS` threads, `layout::ws_smem_bytes(COLS)` of dynamic
/// shared memory, one CTA per tile along x and `n / 128` along y.
#[inline(always)]
unsafe fn ws<B: WeightBlock, const COLS: usize>(p: &MmqParams) {
    // SAFETY: one tile per CTA along x.
    let tile = unsafe { *(p.tiles as *const MmqTile).add(ctaid_x() as usize) };
    if tile.n_cols == 0 {
        return; // a padding tile of a device-built list
    }
    // SAFETY: forwarded contract.
    unsafe { ws_body::<B, COLS, false>(p, &tile) }
}

/// The `_fast` form of a tier of at most 32 rows (see the module doc).
///
/// # Safety
/// As [`ws`], `COLS` <= 32.
#[inline(always)]
unsafe fn ws_fast<B: WeightBlock, const COLS: usize>(p: &MmqParams) {
    const { assert!(COLS <= 32) };
    // SAFETY: one tile per CTA along x.
    let tile = unsafe { *(p.tiles as *const MmqTile).add(ctaid_x() as usize) };
    if tile.n_cols == 0 {
        return; // a padding tile of a device-built list
    }
    // SAFETY: forwarded contract (tiles of at most 32 rows: at most 16 pairs).
    unsafe { ws_body::<B, COLS, true>(p, &tile) }
}

macro_rules! ws_kernels {
    ($(($w:ident, $b:ident, $gate_up:ident, $down:ident, $fused:ident, $wide:ident,
        $pipe:ident, $narrow:ident, $pipe_sw:ident, $narrow_sw:ident, $flat:ident,
        $flat_sw:ident, $c16:ident, $c32:ident, $c64:ident, $fast16:ident, $fast32:ident, $resident:ident,
        $narrow_tma:ident, $fused_sd:ident, $wide_sd:ident, $flat_ws:ident)),* $(,)?) => {$(
        /// Weight-stationary product, 16-row tiles; see the module doc.
        ///
        /// # Safety
        /// As `ws`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $c16(p: MmqParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { ws::<$b, 16>(&p) }
        }

        /// Weight-stationary product, 32-row tiles; see the module doc.
        ///
        /// # Safety
        /// As `ws`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $c32(p: MmqParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { ws::<$b, 32>(&p) }
        }

        /// Weight-stationary product, 64-row tiles; see the module doc.
        ///
        /// # Safety
        /// As `ws`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $c64(p: MmqParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { ws::<$b, 64>(&p) }
        }

        /// WS_FAST: the 16-row tier entered by a jump table; see the module doc.
        ///
        /// # Safety
        /// As `ws` with 16-row tiles.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $fast16(p: MmqParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { ws_fast::<$b, 16>(&p) }
        }

        /// WS_FAST: the 32-row tier entered by a jump table; see the module doc.
        ///
        /// # Safety
        /// As `ws` with 32-row tiles.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $fast32(p: MmqParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { ws_fast::<$b, 32>(&p) }
        }
    )*};
}

crate::for_each_format!(ws_kernels);
