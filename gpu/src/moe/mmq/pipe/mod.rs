//! The pipelined MMQ products `moe_mmq_pipe_<type>` and `moe_mmq_narrow_<type>` (either
//! product: gate/up or down): the numerics and output of the classic kernel
//! (gpu/src/moe/mmq/mod.rs), with the copies and the decode taken off the critical path, in
//! three shapes (`layout::MmqPipeShape`, gpu/src/layout/mmq_pipe/shape.rs): wide (64 columns, the
//! classic kernel's tile and warp layout), narrow (16 columns, each warp on 16 weight rows;
//! three CTAs per SM where the type's layout fits) and tall (64 columns, each warp on 16 weight
//! rows; `moe_mmq_pipe_<type>` of the types `MmqPipeShape::wide_of` names, the wide shape
//! for the others).
//!
//! - Copies (copy/mod.rs, copy/warp.rs): each K step's activation D4 blocks and raw weight
//!   stage (the weight rows' bytes of 128, 256 or 512 K values: `MmqPipeShape::stage_steps`, in
//!   16-byte windows), `MmqPipeSmem::lead` K steps ahead, into rings of their own (a weight
//!   stage is free once decoded, activations once multiplied): the activations in bulk copies
//!   on transaction barriers on sm_90, 16-byte `cp.async` below; the weights in 16-byte
//!   `cp.async` pieces (on sm_90 the narrow kernel's warps each copy their own rows' and wait
//!   with a warp barrier only: regs.rs; in `moe_mmq_narrow_tma_<type>` each warp's first lane
//!   copies them by tensor copies, and in the 128-row and flat kernels with the SwiGLU
//!   epilogue one thread copies the stage so, where the host gives the maps: copy/).
//! - Decode (tiles.rs): two decoded tiles (int8 weights, weight scales, activation scales). While the
//!   warps multiply K step j from one, they decode step j + 1 into the other: one barrier per
//!   K step, and a warp's decode overlaps the other warps' `mma`s.
//! - Scales: each tile keeps the weight scales `[group][half][row]` and the activation scales
//!   `[group][column]`, both permuted (`MmqPipeShape::row_slot` / `col_slot`) so that a lane
//!   loads its row scales in one 16-byte (narrow: 8-byte) load and its column scales in two
//!   (narrow: one) 16-byte loads (the classic kernel issues 24 scalar loads per group).
//! - Columns: an 8-column `mma` tile with no live column is skipped (warp-uniform); at 10 rows
//!   per expert half the wide shape's warps have no work in the product at all.
//! - Decode into registers (regs.rs): the narrow and tall shapes decode every type straight
//!   into each warp's A fragments in its products (`MmqPipeShape::in_registers`), with no
//!   decoded tiles: every warp owns its 16 rows, so nothing is decoded twice.
//! - Lookup tables: the grid types' grids (and IQ2_XXS / IQ2_XS / IQ3_XXS's sign table) are
//!   copied into shared memory in the prologue (`Cta::copy_tables`, `MmqPipeSmem::tables`) and
//!   every decode looks them up there (`formats::SharedTables`).
//!
//! - Resident form (resident.rs, sm_90: the narrow kernel without the epilogue as a kernel of
//!   its own, `moe_mmq_resident_<type>`, `MmqParams::resident` row tiles a CTA): the tile's
//!   whole K copied once by bulk copies, warp by warp, the next row tile's rows while the
//!   warp multiplies, and a K loop without CTA barriers (the down product at the reference
//!   shape).
//!
//! - Warp-specialized flat form (sm_90: the flat kernel without the epilogue as a kernel of its
//!   own, `moe_mmq_flat_ws_<type>`, ws.rs): 8 warps multiply, `MMQ_WS_PRODUCER_WARPS` more copy
//!   and decode, the decoded tiles handed over on `mbarrier`s (opt-in on the host: `MOE_MMQ_FLAT_WS=on`).
//!
//! - SwiGLU epilogue (`moe_mmq_(pipe|narrow)_swiglu_<type>`, gate/up only; swiglu.rs): the tile's
//!   rows are gate and up rows of the same 64 features, interleaved by 8 (`Cta::row_addr`), so
//!   each lane holds gate and up of its outputs and the CTA writes H = q8_1(swiglu(gate, up))
//!   instead of gate and up: the `moe_swiglu_quant` launch and the f32 round trip are gone.
//!
//! Numerics: MMQ's exactly (`gpu::quant::mmq_step_32_magic` / `mmq_step_16_cvt`, the same values
//! as `mmq_step_16_magic`, in ascending K), so the bytes equal the classic kernel's and the CPU
//! reference's; the epilogue is
//! `moe_swiglu_quant`'s (`gpu::quant::swiglu`, the q8_1 rule), so H's bytes are its bytes.
//! Launcher: host/src/moe/expert/split/launch.rs (chosen where the device has the shared memory).

mod copy;
mod cta;
mod regs;
#[cfg(gpu_sm90)]
mod resident;
mod swiglu;
mod tiles;
#[cfg(gpu_sm90)]
mod ws;

#[cfg(gpu_sm90)]
pub use resident::mmq_resident;
#[cfg(gpu_sm90)]
pub use ws::mmq_flat_ws;

use cta::{Cta, weight_row};

use crate::formats::WeightBlock;
use crate::layout::{MMQ_KSTEP, MMQ_SMEM_ROW, MmqParams, MmqPipeShape, MmqPipeSmem, MmqTile};
use crate::ptx::{ld_shared_v4_u32, smem_base};

const ROW: u32 = MMQ_SMEM_ROW as u32;

/// Loads 4 f32 from a 16-byte aligned shared address.
///
/// # Safety
/// As `ld_shared_v4_u32`.
#[inline(always)]
unsafe fn ld4(addr: u32) -> [f32; 4] {
    // SAFETY: forwarded contract.
    let v = unsafe { ld_shared_v4_u32(addr) };
    [
        f32::from_bits(v[0]),
        f32::from_bits(v[1]),
        f32::from_bits(v[2]),
        f32::from_bits(v[3]),
    ]
}

/// The pipelined product for weight format `B`, the narrow shape, the flat one or `B`'s
/// 64-column one (`MmqPipeShape::wide_of`; see the module doc);
/// with `SWIGLU` the gate/up product with the SwiGLU + q8_1 epilogue (swiglu.rs); with `TMA`
/// built with tensor copies of the weight stages (copy/mod.rs's `tma_here`: the 128-row and flat
/// shapes where the host gives the maps, the narrow shape always).
///
/// # Safety
/// Parameters and buffers as `layout::MmqParams` describes, with the weight buffers readable
/// 16 bytes past their ends; launched with `MMQ_THREADS` threads,
/// `MmqPipeSmem::of(B::WTYPE, shape).total` bytes of dynamic shared memory, one CTA per tile
/// (of at most `shape.cols()` columns) along x and `n / shape.rows()` along y (taken in
/// `p.order`); `k` a multiple of the type's own stage (`128 fused_sub_steps`; a longer stage,
/// `MmqPipeShape::stage_steps`, may end past `k`: its rows' copies stop there). With `SWIGLU`:
/// as `swiglu::store` requires. The narrow shape with `TMA`: `p.wmap0` (and `p.wmap1` where
/// some row lies in `w1`) the maps `layout::MmqTmaMap::of` gives for it (a CTA without them
/// returns without writing).
#[inline(always)]
pub unsafe fn mmq_pipe<
    B: WeightBlock,
    const NARROW: bool,
    const FLAT: bool,
    const SWIGLU: bool,
    const TMA: bool,
>(
    p: &MmqParams,
) {
    let shape = if NARROW {
        MmqPipeShape::Narrow
    } else if FLAT {
        MmqPipeShape::Flat
    } else {
        MmqPipeShape::wide_of(B::WTYPE)
    };
    let (tx, ty) = cta::grid_coords(p);
    // SAFETY: one tile per CTA along x (tx < nctaid.x).
    let tile = unsafe { *(p.tiles as *const MmqTile).add(tx as usize) };
    if tile.n_cols == 0 {
        return; // a padding tile of a device-built list
    }
    let row0 = ty * shape.rows() as u32;
    let (wbase, ubase, first_row) = if SWIGLU {
        // Gate rows f0.., up rows n / 2 + f0.. (gate and up halves of the product's rows).
        let f0 = ty * shape.swiglu_features() as u32;
        (
            weight_row(p, tile.expert, f0),
            weight_row(p, tile.expert, p.n / 2 + f0),
            f0,
        )
    } else {
        let w = weight_row(p, tile.expert, row0);
        (w, w, row0)
    };
    let c = Cta {
        tile,
        row_tile: ty,
        shape,
        wbase,
        ubase,
        swiglu: SWIGLU,
        row_bytes: p.row_bytes,
        first_row,
        tma: copy::tma_here(p, shape, TMA),
        sm: MmqPipeSmem::of(B::WTYPE, shape),
        base: smem_base(),
        // Every lane of every warp here (`weight_policy`'s contract).
        #[cfg(gpu_sm90)]
        policy: copy::weight_policy(p),
    };
    if NARROW && TMA && !copy::maps_given(p) {
        return; // launched without the maps it needs (the host's error): nothing written
    }
    let nk = p.k / MMQ_KSTEP as u32;
    let lead = c.sm.lead as u32;
    if lead == 0 {
        // A type whose layout has no room for a lead (MmqPipeSmem::of): the host runs another
        // kernel for it and never launches this one.
        return;
    }
    // SAFETY: every thread, before any copy.
    unsafe { copy::setup(&c) };
    // SAFETY: every thread; the type's layout. Visible after the K loop's first barrier,
    // before any decode.
    unsafe { c.copy_tables(B::WTYPE) };
    // The warp's eight fragments (`MmqPipeShape::acc_slot`).
    let mut acc = [[[0.0f32; 4]; 4]; 2];
    if shape.in_registers() {
        // SAFETY: every thread, nothing issued; a register-decoding layout (the loop issues its
        // lead itself).
        // (The tall loop as its own instance, `TALL` from the kernel's const parameter, so that
        // the narrow kernels are compiled as before it existed.)
        unsafe {
            if NARROW {
                regs::k_loop::<B, false>(p, &c, nk, &mut acc)
            } else {
                regs::k_loop::<B, true>(p, &c, nk, &mut acc)
            }
        };
    } else {
        // SAFETY: every thread, nothing issued; the decoded tiles of this layout.
        unsafe { tiles::k_loop::<B>(p, &c, nk, &mut acc) };
    }
    // SAFETY: the kernel's contract.
    unsafe {
        if SWIGLU {
            swiglu::store(p, &c, &acc)
        } else {
            super::store(p, &tile, row0, &acc, shape)
        }
    }
}
