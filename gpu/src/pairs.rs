//! The packed-pair integer arithmetic of the weight-stationary kernels (gpu/src/moe/ws/),
//! compiled for both sides so that its exactness is tested on the host.
//!
//! Two activation rows' int8 values of the same K index go into one word
//! `x0 + x1 * 2^WS_PAIR_SHIFT`; one `mad.wide.s32` of a weight `w` with it adds
//! `w x0 + 2^20 w x1` to a 64-bit sum. Over at most 32 values with |w| <= 128 and |x| <= 127,
//! `|sum of w x0| <= 32 * 128 * 127 = 520,192 < 2^19`, so the low 20 bits of the 64-bit sum,
//! sign-extended, are that sum exactly, and the rest, shifted down by 20, is the other row's.

use crate::layout::WS_PAIR_SHIFT;

/// The packed word of one K index of a row pair: q8_1 values `x0`, `x1` in -127..=127 (q8_1
/// saturates to that range, `quant::q8_1_quant`; -128 would break the split's bound).
#[inline(always)]
pub fn pack_pair(x0: i32, x1: i32) -> i32 {
    x1.wrapping_mul(1 << WS_PAIR_SHIFT).wrapping_add(x0)
}

/// Splits a pair's 64-bit sum (`sum w x0 + 2^20 sum w x1`) into the two exact int32 sums.
#[inline(always)]
pub fn split_pair(s: i64) -> (i32, i32) {
    let lo = ((s as i32) << (32 - WS_PAIR_SHIFT)) >> (32 - WS_PAIR_SHIFT);
    let hi = ((s - lo as i64) >> WS_PAIR_SHIFT) as i32;
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;
    use std::vec::Vec;

    /// The pair sums of `n` values as the kernel forms them (one 64-bit multiply-add per value)
    /// against the two plain sums.
    fn check(w: &[i32], x0: &[i32], x1: &[i32]) {
        let mut s = 0i64;
        let (mut a, mut b) = (0i64, 0i64);
        for i in 0..w.len() {
            s += w[i] as i64 * pack_pair(x0[i], x1[i]) as i64;
            a += (w[i] * x0[i]) as i64;
            b += (w[i] * x1[i]) as i64;
        }
        assert_eq!(
            split_pair(s),
            (a as i32, b as i32),
            "w {w:?} x0 {x0:?} x1 {x1:?}"
        );
    }

    #[test]
    fn pairs_split_exactly_at_the_extremes() {
        // Every sign combination of the largest magnitudes over 32 values (the widest sum the
        // kernels form), and over 16 (the halves of the 16-scale types). Weights may be -128
        // (a Q8_0 file can hold it); activations are q8_1, never -128.
        for n in [32usize, 16, 1] {
            for w in [-128i32, 127, -1, 0, 1] {
                for x0 in [-127i32, 127, 0, 1, -1] {
                    for x1 in [-127i32, 127, 0, 1, -1] {
                        check(&vec![w; n], &vec![x0; n], &vec![x1; n]);
                    }
                }
            }
        }
    }

    #[test]
    fn the_bound_is_tight() {
        // One step past the precondition (activations of -128) the split fails: the bound is
        // the real one, not a loose one.
        let mut s = 0i64;
        for _ in 0..32 {
            s += -128i64 * pack_pair(-128, -128) as i64;
        }
        assert_ne!(split_pair(s), (524_288, 524_288));
    }

    #[test]
    fn pairs_split_exactly_on_random_values() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 24) as i32 & 0xff) - 128
        };
        for _ in 0..100_000 {
            let w: Vec<i32> = (0..32).map(|_| next()).collect();
            let x0: Vec<i32> = (0..32).map(|_| next().max(-127)).collect();
            let x1: Vec<i32> = (0..32).map(|_| next().max(-127)).collect();
            check(&w, &x0, &x1);
        }
    }
}
