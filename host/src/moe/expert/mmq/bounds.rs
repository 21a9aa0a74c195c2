//! The MMQ kernels' bounds of rows per expert under `MmqChoice::Auto` (expert/mmq.rs's
//! `MmqKernels::for_run`): where each product takes narrow tiles (streamed, resident, and the
//! gate/up product's per type) and where flat ones, each measured on the H200.

use gpu::layout::{MMQ_FLAT_COLS, MmqPipeShape, WType};

#[cfg(doc)]
use super::{MmqChoice, MmqKernels};

/// Runs with at most this many rows per expert on average (`n_rows / n_experts`) take narrow
/// tiles under `MmqChoice::Auto` (T = 512 at the reference shape: 10), for a streamed down
/// product and for the gate/up product below sm_90 (on sm_90 its type's
/// [`gate_up_narrow_max_rows`]). Above it an expert's rows span several narrow tiles, and each
/// decodes the expert's weights again.
pub const NARROW_MAX_ROWS_PER_EXPERT: usize = 12;

/// The same bound for a product whose narrow kernel runs in its resident form
/// ([`MmqKernels::resident`]: the tile's whole K copied once, no CTA barrier in its K loop).
/// Measured on the H200 (BENCHMARKS.md), the Q2_0 down product at the reference shape on
/// narrow resident tiles (four row tiles a CTA) against the wide kernel: 0.419 / 0.450 ms at
/// 40 rows per expert (T = 2,048), 0.513 / 0.498 at 50. IQ4_NL's down product takes
/// [`NARROW_RESIDENT_MAX_ROWS_IQ4_NL`].
pub const NARROW_RESIDENT_MAX_ROWS_PER_EXPERT: usize = 40;

/// The bound of rows per expert for the gate/up product of weight type `w` on a module with
/// bulk copies (sm_90, where the narrow kernel's K loop is warp-private), by tensor copies
/// (`tma`: `moe_mmq_narrow_tma_<type>`, where the layer has the narrow maps) or by pieces: each
/// narrow tile decodes the expert's rows again, so past some rows per expert the wide kernel
/// wins, and where depends on the type's decode. Measured on the H200 at the reference shape
/// (BENCHMARKS.md, the twenty-sixth session: the layer at 12.5, 15, 17.5, 20, 22.5, 25 and 30
/// rows per expert, narrow against wide): the bound is the last point at which narrow tiles
/// were faster, or the crossover between two points where they split.
pub fn gate_up_narrow_max_rows(w: WType, tma: bool) -> usize {
    match (w, tma) {
        // 25 rows: -3.8 %; 30: +0.8 %. By pieces -6 % still at 20 (not measured further).
        (WType::Q2_0, true) => 28,
        (WType::Q2_0, false) => 20,
        // 17.5 rows: -0.5 % (by pieces +0.4 %); 20: +4.6 %.
        (WType::Iq4Nl, true) => 18,
        (WType::Iq4Nl, false) => 17,
        // 12.5 rows: -12 %, 15: -1.5 %, 17.5: +10 %. By pieces +7 % at 12.5.
        (WType::Q8_0, true) => 15,
        (WType::Q8_0, false) => NARROW_MAX_ROWS_PER_EXPERT,
        // 12.5 rows: -10 %, 15: -1 %, 17.5: +8 %.
        (WType::Iq2Xxs, _) => 15,
        // 12.5 rows: -3 to -5 %; 15: +4 to +6 %.
        (WType::Iq2Xs | WType::Iq2S | WType::Iq3S, _) => 13,
        // 12.5 rows: -1 %; 15: +9 %.
        (WType::Iq3Xxs, _) => NARROW_MAX_ROWS_PER_EXPERT,
    }
}

/// [`NARROW_RESIDENT_MAX_ROWS_PER_EXPERT`] for IQ4_NL, whose wide kernel overtakes the resident
/// narrow one sooner (its rows take one weight buffer: `MmqResidentSmem::wbufs`). Measured on
/// the H200 (the down product at the reference shape, narrow resident / wide, ms): 0.446 /
/// 0.470 at 30 rows per expert, 0.564 / 0.520 at 40; the two meet near 33.
pub const NARROW_RESIDENT_MAX_ROWS_IQ4_NL: usize = 32;

/// With the flat products' tails in their flat tiles (`MmqTails::Off`; the default's bound is
/// [`FLAT_TAILS_MIN_ROWS`]), a product whose type decodes through shared tiles
/// (`MmqPipeShape::wide_of` wide: Q2_0, IQ4_NL, IQ2_XXS, IQ2_XS, IQ2_S) takes the flat kernel
/// (64 weight rows x 128 columns a CTA) under `MmqChoice::Auto` from this many rows per expert
/// on average, where an average
/// expert's last 128-column tile is at least half full ([`flat_pays`]). Measured on the H200
/// (BENCHMARKS.md; the reference shape, flat against wide, each product's stage), uniform
/// routing: 55 and 65 rows per expert slower, 70 to 120 faster (-2 to -9 %), 160 slower (32
/// columns in the last tile: Q2_0 gate/up +3 %, down +9 %), 200 and 240 faster (-4 to -9 %),
/// 280 slower (24 columns: the Q2_0 layer +2 %), 320 faster; skewed routing (lognormal sigma
/// 1.0), where many experts have few rows and a few many: 80 to 120 slower (Q2_0's down +6 to
/// +14 %, its gate/up up to +8 %), 200 even to faster (-4 %), 240 and 320 faster (-3 to -10 %).
/// So from 192, where both routings gain (128 + 64 columns: the last tile half full).
pub const FLAT_MIN_ROWS_PER_EXPERT: usize = 192;

/// With the tails in the flat tiles (`MmqTails::Off`), a product whose type decodes into
/// registers in its 64-column kernel (the tall shape: IQ3_S, IQ3_XXS, Q8_0) takes the flat
/// kernel from this many rows per expert on average, whatever
/// its last tile's fill: the tall kernel decodes each weight value once per 64 columns, the
/// flat one once per 128 through shared tiles. Measured on the H200 (BENCHMARKS.md; flat
/// against tall, each product's stage), uniform routing: 55 rows per expert slower (IQ3_S
/// gate/up +11 %, Q8_0 down +14 %), 65 to 320 faster (-5 to -24 %); skewed routing: 80 slower
/// (Q8_0 gate/up +6 %, IQ3_S's +1 %), 90 mixed (+4 %, -1 %), 100 even (+1 %, -3 %; Q8_0 down
/// -5 %), 120 to 320 faster (-2 to -24 %). So from 100.
pub const FLAT_MIN_ROWS_TALL: usize = 100;

/// Where each flat product's tails run on the wide kernel (`MmqTails::Wide`, the default: an
/// expert's last tile of at most 64 columns, so no flat tile is less than half full), the
/// gate/up product (`[0]`) and the down product (`[1]`) take flat tiles under
/// `MmqChoice::Auto` from this many rows per expert on average, whatever their types. Measured
/// on an H100 (BENCHMARKS.md, the forty-third session: Q2_0 / Q2_0, IQ2_S / IQ4_NL and
/// IQ3_S / IQ4_NL at 40 to 320 rows per expert, uniform and skewed routing, each product's
/// stage, flat tiles with their tails against the kernels `Auto` took without them): gate/up
/// at 40 and 50 rows per expert -4 to +3 %, at 60 -1 to -7 %, from 70 on -0 to -13 %; down at
/// 40 and 50 +4 to +24 %, at 60 +1 to +5 %, at 70 -3 to +2 % (Q2_0 slower), at 80 -5 to +1 %
/// (Q2_0 skewed slower), from 120 on -0 to -8 %.
pub const FLAT_TAILS_MIN_ROWS: [usize; 2] = [60, 80];

/// Whether product `which` (0 gate/up, 1 down) of type `w` takes flat tiles under
/// `MmqChoice::Auto` for a run of `n_rows` rows over `n_experts` experts. With `tails` (its
/// tails on the wide kernel): from [`FLAT_TAILS_MIN_ROWS`] rows per expert on average. Without:
/// from [`FLAT_MIN_ROWS_TALL`] for the tall types, from [`FLAT_MIN_ROWS_PER_EXPERT`] for the
/// others where the average expert's last 128-column tile is at least half full.
pub fn flat_pays(w: WType, which: usize, n_rows: usize, n_experts: usize, tails: bool) -> bool {
    let r = n_rows / n_experts.max(1);
    if tails {
        return r >= FLAT_TAILS_MIN_ROWS[which.min(1)];
    }
    if MmqPipeShape::wide_of(w) == MmqPipeShape::Tall {
        return r >= FLAT_MIN_ROWS_TALL;
    }
    let last = r % MMQ_FLAT_COLS;
    r >= FLAT_MIN_ROWS_PER_EXPERT && (last == 0 || 2 * last >= MMQ_FLAT_COLS)
}

/// The bound of rows per expert up to which a product of type `w` takes narrow resident tiles.
pub const fn narrow_resident_max_rows(w: WType) -> usize {
    match w {
        WType::Iq4Nl => NARROW_RESIDENT_MAX_ROWS_IQ4_NL,
        _ => NARROW_RESIDENT_MAX_ROWS_PER_EXPERT,
    }
}
