//! The tune table `--path auto` picks from: per (gate/up type, down type, rows per routed
//! expert on a ladder), the measured ms of each expert stage on each product family - gate/up
//! on MMQ and on weight-stationary, swiglu_quant, down on MMQ and on weight-stationary, and the
//! fused path's expert stage(s). [`TuneTable::choice`] compares the cheapest split (cheapest
//! gate/up + swiglu_quant + cheapest down) with the fused path at any rows per routed expert,
//! interpolating between ladder points. The choice never changes bytes: every path gives the
//! reference's.
//!
//! `moe-prefill tune` measures a table (cli/tune/) and writes it in the text format of
//! `text.rs`; `key.rs` keys it by GPU, driver and build, finds it in the user's cache directory
//! and falls back to the built-in table (`tune_h200.txt`, measured on the H200).

pub mod key;
pub mod text;

use std::collections::BTreeMap;

use gpu::layout::WType;

use crate::moe::expert::split::Product;

pub use key::{TuneKey, Tuning};

/// The measured columns of an entry, in file order.
pub const COLUMNS: [&str; 6] = [
    "gate_up_mmq",
    "gate_up_ws",
    "swiglu_quant",
    "down_mmq",
    "down_ws",
    "fused",
];

/// Column indices into [`Times`].
pub const GATE_UP_MMQ: usize = 0;
pub const GATE_UP_WS: usize = 1;
pub const SWIGLU_QUANT: usize = 2;
pub const DOWN_MMQ: usize = 3;
pub const DOWN_WS: usize = 4;
pub const FUSED: usize = 5;

/// Milliseconds of one layer's expert stages at one ladder point, by [`COLUMNS`]; None where
/// not measured (a path not eligible for the pair, or not built when the table was made).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Times(pub [Option<f64>; 6]);

impl Times {
    /// The gate/up (`which` 0) or down (1) column of a product family.
    pub fn product(&self, which: usize, p: Product) -> Option<f64> {
        self.0[product_column(which, p)]
    }
}

/// The column of product `which` (0 gate/up, 1 down) on family `p`.
pub const fn product_column(which: usize, p: Product) -> usize {
    match (which, p) {
        (0, Product::Mmq) => GATE_UP_MMQ,
        (0, Product::Ws) => GATE_UP_WS,
        (_, Product::Mmq) => DOWN_MMQ,
        (_, Product::Ws) => DOWN_WS,
    }
}

/// A table of measurements keyed by GPU, driver and build.
#[derive(Clone, Debug, PartialEq)]
pub struct TuneTable {
    pub key: TuneKey,
    /// (gate/up type, down type, rows per routed expert) -> times.
    pub entries: BTreeMap<(WType, WType, usize), Times>,
}

/// What the table says for a run: the fused path or the split with `products` (the cheapest
/// split also when the fused path is cheaper, for a layer the fused path cannot run).
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub fused: bool,
    /// Gate/up and down product families of the cheapest split.
    pub products: [Product; 2],
    /// Estimated ms of the expert stages of the cheapest split and of the fused path, where
    /// the table has them.
    pub split_ms: Option<f64>,
    pub fused_ms: Option<f64>,
    /// The comparison in words: "1.234 ms vs fused 1.444 ms".
    pub why: String,
}

/// The name of a split for tables: "mmq", "ws", "ws+mmq" (gate/up first).
pub fn split_label(p: [Product; 2]) -> String {
    if p[0] == p[1] {
        p[0].path().name().to_string()
    } else {
        format!("{}+{}", p[0].path().name(), p[1].path().name())
    }
}

impl Choice {
    /// "fused" or the split's label.
    pub fn label(&self) -> String {
        if self.fused {
            "fused".into()
        } else {
            split_label(self.products)
        }
    }
}

impl TuneTable {
    pub fn new(key: TuneKey) -> Self {
        TuneTable {
            key,
            entries: BTreeMap::new(),
        }
    }

    /// The ladder points of a pair with the value of `column` there, ascending in rows.
    fn points(&self, g: WType, d: WType, column: usize) -> Vec<(usize, f64)> {
        self.entries
            .range((g, d, 0)..=(g, d, usize::MAX))
            .filter_map(|(&(_, _, rows), t)| t.0[column].map(|v| (rows, v)))
            .collect()
    }

    /// Whether the table has any entry for the pair.
    pub fn has_pair(&self, g: WType, d: WType) -> bool {
        self.entries
            .range((g, d, 0)..=(g, d, usize::MAX))
            .next()
            .is_some()
    }

    /// The largest ladder point of the pair (0 without entries).
    pub fn max_rows(&self, g: WType, d: WType) -> usize {
        self.entries
            .range((g, d, 0)..=(g, d, usize::MAX))
            .next_back()
            .map_or(0, |(k, _)| k.2)
    }

    /// The estimate of `column` at `rows` rows per routed expert: linear in log(rows) between
    /// the ladder points that have it, clamped to the first and last outside them.
    pub fn estimate(&self, g: WType, d: WType, column: usize, rows: usize) -> Option<f64> {
        interpolate(&self.points(g, d, column), rows)
    }

    /// The path and products the table picks for pair (`g`, `d`) at `rows` rows per routed
    /// expert: the cheapest split (gate/up and down each on their cheaper family, ties to MMQ,
    /// plus swiglu_quant) against the fused path (ties to the split). None when the table has
    /// neither a complete split nor the fused path for the pair.
    pub fn choice(&self, g: WType, d: WType, rows: usize) -> Option<Choice> {
        let est = |c| self.estimate(g, d, c, rows);
        let cheaper = |which: usize| -> Option<(Product, f64)> {
            let mmq = est(product_column(which, Product::Mmq));
            let ws = est(product_column(which, Product::Ws));
            match (mmq, ws) {
                (Some(m), Some(w)) if w < m => Some((Product::Ws, w)),
                (Some(m), _) => Some((Product::Mmq, m)),
                (None, Some(w)) => Some((Product::Ws, w)),
                (None, None) => None,
            }
        };
        let split = match (cheaper(0), est(SWIGLU_QUANT), cheaper(1)) {
            (Some((pg, g_ms)), Some(sq), Some((pd, d_ms))) => Some(([pg, pd], g_ms + sq + d_ms)),
            _ => None,
        };
        let fused_ms = est(FUSED);
        let (fused, products, why) = match (split, fused_ms) {
            (Some((p, s)), Some(f)) if f < s => (
                true,
                p,
                format!("{f:.3} ms vs {} {s:.3} ms", split_label(p)),
            ),
            (Some((p, s)), Some(f)) => (false, p, format!("{s:.3} ms vs fused {f:.3} ms")),
            (Some((p, s)), None) => (false, p, format!("{s:.3} ms, no fused figures")),
            (None, Some(f)) => (
                true,
                [Product::Mmq; 2],
                format!("{f:.3} ms, no complete split figures"),
            ),
            (None, None) => return None,
        };
        Some(Choice {
            fused,
            products,
            split_ms: split.map(|s| s.1),
            fused_ms,
            why,
        })
    }
}

/// Linear interpolation in log(rows) over `points` (ascending rows, all > 0), clamped outside.
fn interpolate(points: &[(usize, f64)], rows: usize) -> Option<f64> {
    let (first, last) = (points.first()?, points.last()?);
    if rows <= first.0 {
        return Some(first.1);
    }
    if rows >= last.0 {
        return Some(last.1);
    }
    let i = points.partition_point(|p| p.0 <= rows);
    let ((r0, v0), (r1, v1)) = (points[i - 1], points[i]);
    let ln = |r: usize| (r as f64).ln();
    let t = (ln(rows) - ln(r0)) / (ln(r1) - ln(r0));
    Some(v0 + t * (v1 - v0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> TuneKey {
        TuneKey {
            gpu: "Test GPU".into(),
            driver: "12080".into(),
            build: "0.1.0+0123456789abcdef".into(),
        }
    }

    const Q2: WType = WType::Q2_0;
    const IQ: WType = WType::Iq2Xxs;

    /// gate/up mmq, gate/up ws, swiglu, down mmq, down ws, fused.
    fn t(v: [Option<f64>; 6]) -> Times {
        Times(v)
    }

    fn table() -> TuneTable {
        let mut tt = TuneTable::new(key());
        // Fused cheapest at 10 rows, mmq+mmq at 40, ws gate/up + mmq down at 160.
        let e = &mut tt.entries;
        e.insert(
            (Q2, Q2, 10),
            t([
                Some(1.5),
                Some(1.6),
                Some(0.03),
                Some(0.8),
                Some(0.9),
                Some(1.4),
            ]),
        );
        e.insert(
            (Q2, Q2, 40),
            t([
                Some(1.6),
                Some(2.0),
                Some(0.06),
                Some(0.9),
                Some(1.0),
                Some(3.3),
            ]),
        );
        e.insert(
            (Q2, Q2, 160),
            t([
                Some(4.7),
                Some(4.0),
                Some(0.15),
                Some(2.7),
                Some(3.0),
                Some(10.4),
            ]),
        );
        tt
    }

    #[test]
    fn interpolates_in_log_rows_and_clamps() {
        let p = [(10, 1.0), (40, 3.0)];
        assert_eq!(interpolate(&p, 10), Some(1.0));
        assert_eq!(interpolate(&p, 1), Some(1.0));
        assert_eq!(interpolate(&p, 0), Some(1.0));
        assert_eq!(interpolate(&p, 40), Some(3.0));
        assert_eq!(interpolate(&p, 4000), Some(3.0));
        // 20 is halfway between 10 and 40 in log(rows).
        assert!((interpolate(&p, 20).unwrap() - 2.0).abs() < 1e-12);
        assert_eq!(interpolate(&[], 20), None);
        assert_eq!(interpolate(&[(5, 7.0)], 20), Some(7.0));
    }

    #[test]
    fn picks_the_cheapest_path_and_products() {
        let tt = table();
        let c = tt.choice(Q2, Q2, 10).unwrap();
        assert!(c.fused, "{c:?}");
        assert_eq!(c.label(), "fused");
        assert_eq!(c.products, [Product::Mmq; 2]);
        assert_eq!(c.why, "1.400 ms vs mmq 2.330 ms");
        let c = tt.choice(Q2, Q2, 40).unwrap();
        assert!(!c.fused);
        assert_eq!(c.label(), "mmq");
        assert_eq!(c.why, "2.560 ms vs fused 3.300 ms");
        let c = tt.choice(Q2, Q2, 160).unwrap();
        assert_eq!(c.label(), "ws+mmq");
        assert_eq!(c.products, [Product::Ws, Product::Mmq]);
        // Clamped above the ladder, fused below it.
        assert_eq!(tt.choice(Q2, Q2, 100_000).unwrap().label(), "ws+mmq");
        assert_eq!(tt.choice(Q2, Q2, 1).unwrap().label(), "fused");
        // Between 10 and 40 the crossing is where the interpolated lines meet: fused 1.4 ->
        // 3.3, split 2.33 -> 2.56; equal at t = 0.93 / 1.67 of the log span, 21.6 rows.
        assert!(tt.choice(Q2, Q2, 21).unwrap().fused);
        assert!(!tt.choice(Q2, Q2, 22).unwrap().fused);
        assert!(tt.choice(IQ, Q2, 10).is_none());
        assert!(tt.has_pair(Q2, Q2) && !tt.has_pair(IQ, Q2));
        assert_eq!(tt.max_rows(Q2, Q2), 160);
    }

    #[test]
    fn missing_columns_narrow_the_choice() {
        let mut tt = TuneTable::new(key());
        let none = [None; 6];
        // MMQ and fused only (the built-in table's shape): ws never picked.
        tt.entries.insert(
            (Q2, Q2, 40),
            t([Some(1.6), None, Some(0.06), Some(0.9), None, Some(3.3)]),
        );
        let c = tt.choice(Q2, Q2, 40).unwrap();
        assert_eq!((c.fused, c.products), (false, [Product::Mmq; 2]));
        // No swiglu figure: no split estimate, the fused path alone.
        tt.entries.insert(
            (IQ, Q2, 40),
            t([Some(1.0), Some(0.5), None, Some(0.9), None, Some(3.3)]),
        );
        let c = tt.choice(IQ, Q2, 40).unwrap();
        assert!(c.fused && c.split_ms.is_none(), "{c:?}");
        // No fused figure: the split, ws where cheaper.
        tt.entries.insert(
            (Q2, IQ, 40),
            t([Some(1.0), Some(0.5), Some(0.1), Some(0.9), None, None]),
        );
        let c = tt.choice(Q2, IQ, 40).unwrap();
        assert_eq!((c.fused, c.label()), (false, "ws+mmq".to_string()));
        assert_eq!(c.why, "1.500 ms, no fused figures");
        // Nothing usable.
        tt.entries.insert((IQ, IQ, 40), t(none));
        assert!(tt.choice(IQ, IQ, 40).is_none());
        // Ties go to MMQ and to the split.
        tt.entries.insert(
            (WType::Q8_0, Q2, 10),
            t([
                Some(1.0),
                Some(1.0),
                Some(0.0),
                Some(1.0),
                Some(1.0),
                Some(2.0),
            ]),
        );
        let c = tt.choice(WType::Q8_0, Q2, 10).unwrap();
        assert_eq!((c.fused, c.products), (false, [Product::Mmq; 2]));
    }
}
