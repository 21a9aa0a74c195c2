use super::*;

/// One step of the tests' 64-bit linear congruential generator (Knuth's MMIX constants):
/// advances `s` and returns its new value.
fn lcg(s: &mut u64) -> u64 {
    *s = s
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *s
}

#[test]
fn round_half_away_matches_roundf() {
    for &(v, want) in &[
        (0.5f32, 1),
        (-0.5, -1),
        (1.5, 2),
        (2.5, 3),
        (-2.5, -3),
        (0.499_999_97, 0),
        (126.5, 127),
        (-0.0, 0),
        (f32::NAN, 0),
    ] {
        assert_eq!(round_half_away(v), want, "{v}");
    }
    let mut s = 0x1234_5678u64;
    for _ in 0..100_000 {
        lcg(&mut s);
        let v = ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 300.0;
        assert_eq!(round_half_away(v), v.round() as i32, "{v}");
    }
}

/// The three-operation rounding equals `round_half_away` (and Rust's `round`) on |v| <= 128:
/// every f32 within 300 ulp of each half and each integer up to 128, and a stride through
/// all the others (the full 2.2e9 values were checked once, off line).
#[test]
fn round_half_away_small_matches() {
    let check = |v: f32| {
        assert_eq!(round_half_away_small(v), round_half_away(v), "{v:e}");
        assert_eq!(round_half_away_small(-v), round_half_away(-v), "{:e}", -v);
        assert_eq!(round_half_away_small(v), v.round() as i32, "{v:e}");
    };
    for k in 0..=256u32 {
        let c = (k as f32 * 0.5).to_bits();
        for b in c.saturating_sub(300)..=c + 300 {
            check(f32::from_bits(b));
        }
    }
    for b in (0..=128f32.to_bits()).step_by(997) {
        check(f32::from_bits(b));
    }
    assert_eq!(round_half_away_small(f32::NAN), 0);
    assert_eq!(round_half_away_small(-f32::NAN), 0);
}

/// `swiglu_den`'s shortened exponential gives the bits of `1 + exp(-g)` for every non-NaN g:
/// dense around the clamp ends and the overflow, and a stride through all f32.
#[test]
fn swiglu_den_is_one_plus_exp() {
    let check = |g: f32| {
        assert_eq!(
            swiglu_den(g).to_bits(),
            (1.0 + exp(-g)).to_bits(),
            "{g:e} ({:#x})",
            g.to_bits()
        );
    };
    for c in [86.0f32, -89.0, -88.72, -88.38, 17.0, 0.0] {
        let b = c.to_bits();
        for b in b.saturating_sub(20_000)..=b + 20_000 {
            check(f32::from_bits(b));
        }
    }
    for b in (0..=u32::MAX).step_by(4099) {
        let g = f32::from_bits(b);
        if !g.is_nan() {
            check(g);
        }
    }
    assert!(swiglu(f32::NAN, 1.0).is_nan());
}

/// `q8_1_quant` by its two cases equals the rule written out: `round_half_away(x * d_inv)`
/// with NaN -> 0 and saturation to +-127.
#[test]
fn q8_1_quant_matches_the_rule() {
    let rule = |x: f32, d_inv: f32| -> i8 {
        let v = x * d_inv;
        let v = if v.is_nan() {
            0.0
        } else {
            v.clamp(-127.0, 127.0)
        };
        round_half_away(v) as i8
    };
    let mut s = 0x9e37_79b9u64;
    let mut next = || {
        lcg(&mut s);
        (s >> 32) as u32
    };
    for _ in 0..200_000 {
        let x = f32::from_bits(next());
        let amax = f32::from_bits(next() & 0x7fff_ffff).max(abs(x));
        let amax = if amax.is_nan() { 0.0 } else { amax };
        for d_inv in [q8_1_inv_scale(amax), 0.0, f32::INFINITY] {
            assert_eq!(q8_1_quant(x, d_inv), rule(x, d_inv), "{x:e} {d_inv:e}");
        }
    }
}

#[test]
fn exp_within_two_ulp_of_f64() {
    let mut worst = 0u32;
    let mut x = -103.9f32;
    while x < 88.7 {
        let got = exp(x);
        let want = (x as f64).exp() as f32;
        let ulp = (got.to_bits() as i64 - want.to_bits() as i64).unsigned_abs() as u32;
        worst = worst.max(ulp);
        x += 0.000_731;
    }
    assert!(worst <= 2, "worst {worst} ulp");
    assert_eq!(exp(0.0), 1.0);
    assert_eq!(exp(f32::NEG_INFINITY), 0.0);
    assert_eq!(exp(f32::INFINITY), f32::INFINITY);
    assert_eq!(exp(100.0), f32::INFINITY);
    assert!(exp(f32::NAN).is_nan());
}

#[test]
fn f16_round_trip_all_values() {
    for h in 0..=u16::MAX {
        let f = f16_to_f32(h);
        let want = half::f16::from_bits(h).to_f32();
        assert_eq!(f.to_bits(), want.to_bits(), "{h:#06x}");
        if !f.is_nan() {
            assert_eq!(f32_to_f16(f), h, "{h:#06x}");
        }
    }
    let mut s = 99u64;
    for _ in 0..200_000 {
        lcg(&mut s);
        let f = f32::from_bits((s >> 32) as u32);
        let want = half::f16::from_f32(f);
        if f.is_nan() {
            assert!(f16_to_f32(f32_to_f16(f)).is_nan());
        } else {
            assert_eq!(f32_to_f16(f), want.to_bits(), "{f:e}");
        }
    }
}

#[test]
fn magic_steps_equal_the_plain_steps() {
    // Every sum a 32-value int8 group can give (|c| <= 32 * 128 * 128 < 2^19), against
    // random scales: the MAGIC form gives the same bits as the conversion.
    let mut s = 5u64;
    for c in -(1 << 19)..(1 << 19) {
        lcg(&mut s);
        let (da, db, acc) = (
            f32::from_bits(0x3000_0000 | (s >> 40) as u32),
            f32::from_bits(0x3800_0000 | (s >> 16) as u32 & 0x00ff_ffff),
            (s as u32 as i32) as f32 * 1e-6,
        );
        let m = MAGIC.wrapping_add(c);
        assert_eq!(magic_to_f32(m), c as f32);
        assert_eq!(
            mmq_step_32_magic(acc, m, da, db).to_bits(),
            mmq_step_32(acc, c, da, db).to_bits()
        );
        assert_eq!(
            mmq_step_16_magic(acc, m, MAGIC - c, da, db, acc).to_bits(),
            mmq_step_16(acc, c, -c, da, db, acc).to_bits()
        );
        // The pipelined kernels' form: the first half's sum plain, converted by `as f32`.
        let c1 = (c * 5) % (1 << 19);
        assert_eq!(
            mmq_step_16_cvt(acc, c, MAGIC.wrapping_add(c1), da, db, acc).to_bits(),
            mmq_step_16(acc, c, c1, da, db, acc).to_bits()
        );
        let db1 = f32::from_bits(0x3800_0000 | (s >> 8) as u32 & 0x00ff_ffff);
        let c1 = (c * 7) % (1 << 19);
        let sd = q2_0_shared_d_step(acc, c, c1, db, db1, da);
        assert_eq!(
            q2_0_shared_d_step_magic(acc, m, MAGIC.wrapping_add(c1), db, db1, da).to_bits(),
            sd.to_bits()
        );
        // The variant's expression, written out: d (C0 dB0 + C1 dB1), one fma inside, one out.
        let want = da.mul_add((c as f32).mul_add(db, c1 as f32 * db1), acc);
        assert_eq!(sd.to_bits(), want.to_bits());
    }
}

#[test]
fn small_int_conversion_is_exact() {
    for c in (-(1 << 22) + 1..(1 << 22))
        .step_by(7)
        .chain([-1, 0, 1, 516_128, -516_128])
    {
        assert_eq!(small_i32_to_f32(c), c as f32, "{c}");
    }
}

#[test]
fn q8_1_group_rules() {
    // all zero: d = 0, q = 0
    let (d, q) = quantize_group_q8_1(&[0.0; 32]);
    assert_eq!(d.to_bits(), 0);
    assert_eq!(q, [0; 32]);
    // one huge value dominates, the rest round to 0
    let mut x = [1.0f32; 32];
    x[5] = 3.0e38;
    let (d, q) = quantize_group_q8_1(&x);
    assert_eq!(q[5], 127);
    assert_eq!(q[0], 0);
    assert_eq!(d, 1.0 / (127.0 / 3.0e38));
    // NaN is skipped by amax and quantizes to 0
    let mut x = [0.5f32; 32];
    x[0] = f32::NAN;
    x[1] = -1.0;
    let (_, q) = quantize_group_q8_1(&x);
    assert_eq!((q[0], q[1], q[2]), (0, -127, 64));
}

/// `magic_mul` against `(C as f32) * dA` for every finite f16 `d` (both signs, subnormals)
/// times every multiplier the formats' scales use (odd integers below 32 times 1, 1/4, 1/8),
/// at sums from both ends of MMQ's range: bit-equal, but for a zero product (+0 always).
#[test]
fn magic_mul_is_the_rounded_product() {
    let sums = [
        1,
        -1,
        2,
        3,
        -7,
        127,
        -4064,
        65_535,
        520_191,
        -520_192,
        (1 << 21) - 1,
    ];
    let mut checked = 0u64;
    for h in 0..=u16::MAX {
        let d = f16_to_f32_soft(h);
        if !d.is_finite() {
            continue;
        }
        for odd in (1..32).step_by(2) {
            for pow in [1.0f32, 0.25, 0.125] {
                let da = d * odd as f32 * pow;
                let off = magic_offset(da);
                assert_eq!(off, -(12_582_912.0f64 * da as f64) as f32, "offset exact");
                for c in sums {
                    let got = magic_mul(MAGIC.wrapping_add(c), da, off);
                    let want = c as f32 * da;
                    // A zero product (dA = 0) comes out +0, whatever the signs.
                    let want = if want == 0.0 { 0.0 } else { want };
                    assert_eq!(got.to_bits(), want.to_bits(), "c {c} da {da:e}");
                    checked += 1;
                }
                assert_eq!(magic_mul(MAGIC, da, off).to_bits(), 0, "C = 0 gives +0");
            }
        }
    }
    assert!(checked > 60_000 * 48 * sums.len() as u64);
}

mod accuracy {
    use super::*;

    /// Our SwiGLU against SwiGLU in f64, x and g ~ N(0, 4^2) (the distribution of
    /// docs/ggml-reference.md §8.3's measurement of ggml's fast-math form): the ulp histogram is
    /// printed for README, and the error is bounded.
    #[test]
    fn swiglu_within_a_few_ulp_of_f64() {
        let mut s = 0x5eedu64;
        let mut next = || {
            lcg(&mut s);
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut hist = [0usize; 5];
        let n = 1 << 20;
        for _ in 0..n {
            let (u1, u2, u3, u4) = (1.0 - next(), next(), 1.0 - next(), next());
            let g = (4.0 * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32;
            let u = (4.0 * (-2.0 * u3.ln()).sqrt() * (std::f64::consts::TAU * u4).cos()) as f32;
            let want = (g as f64 / (1.0 + (-(g as f64)).exp()) * u as f64) as f32;
            let got = swiglu(g, u);
            let ulp = (got.to_bits() as i64 - want.to_bits() as i64).unsigned_abs() as usize;
            hist[ulp.min(4)] += 1;
        }
        std::eprintln!(
            "swiglu vs f64 (correctly rounded): {:.1} % identical, {:.1} % 1 ulp, {:.1} % 2 ulp, {:.2} % 3 ulp, {:.3} % >= 4",
            100.0 * hist[0] as f64 / n as f64,
            100.0 * hist[1] as f64 / n as f64,
            100.0 * hist[2] as f64 / n as f64,
            100.0 * hist[3] as f64 / n as f64,
            100.0 * hist[4] as f64 / n as f64
        );
        assert_eq!(hist[4], 0, "an error of 4 ulp or more");
    }
}
