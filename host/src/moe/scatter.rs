//! Launchers of the scatter kernels (gpu/src/moe/scatter/): the one kernel of few rows, or the
//! chain of count, offsets, place, quantize and gather.
//! CPU twin: host/src/reference/scatter.rs.

use cudarc::driver::{CudaStream, LaunchConfig};
use gpu::layout::{
    CTA_SCAN_SMEM, MAX_EXPERTS, MMQ_BLOCK_VALUES, Q8_1_MMQ_BYTES, Q8_1_MMQ_PIECES,
    QUANT_BLOCK_THREADS, SCATTER_CHUNK, SCATTER_COUNT_THREADS, SCATTER_GATHER_MIN_ROWS,
    SCATTER_GATHER_PIECES, SCATTER_GATHER_THREADS, SCATTER_OFFSETS_THREADS, SCATTER_ONE_MAX_ROWS,
    SCATTER_PLACE_THREADS, SCATTER_PLACE_TOKENS, ScatterParams, padded_k, scatter_one_smem,
    scatter_place_smem,
};

use crate::device::{Gpu, KArg, MAX_GRID_X, SideJoin};
use crate::env;
use crate::error::{DriverOp, Result, shape};

/// Checks the scatter kernels' limits.
pub fn check(n_tokens: usize, top_k: usize, n_experts: usize, hidden: usize) -> Result<()> {
    if n_experts == 0 || n_experts > MAX_EXPERTS {
        return Err(shape(
            "moe_scatter: experts",
            n_experts,
            format!("1 to {MAX_EXPERTS}"),
        ));
    }
    if top_k == 0 || top_k > 32 {
        return Err(shape("moe_scatter: top-k", top_k, "1 to 32"));
    }
    if !hidden.is_multiple_of(4) || hidden == 0 {
        return Err(shape(
            "moe_scatter: hidden",
            hidden,
            "a positive multiple of 4",
        ));
    }
    // (The gather counts the rows' 16-byte pieces in 32 bits.)
    let max_rows = u32::MAX as usize / Q8_1_MMQ_PIECES;
    if n_tokens * top_k > max_rows || n_tokens > MAX_GRID_X {
        return Err(shape(
            "moe_scatter: rows (tokens x top-k)",
            n_tokens * top_k,
            format!("at most {max_rows}"),
        ));
    }
    Ok(())
}

/// Entries of the per-chunk count buffer.
pub fn chunk_counts_len(n_tokens: usize, n_experts: usize) -> usize {
    n_tokens.div_ceil(SCATTER_CHUNK).max(1) * n_experts
}

/// Bytes of the per-token q8_1 buffer (`ScatterParams::xt`) for `n_tokens` rows of `hidden`.
pub fn token_blocks_bytes(n_tokens: usize, hidden: usize) -> usize {
    padded_k(hidden) / MMQ_BLOCK_VALUES * n_tokens * Q8_1_MMQ_BYTES
}

/// Environment variable that overrides where the rows are gathered from a token buffer:
/// `auto` (the default: [`SCATTER_GATHER_MIN_ROWS`] rows and more), `always` or `never`. All
/// give the same bytes.
pub const GATHER_VAR: &str = "MOE_SCATTER_GATHER";

/// Environment variable that overrides where the scatter runs as one kernel
/// (`moe_scatter_one`): `auto` (the default: up to [`SCATTER_ONE_MAX_ROWS`] rows), `always` or
/// `never` (the chain at every run). All give the same bytes; `always` at many rows is slow (the
/// one kernel's work grows with the square of the rows).
pub const ONE_VAR: &str = "MOE_SCATTER_ONE";

/// Where a form of the scatter runs, by the run's rows: its rule (`Auto`), at every run, or at
/// none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RowsRule {
    #[default]
    Auto,
    Always,
    Never,
}

impl RowsRule {
    /// The variables' names, the default first.
    const NAMES: [(&str, RowsRule); 3] = [
        ("auto", RowsRule::Auto),
        ("always", RowsRule::Always),
        ("never", RowsRule::Never),
    ];

    /// From a value of environment variable `var` (`None`: unset, `Auto`); an unknown value is
    /// an error.
    pub fn parse(var: &str, v: Option<&str>) -> Result<RowsRule> {
        env::choice(var, v, &Self::NAMES)
    }

    /// From environment variable `var` (unset: `Auto`); an unknown value is an error.
    pub fn from_env(var: &str) -> Result<RowsRule> {
        env::choice_from_env(var, &Self::NAMES)
    }

    /// Whether the form runs at `n_rows` rows, `auto` being its rule.
    fn holds(self, n_rows: usize, auto: fn(usize) -> bool) -> bool {
        match self {
            RowsRule::Auto => auto(n_rows),
            RowsRule::Always => true,
            RowsRule::Never => false,
        }
    }
}

/// The scatter's form per run ([`GATHER_VAR`], [`ONE_VAR`]), read once per pipeline so that
/// its token buffer's size and every run agree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScatterForms {
    /// Where the chain gathers its rows from a token buffer ([`gather_rule`]).
    pub gather: RowsRule,
    /// Where one kernel does the whole scatter ([`one_rule`]); it comes before the gather.
    pub one: RowsRule,
}

impl ScatterForms {
    /// From `MOE_SCATTER_GATHER` and `MOE_SCATTER_ONE` (unset: `Auto`).
    pub fn from_env() -> Result<ScatterForms> {
        Ok(ScatterForms {
            gather: RowsRule::from_env(GATHER_VAR)?,
            one: RowsRule::from_env(ONE_VAR)?,
        })
    }

    /// Whether a run of `n_rows` rows is scattered by `moe_scatter_one` alone.
    pub fn one_kernel(self, n_rows: usize) -> bool {
        self.one.holds(n_rows, one_rule)
    }

    /// Whether a run of `n_rows` rows quantizes into the token buffer and gathers the rows from
    /// it (`ScatterParams::xt` set). Monotone in `n_rows` (the one kernel's rule takes the rows
    /// up to a bound, the gather's from one): a pipeline sized for its largest run has the token
    /// buffer of every run that gathers.
    pub fn gathers(self, n_rows: usize) -> bool {
        !self.one_kernel(n_rows) && self.gather.holds(n_rows, gather_rule)
    }

    /// The form of a run of `n_rows` rows, in words.
    pub fn name(self, n_rows: usize) -> &'static str {
        if n_rows == 0 {
            "the bounds alone (no rows)"
        } else if self.one_kernel(n_rows) {
            "one kernel"
        } else if self.gathers(n_rows) {
            "chain, rows gathered"
        } else {
            "chain"
        }
    }
}

/// The gather's `auto` rule: from [`SCATTER_GATHER_MIN_ROWS`] rows.
pub fn gather_rule(n_rows: usize) -> bool {
    n_rows >= SCATTER_GATHER_MIN_ROWS
}

/// The one kernel's `auto` rule: up to [`SCATTER_ONE_MAX_ROWS`] rows.
pub fn one_rule(n_rows: usize) -> bool {
    n_rows <= SCATTER_ONE_MAX_ROWS
}

/// Queues the scatter: where `forms` take [one kernel](ScatterForms::one_kernel) at this run's
/// rows, `moe_scatter_one`; else the chain: count, offsets, place and quantize, and where `forms`
/// [gather](ScatterForms::gathers), the gather (else `p.xt` is cleared and the quantizer writes
/// the rows). `p` holds the device addresses of every buffer; the caller (moe::prefill) sized
/// them for `n_tokens`.
///
/// Where the run gathers, the quantizer reads only `x` and writes only `xt`: it runs on the side
/// stream (`Gpu::side`) beside count, offsets and place, and the gather follows it there once
/// place is done. The returned [`SideJoin`] must be joined before anything reads `xq`; the main
/// stream may queue other work before it joins (the tile list, which reads only the bounds).
///
/// # Safety
/// Every pointer in `p` must be a live device buffer of the size `gpu::layout::ScatterParams`
/// describes for `p.n_tokens`, `p.top_k`, `p.n_experts`, `p.hidden` (`xt` only where the run
/// gathers); ids valid (below n_experts, distinct per token).
pub unsafe fn launch(gpu: &Gpu, mut p: ScatterParams, forms: ScatterForms) -> Result<SideJoin<'_>> {
    check(
        p.n_tokens as usize,
        p.top_k as usize,
        p.n_experts as usize,
        p.hidden as usize,
    )?;
    let n_rows = p.n_tokens as usize * p.top_k as usize;
    let gather = forms.gathers(n_rows);
    if !gather {
        p.xt = 0;
    }
    let n_chunks = (p.n_tokens as usize).div_ceil(SCATTER_CHUNK);
    let smem = 4 * p.n_experts;
    let arg = KArg(p);
    let k = &gpu.kernels;
    let s = &gpu.stream;
    if p.n_tokens == 0 {
        // Only the (all-zero) expert bounds.
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (SCATTER_OFFSETS_THREADS as u32, 1, 1),
            shared_mem_bytes: CTA_SCAN_SMEM as u32,
        };
        // SAFETY: with no tokens the kernel only writes n_experts + 1 bounds.
        unsafe { gpu.launch(s, &k.moe_scatter_offsets, cfg, &arg) }
            .op("launch moe_scatter_offsets")?;
        return Ok(SideJoin::none());
    }
    let cfg = |grid: (u32, u32, u32), threads: u32, smem: u32| LaunchConfig {
        grid_dim: grid,
        block_dim: (threads, 1, 1),
        shared_mem_bytes: smem,
    };
    if forms.one_kernel(n_rows) {
        // SAFETY: buffers sized by the caller per ScatterParams (`chunk_counts` and `xt`
        // unused); a CTA per token with the shared memory the kernel's doc gives.
        unsafe {
            gpu.launch(
                s,
                &k.moe_scatter_one,
                cfg(
                    (p.n_tokens, 1, 1),
                    QUANT_BLOCK_THREADS as u32,
                    scatter_one_smem(p.n_experts as usize, p.top_k as usize) as u32,
                ),
                &arg,
            )
        }
        .op("launch moe_scatter_one")?;
        return Ok(SideJoin::none());
    }
    let n_kc = (padded_k(p.hidden as usize) / MMQ_BLOCK_VALUES) as u32;
    let pieces = n_rows * Q8_1_MMQ_PIECES;
    let gather_ctas = pieces.div_ceil(SCATTER_GATHER_THREADS * SCATTER_GATHER_PIECES) as u32;
    let quantize = |st: &CudaStream| {
        // SAFETY: buffers sized by the caller per ScatterParams; a CTA per token. With `xt` it
        // reads `x` only and writes `xt` only.
        unsafe {
            gpu.launch(
                st,
                &k.moe_scatter_quantize,
                cfg((p.n_tokens, 1, 1), QUANT_BLOCK_THREADS as u32, 0),
                &arg,
            )
        }
        .op("launch moe_scatter_quantize")
    };
    let side = if gather {
        let side = gpu.side.fork(s)?;
        quantize(&gpu.side.stream)?;
        side
    } else {
        SideJoin::none()
    };
    // SAFETY (every launch): buffers sized by the caller per ScatterParams; grids as the kernels'
    // docs require.
    unsafe {
        gpu.launch(
            s,
            &k.moe_scatter_count,
            cfg((n_chunks as u32, 1, 1), SCATTER_COUNT_THREADS as u32, smem),
            &arg,
        )
        .op("launch moe_scatter_count")?;
        gpu.launch(
            s,
            &k.moe_scatter_offsets,
            cfg(
                (1, 1, 1),
                SCATTER_OFFSETS_THREADS as u32,
                CTA_SCAN_SMEM as u32,
            ),
            &arg,
        )
        .op("launch moe_scatter_offsets")?;
        gpu.launch(
            s,
            &k.moe_scatter_place,
            cfg(
                (
                    (p.n_tokens as usize).div_ceil(SCATTER_PLACE_TOKENS) as u32,
                    1,
                    1,
                ),
                SCATTER_PLACE_THREADS as u32,
                scatter_place_smem(p.n_experts as usize, p.top_k as usize) as u32,
            ),
            &arg,
        )
        .op("launch moe_scatter_place")?;
    }
    if !gather {
        quantize(s)?;
        return Ok(side);
    }
    // The gather reads place's row_token and the quantizer's xt.
    side.side_waits_main()?;
    // SAFETY: as above; both of its inputs are ordered before it on the side stream.
    unsafe {
        gpu.launch(
            &gpu.side.stream,
            &k.moe_scatter_gather,
            cfg((gather_ctas, n_kc, 1), SCATTER_GATHER_THREADS as u32, 0),
            &arg,
        )
    }
    .op("launch moe_scatter_gather")?;
    Ok(side)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_the_forms_rules() {
        assert!(check(16_384, 10, 512, 2560).is_ok());
        assert!(check(1, 0, 512, 2560).is_err());
        assert!(check(1, 33, 512, 2560).is_err());
        assert!(check(1, 10, 0, 2560).is_err());
        assert!(check(1, 10, MAX_EXPERTS + 1, 2560).is_err());
        assert!(check(1, 10, 512, 2562).is_err());
        // The gather's 32-bit piece count: 9 pieces per row.
        let max_rows = u32::MAX as usize / 9;
        assert!(check(max_rows, 1, 512, 2560).is_ok());
        let e = check(max_rows + 1, 1, 512, 2560).unwrap_err().to_string();
        assert!(e.contains("rows"), "{e}");
        // The reference shape: one kernel up to T = 819 (8,190 rows), then the chain, which
        // gathers from T = 410 (4,100 rows).
        assert!(!gather_rule(409 * 10) && gather_rule(410 * 10));
        assert!(one_rule(819 * 10) && !one_rule(820 * 10));
        let forms = |g: &str, o: &str| ScatterForms {
            gather: RowsRule::parse(GATHER_VAR, Some(g)).unwrap(),
            one: RowsRule::parse(ONE_VAR, Some(o)).unwrap(),
        };
        let auto = ScatterForms::default();
        assert_eq!(auto, forms("auto", "auto"));
        for n in [0, 1, 4095, 4096, 8192, 8193, 163_840] {
            assert_eq!(auto.one_kernel(n), one_rule(n));
            assert_eq!(auto.gathers(n), !one_rule(n) && gather_rule(n));
            assert_eq!(forms("auto", "never").gathers(n), gather_rule(n));
            assert!(!forms("auto", "never").one_kernel(n));
            assert!(forms("never", "always").one_kernel(n));
            assert!(!forms("always", "always").gathers(n));
            assert_eq!(forms("always", "auto").gathers(n), !one_rule(n));
            assert!(!forms("never", "never").gathers(n));
        }
        // Gathering is monotone in the rows under every setting (the token buffer's size).
        for g in ["auto", "always", "never"] {
            for o in ["auto", "always", "never"] {
                let f = forms(g, o);
                let n = [0, 4095, 4096, 8192, 8193, 163_840];
                assert!(n.windows(2).all(|w| !f.gathers(w[0]) || f.gathers(w[1])));
            }
        }
        let e = RowsRule::parse(GATHER_VAR, Some("sometimes"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(GATHER_VAR) && e.contains("sometimes"), "{e}");
        assert_eq!(token_blocks_bytes(512, 2560), 20 * 512 * 144);
        // Rows padded to 512 values (ggml's MATRIX_ROW_PADDING): 4 blocks.
        assert_eq!(token_blocks_bytes(3, 100), 3 * 4 * 144);
    }
}
