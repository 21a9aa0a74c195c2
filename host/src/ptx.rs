//! The PTX modules built from gpu/ by builder/ (host/build.rs), embedded in the binary.

/// (PTX target as major*10+minor, PTX text), oldest first.
pub const MODULES: [(u32, &str); 3] = [
    (75, include_str!(concat!(env!("OUT_DIR"), "/gpu_sm_75.ptx"))),
    (80, include_str!(concat!(env!("OUT_DIR"), "/gpu_sm_80.ptx"))),
    (90, include_str!(concat!(env!("OUT_DIR"), "/gpu_sm_90.ptx"))),
];

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
        assert!(super::for_cc(70).is_none());
        assert_eq!(super::for_cc(120).unwrap().0, 90);
    }
}
