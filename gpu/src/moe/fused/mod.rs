//! The fused int8 expert kernels `moe_experts_<gate_up>_fused`: per CTA one expert and up to
//! `32 NT` of its activation rows (NT = 1 or 2, a parameter); the gate/up product over the hidden size, SwiGLU
//! and q8_1 quantization of H into shared memory, then the down product from that H, each row's
//! result written to its (token, slot) row of `dm`. H never goes to global memory.
//!
//! Grid: x = one `MmqTile` per CTA (the host orders them largest expert first). Block:
//! `FUSED_THREADS` = 8 warps (warp tiling: fused/mma.rs). Work: `ffn / 64` gate/up passes of
//! 128 tile rows (64 features' gate and up rows, interleaved by 8 so that a lane holds the gate
//! and up of one feature), each over `hidden / (128 sub)` raw stages; then `hidden / 128` down
//! passes of 128 output rows over `ffn / 128` stages. All stages of both products form one
//! sequence that the copy pipeline walks `stages - 1` ahead (`cp.async`, fused/load.rs), so the
//! next pass's weights and the down weights load while the current pass multiplies. With
//! `FusedParams::prefetch` the weight rows of the stage after the newest issued one are also
//! brought into the L2 (`prefetch.global.L2`, fused/load.rs), one stage further ahead: on sm_75,
//! whose copies are plain loads, the next issue then waits on the L2 instead of DRAM.
//! Per 128-value K step: wait for the stage, barrier, decode into the int8 tile, barrier, `mma`.
//! Shared memory: `layout::FusedSmem` (the host's plan picks `stages` from the device).
//! Numerics: MMQ's integer sums and float epilogue in ascending K, swiglu_quant's SwiGLU and
//! q8_1 rule: GU, H and Dm are the MMQ path's bytes. The `_sd` kernels (`moe_experts_<gate_up>
//! _fused_sd`, `_fused_wide_sd`) take the opt-in Q2_0 shared-d step in their Q2_0 products
//! (fused/mma.rs): the reference's bytes of that variant.
//! Launcher: host/src/moe/expert/fused.rs.

mod load;
mod mma;

use crate::formats::WeightBlock;
use crate::layout::{
    BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs, BlockIq4NlDev, BlockQ2_0Dev,
    BlockQ8_0, FUSED_COL_UNIT, FUSED_FFN_PASS, FUSED_ROWS, FusedParams, FusedSmem, MMQ_KSTEP,
    MmqTile, Q8_1_MMQ_BYTES, WType, fused_sub_steps,
};
use crate::ptx::{cp_async_commit, cp_async_wait, ctaid_x, smem_base, sync_threads, tid_x};
use load::{Stage, decode_step, issue_stage, prefetch_stage, row_src};
use mma::{Acc, mma_step, store_down, swiglu_to_h};

/// Stage `i` of the CTA's sequence: gate/up stages first, then down.
#[inline(always)]
fn stage_at(i: u32, total_a: u32, stages_a: u32, stages_b: u32) -> Stage {
    if i < total_a {
        Stage {
            down: false,
            pass: i / stages_a,
            k_stage: i % stages_a,
        }
    } else {
        let j = i - total_a;
        Stage {
            down: true,
            pass: j / stages_b,
            k_stage: j % stages_b,
        }
    }
}

/// The fused expert path for gate/up type `G` and down type `D` (see the module doc); with `SD`
/// its Q2_0 products in the Q2_0 shared-d numerics.
///
/// # Safety
/// Parameters and buffers as `layout::FusedParams`; launched with `FUSED_THREADS` threads,
/// `FusedSmem::new(G, D, ffn, stages, NT).total` bytes of dynamic shared memory and one CTA per
/// tile of at most `32 NT` rows.
#[inline(always)]
unsafe fn experts<G: WeightBlock, D: WeightBlock, const NT: usize, const SD: bool>(
    p: &FusedParams,
) {
    // SAFETY: one tile per CTA.
    let tile = unsafe { *(p.tiles as *const MmqTile).add(ctaid_x() as usize) };
    if tile.n_cols == 0 {
        return; // a padding tile of a device-built list
    }
    let sm = FusedSmem::new(G::WTYPE, D::WTYPE, p.ffn as usize, p.stages as usize, NT);
    let base = smem_base();
    let sub_g = fused_sub_steps(G::WTYPE) as u32;
    // Clamped to 1 (the host never passes less): no division-by-zero path in the kernel.
    let stages_a = (p.hidden / (MMQ_KSTEP as u32 * sub_g)).max(1);
    let total_a = p.ffn / FUSED_FFN_PASS as u32 * stages_a;
    let stages_b = (p.ffn / MMQ_KSTEP as u32).max(1);
    let total = total_a + p.hidden / FUSED_ROWS as u32 * stages_b;
    let ns = p.stages.max(1);
    let buf_of = |i: u32| base + (i % ns) * sm.stage_bytes as u32;
    for i in 0..ns - 1 {
        if i < total {
            // SAFETY: stage buffer i; the kernel's contract covers the copies.
            unsafe {
                issue_stage::<G, D, NT>(
                    p,
                    &tile,
                    &sm,
                    buf_of(i),
                    stage_at(i, total_a, stages_a, stages_b),
                )
            };
        }
        cp_async_commit();
    }
    let tile_smem = base + sm.tile as u32;
    let scales = base + sm.scales as u32;
    let h_smem = base + sm.h as u32;
    let my_row = tid_x() / 2;
    let mut acc: Acc<NT> = [[[0.0; 4]; NT]; 4];
    let col_bytes = (FUSED_COL_UNIT * NT * Q8_1_MMQ_BYTES) as u32;
    for i in 0..total {
        // Stage i complete (at most ns - 2 younger groups pending), and visible to all; every
        // thread is past stage i - 1's decode and product, so its buffer and the tile are free.
        // (With one stage, stage i is issued below and waited for after the issue.)
        cp_async_wait(ns.saturating_sub(2));
        sync_threads();
        let next = i + ns - 1;
        if next < total {
            // SAFETY: buffer (i - 1) % ns, free (see above).
            unsafe {
                issue_stage::<G, D, NT>(
                    p,
                    &tile,
                    &sm,
                    buf_of(next),
                    stage_at(next, total_a, stages_a, stages_b),
                )
            };
        }
        if p.prefetch != 0 && next + 1 < total {
            // The stage after the one just issued: its weights in the L2 by the time its copies
            // are issued (a plain load on sm_75, a cp.async on sm_80+).
            // SAFETY: a stage of the tile's expert.
            unsafe {
                prefetch_stage::<G, D>(p, &tile, stage_at(next + 1, total_a, stages_a, stages_b))
            };
        }
        cp_async_commit();
        if ns == 1 {
            // One buffer: stage i was issued just now; wait for it here.
            cp_async_wait(0);
            sync_threads();
        }
        let st = stage_at(i, total_a, stages_a, stages_b);
        let buf = buf_of(i);
        let src = row_src::<G, D>(p, tile.expert, st, my_row);
        // SAFETY (both arms): stage i is in `buf`; barriers separate each decode from the
        // product before and after it.
        unsafe {
            if !st.down {
                for h in 0..sub_g {
                    if h > 0 {
                        sync_threads();
                    }
                    decode_step::<G>(&sm, base, buf, src, h);
                    sync_threads();
                    let acts = buf + sm.stage_acts as u32 + h * col_bytes;
                    mma_step::<G, NT, SD>(&mut acc, tile_smem, scales, acts, tile.n_cols);
                }
                if st.k_stage == stages_a - 1 {
                    swiglu_to_h(&acc, h_smem, st.pass, tile.n_cols);
                    acc = [[[0.0; 4]; NT]; 4];
                }
            } else {
                decode_step::<D>(&sm, base, buf, src, 0);
                sync_threads();
                let acts = h_smem + st.k_stage * col_bytes;
                mma_step::<D, NT, SD>(&mut acc, tile_smem, scales, acts, tile.n_cols);
                if st.k_stage == stages_b - 1 {
                    store_down(&acc, &tile, st.pass, p.dm, p.row_dst, p.hidden);
                    acc = [[[0.0; 4]; NT]; 4];
                }
            }
        }
    }
}

/// The body of a fused kernel: the down type and the width chosen by the parameters; with `SD`
/// (the `_sd` kernels) in the Q2_0 shared-d numerics, built only for the pairs with a Q2_0
/// product (for the others the variant is MMQ's numerics and the host runs the plain kernels).
///
/// # Safety
/// As `experts`.
#[inline(always)]
unsafe fn dispatch<G: WeightBlock, const NT: usize, const SD: bool>(p: &FusedParams) {
    if p.nt as usize != NT {
        return;
    }
    // Down types other than Q2_0 in a shared-d kernel: only behind a Q2_0 gate/up.
    let other_down = !SD || G::WTYPE == WType::Q2_0;
    // SAFETY: forwarded contract; a down type outside the three, or a pair the kernel is not
    // built for, launches nothing (the host's plan refuses it or runs another kernel first).
    unsafe {
        match WType::from_id(p.down_type) {
            Some(WType::Q2_0) => experts::<G, BlockQ2_0Dev, NT, SD>(p),
            Some(WType::Iq4Nl) if other_down => experts::<G, BlockIq4NlDev, NT, SD>(p),
            Some(WType::Q8_0) if other_down => experts::<G, BlockQ8_0, NT, SD>(p),
            _ => {}
        }
    }
}

macro_rules! fused_kernels {
    ($(($w:ident, $b:ident, $gate_up:ident, $down:ident, $fused:ident, $wide:ident,
        $pipe:ident, $narrow:ident, $pipe_sw:ident, $narrow_sw:ident, $flat:ident,
        $flat_sw:ident, $c16:ident, $c32:ident, $c64:ident, $fast16:ident, $fast32:ident,
        $resident:ident, $narrow_tma:ident, $fused_sd:ident, $wide_sd:ident, $flat_ws:ident)),* $(,)?) => {$(
        /// The fused expert path with this gate/up type, 32-row tiles (NT = 1); the down type
        /// (Q2_0, IQ4_NL or Q8_0) is `p.down_type`. See the module doc.
        ///
        /// # Safety
        /// As `experts`, with `p.nt` = 1.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $fused(p: FusedParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { dispatch::<$b, 1, false>(&p) }
        }

        /// As the 32-row kernel, with 64-row tiles (NT = 2): a kernel of its own, so that
        /// its larger register need does not lower the 32-row kernel's occupancy.
        ///
        /// # Safety
        /// As `experts`, with `p.nt` = 2.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $wide(p: FusedParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { dispatch::<$b, 2, false>(&p) }
        }

        /// The 32-row kernel in the Q2_0 shared-d numerics (its Q2_0 products; see `dispatch`
        /// for the down types it runs).
        ///
        /// # Safety
        /// As `experts`, with `p.nt` = 1.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $fused_sd(p: FusedParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { dispatch::<$b, 1, true>(&p) }
        }

        /// The 64-row kernel in the Q2_0 shared-d numerics.
        ///
        /// # Safety
        /// As `experts`, with `p.nt` = 2.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $wide_sd(p: FusedParams) {
            crate::ptx::grid_dependency_sync();
            // SAFETY: forwarded contract.
            unsafe { dispatch::<$b, 2, true>(&p) }
        }
    )*};
}

crate::for_each_format!(fused_kernels);
