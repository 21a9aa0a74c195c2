//! `moe_expert_tiles`: the work list of an expert-row product built on the device from the
//! scatter's expert bounds, so that the layer needs no host round trip between the scatter and
//! the products (launcher: host/src/moe/expert/tiles.rs; the host's list, which it equals:
//! `tiles_from_bounds` there). One CTA of `EXPERT_TILES_THREADS` threads: experts 1,024 at a
//! time, a thread per expert, its tiles placed by a CTA prefix sum of the tile counts; the
//! slots past the last tile get tiles of no rows. With `p.tail > 0` the list without each
//! expert's tail, or the tails alone (`layout::expert_tile_range`).

use crate::layout::{ExpertTilesParams, MmqTile, expert_tile_range};
use crate::moe::scan::cta_exclusive_scan;
use crate::ptx::{ntid_x, smem_base, tid_x};

/// See the module doc.
///
/// # Safety
/// `p.bounds` holds `n_experts + 1` non-decreasing entries; `p.tiles` holds `n_slots` tiles;
/// `width > 0`; one CTA of a multiple of 32 threads (at most 1,024) with
/// `layout::CTA_SCAN_SMEM` bytes of dynamic shared memory.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn moe_expert_tiles(p: ExpertTilesParams) {
    crate::ptx::grid_dependency_sync();
    let tiles = p.tiles as *mut MmqTile;
    // Clamped to 1 (the host never passes 0): no division-by-zero path in the kernel.
    let width = p.width.max(1);
    let bounds = p.bounds as *const u32;
    let put = |slot: u32, t: MmqTile| {
        if slot < p.n_slots {
            // SAFETY: slot < n_slots: inside the tile buffer.
            unsafe { *tiles.add(slot as usize) = t };
        }
    };
    let mut base = 0u32;
    let mut e0 = 0u32;
    while e0 < p.n_experts {
        let e = e0 + tid_x();
        let (start, rows) = if e < p.n_experts {
            // SAFETY: e + 1 <= n_experts: inside the bounds.
            unsafe {
                let b = *bounds.add(e as usize);
                (b, (*bounds.add(e as usize + 1)).saturating_sub(b))
            }
        } else {
            (0, 0)
        };
        let (first, n) = expert_tile_range(rows, width, p.tail, p.part);
        // SAFETY: e0 is the same in every thread, so every thread calls it; the dynamic shared
        // memory is its scratch.
        let (before, total) = unsafe { cta_exclusive_scan(n, smem_base()) };
        for i in 0..n {
            let j = first + i;
            put(
                base + before + i,
                MmqTile {
                    expert: e,
                    col_start: start + j * width,
                    n_cols: (rows - j * width).min(width),
                    _pad: 0,
                },
            );
        }
        base += total;
        e0 += ntid_x();
    }
    let mut slot = base + tid_x();
    while slot < p.n_slots {
        put(
            slot,
            MmqTile {
                expert: 0,
                col_start: 0,
                n_cols: 0,
                _pad: 0,
            },
        );
        slot += ntid_x();
    }
}
