//! The auto path's tests (expert/auto.rs): its decisions from a tuning table, its summary,
//! and where one decision holds for every row count.

use super::*;
use crate::moe::tune::{Times, TuneKey, TuneTable};

const Q2: WType = WType::Q2_0;
const IQ: WType = WType::Iq2Xxs;
const ALL: Allowed = Allowed {
    fused: true,
    mmq: true,
    ws: true,
};

fn tuning() -> Tuning {
    let mut t = TuneTable::new(TuneKey {
        gpu: "Test GPU".into(),
        driver: "1".into(),
        build: "b".into(),
    });
    let e = &mut t.entries;
    e.insert(
        (Q2, Q2, 10),
        Times([
            Some(1.5),
            Some(0.6),
            Some(0.03),
            Some(0.8),
            Some(0.9),
            Some(1.4),
        ]),
    );
    e.insert(
        (Q2, Q2, 40),
        Times([
            Some(1.6),
            Some(2.0),
            Some(0.06),
            Some(0.9),
            Some(1.0),
            Some(3.3),
        ]),
    );
    Tuning {
        table: t,
        source: "test table".into(),
        note: None,
    }
}

#[test]
fn decides_from_the_table() {
    let t = tuning();
    let d = decide(&t, Q2, Q2, 10, ALL);
    assert_eq!((d.fused, d.products), (true, [Product::Ws, Product::Mmq]));
    assert_eq!(
        d.why,
        "fused at 10 rows per routed expert: 1.400 ms vs ws+mmq 1.430 ms (table: test table)"
    );
    let no_fused = Allowed {
        fused: false,
        mmq: true,
        ws: true,
    };
    let d = decide(&t, Q2, Q2, 10, no_fused);
    assert_eq!(d.label(), "ws+mmq");
    assert_eq!(
        d.why,
        "ws+mmq at 10 rows per routed expert: 1.430 ms; the fused path cannot run this layer \
         (table: test table)"
    );
    let no_ws = Allowed {
        fused: false,
        mmq: true,
        ws: false,
    };
    assert_eq!(
        decide(&t, Q2, Q2, 10, no_ws).why,
        "mmq at 10 rows per routed expert: 1.430 ms; the fused path cannot run this layer; \
         weight-stationary products cannot run this layer (table: test table)"
    );
    let d = decide(&t, Q2, Q2, 40, ALL);
    assert_eq!(d.label(), "mmq");
    assert_eq!(
        d.why,
        "mmq at 40 rows per routed expert: 2.560 ms vs fused 3.300 ms (table: test table)"
    );
    // Between the ladder points: gate/up ws stays cheaper than mmq up to 26 rows, the
    // split overtakes the fused path from 12.
    assert_eq!(
        summary(&t, Q2, Q2, ALL),
        "fused at 1-11, ws+mmq at 12-26, mmq at 27+ rows per routed expert"
    );
    assert_eq!(
        summary(&t, Q2, Q2, no_fused),
        "ws+mmq at 1-26, mmq at 27+ rows per routed expert"
    );
}

#[test]
fn pairs_outside_the_table_take_the_built_in_rule() {
    let t = tuning();
    let d = decide(&t, IQ, Q2, 29, ALL);
    assert_eq!((d.fused, d.products), (false, [Product::Mmq; 2]));
    assert_eq!(
        d.why,
        "mmq at 29 rows per routed expert: iq2_xxs/q2_0 not in the table, built-in rule: mmq \
         (table: test table)"
    );
    assert_eq!(decide(&t, IQ, Q2, 1, ALL).label(), "mmq");
    let no_fused = Allowed {
        fused: false,
        mmq: true,
        ws: true,
    };
    assert_eq!(decide(&t, IQ, Q2, 1, no_fused).label(), "mmq");
    assert_eq!(summary(&t, IQ, Q2, ALL), "mmq at 1+ rows per routed expert");
    assert_eq!(
        summary(&t, IQ, Q2, no_fused),
        "mmq at 1+ rows per routed expert"
    );
}

#[test]
fn built_in_table_takes_mmq_at_every_row_count() {
    // The measured H200 table: the pipelined MMQ kernels beat the fused path everywhere.
    let t = Tuning::built_in("test");
    for (g, d) in crate::problem::GATE_UP_TYPES
        .iter()
        .flat_map(|&g| crate::problem::DOWN_TYPES.iter().map(move |&d| (g, d)))
    {
        assert_eq!(
            summary(&t, g, d, ALL),
            "mmq at 1+ rows per routed expert",
            "{g:?}/{d:?}"
        );
    }
    let d = decide(&t, Q2, Q2, 10, ALL);
    assert_eq!(
        d.why,
        "mmq at 10 rows per routed expert: 1.089 ms vs fused 1.331 ms (table: built-in \
         NVIDIA H200)"
    );
    // So every pair's choice is constant: auto reads no expert bounds back.
    let c = constant(&t, IQ, Q2, ALL).expect("constant");
    assert_eq!((c.fused, c.products), (false, [Product::Mmq; 2]));
    assert_eq!(
        c.why,
        "mmq at every row count (table: built-in NVIDIA H200)"
    );
}

#[test]
fn a_choice_that_varies_with_the_rows_is_not_constant() {
    let t = tuning();
    // Q2_0/Q2_0 changes with the rows in the test table; IQ2_XXS/Q2_0 is not in it.
    assert!(summary(&t, Q2, Q2, ALL).contains(", "));
    assert_eq!(constant(&t, Q2, Q2, ALL), None);
    let c = constant(&t, IQ, Q2, ALL).expect("built-in rule");
    assert_eq!(c.label(), "mmq");
    assert_eq!(c.why, "mmq at every row count (table: test table)");
}
