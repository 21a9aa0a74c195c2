//! The PTX modules built from gpu/ by builder/ (host/build.rs), embedded in the binary.
//!
//! sm_60 (Pascal) holds only the weight-stationary path's kernels (rustc cannot target sm_60:
//! the builder compiles it as sm_70 without the `mma` kernels and re-labels it); sm_75 and newer
//! hold every kernel. There is no sm_70 module: Volta has no int8 `mma` (`m8n8k16` is sm_75+),
//! so a compute capability 7.0-7.4 device runs the sm_60 module, like Pascal.

mod split;
pub use split::{Parts, split};

/// (PTX target as major*10+minor, PTX text), oldest first. A `static`: a `const` would put a
/// copy of the texts (46 MB) into the binary at every use (201 MB of `.rodata` at d5be14f).
pub static MODULES: [(u32, &str); 4] = [
    (60, include_str!(concat!(env!("OUT_DIR"), "/gpu_sm_60.ptx"))),
    (75, include_str!(concat!(env!("OUT_DIR"), "/gpu_sm_75.ptx"))),
    (80, include_str!(concat!(env!("OUT_DIR"), "/gpu_sm_80.ptx"))),
    (90, include_str!(concat!(env!("OUT_DIR"), "/gpu_sm_90.ptx"))),
];

/// The oldest module with the tensor-core kernels (per-group MMQ and fused, `mma.sync`); the
/// modules below it hold only the weight-stationary path.
pub const MMA_MIN_ARCH: u32 = 75;

/// Whether the module of target `arch` holds the MMQ and fused kernels.
pub const fn has_mma(arch: u32) -> bool {
    arch >= MMA_MIN_ARCH
}

/// The oldest module built with the bulk copies on transaction barriers (`cp.async.bulk`,
/// `mbarrier` transactions: cfg `gpu_sm90`), which the narrow MMQ kernel's resident form needs.
pub const BULK_MIN_ARCH: u32 = 90;

/// Whether the module of target `arch` has the bulk copies (the resident narrow MMQ form).
pub const fn has_bulk(arch: u32) -> bool {
    arch >= BULK_MIN_ARCH
}

/// The newest module whose target is not above compute capability `cc` (major*10+minor).
pub fn for_cc(cc: u32) -> Option<(u32, &'static str)> {
    MODULES.iter().rev().find(|(arch, _)| *arch <= cc).copied()
}

/// The PTX text of one target, e.g. `module(80)`.
pub fn module(arch: u32) -> Option<&'static str> {
    MODULES.iter().find(|(a, _)| *a == arch).map(|m| m.1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn picks_newest_not_above() {
        assert_eq!(super::for_cc(90).unwrap().0, 90);
        assert_eq!(super::for_cc(89).unwrap().0, 80);
        assert_eq!(super::for_cc(86).unwrap().0, 80);
        assert_eq!(super::for_cc(75).unwrap().0, 75);
        // Volta (7.0, 7.2) and Pascal (6.0, 6.1, 6.2): the sm_60 module.
        assert_eq!(super::for_cc(72).unwrap().0, 60);
        assert_eq!(super::for_cc(70).unwrap().0, 60);
        assert_eq!(super::for_cc(61).unwrap().0, 60);
        assert_eq!(super::for_cc(60).unwrap().0, 60);
        assert!(super::for_cc(53).is_none());
        assert_eq!(super::for_cc(120).unwrap().0, 90);
        assert!(!super::has_mma(60));
        assert!(super::has_mma(75) && super::has_mma(90));
        assert!(!super::has_bulk(80) && super::has_bulk(90));
    }
}
