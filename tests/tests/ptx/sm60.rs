//! The sm_60 module. rustc cannot target sm_60, so the builder compiles it for sm_70 (with cfg
//! `gpu_ws_only`: the weight-stationary path's kernels only) and re-labels its `.target`; what
//! keeps an sm_61+ instruction out of it is checked here: the text holds none of [`NEWER`], and
//! ptxas assembles it for sm_60 (ignored test: needs the ptxas of a CUDA 12.x toolkit).

use std::path::{Path, PathBuf};
use std::process::Command;

use host::device::kernel_names_in;
use host::ptx::module;

/// How an entry of [`NEWER`] shows in PTX text.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Pat {
    /// An instruction whose opcode is this or begins with it and a `.` (`cp.async` matches
    /// `cp.async.cg.shared.global`, `mma` does not match `wmma`).
    Op(&'static str),
    /// A `.`-separated part of any word (a type, a qualifier): `relaxed` in `ld.relaxed.gpu.b32`.
    Part(&'static str),
    /// A `.`-separated part of any word beginning with this (`L2::` in `ld.global.L2::128B`).
    PartPrefix(&'static str),
}

use Pat::{Op, Part, PartPrefix};

/// Instructions, types and qualifiers newer than sm_60: (pattern, the target it needs, an
/// instruction that uses it). The needs are the PTX ISA's target ISA notes as ptxas 12.9 states
/// them when it refuses the example on `.target sm_60` ("requires .target sm_XX or higher";
/// `sm_XXa` where it says "not supported on .target"), which the ignored test
/// `ptxas_refuses_each_newer_entry_on_sm60` checks. Not formatted: one entry per line.
#[rustfmt::skip]
const NEWER: &[(Pat, &str, &str)] = &[
    (Op("dp4a"), "sm_61", "dp4a.s32.s32 %r1, %r2, %r3, %r4;"),
    (Op("dp2a"), "sm_61", "dp2a.lo.s32.s32 %r1, %r2, %r3, %r4;"),
    (Op("mma"), "sm_70 (m8n8k4; the int8 shapes: m8n8k16 sm_75, m16n8k32 sm_80)", "mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%r1, %r2}, {%r3}, {%r4}, {%r5, %r6};"),
    (Op("wmma"), "sm_70", "wmma.load.a.sync.aligned.row.m16n16k16.global.f16 {%r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8}, [%rd1];"),
    (Op("ldmatrix"), "sm_75", "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r1}, [%r2];"),
    (Op("movmatrix"), "sm_75", "movmatrix.sync.aligned.m8n8.trans.b16 %r1, %r2;"),
    (Op("stmatrix"), "sm_90", "stmatrix.sync.aligned.m8n8.x1.shared.b16 [%r2], {%r1};"),
    (Op("cp.async"), "sm_80 (cp.async.bulk: sm_90)", "cp.async.ca.shared.global [%r1], [%rd1], 16;"),
    (Op("redux"), "sm_80", "redux.sync.add.s32 %r1, %r2, 0xffffffff;"),
    (Op("match"), "sm_70", "match.any.sync.b32 %r1, %r2, 0xffffffff;"),
    (Op("nanosleep"), "sm_70", "nanosleep.u32 100;"),
    (Op("fence"), "sm_70 (membar, its older form, is allowed)", "fence.acq_rel.gpu;"),
    (Op("mbarrier"), "sm_80", "mbarrier.init.shared.b64 [%r1], %r2;"),
    (Op("bmsk"), "sm_70", "bmsk.clamp.b32 %r1, %r2, %r3;"),
    (Op("szext"), "sm_70", "szext.clamp.s32 %r1, %r2, %r3;"),
    (Op("cvt.pack"), "sm_72", "cvt.pack.sat.s8.s32.b32 %r1, %r2, %r3, %r4;"),
    (Op("tanh"), "sm_75", "tanh.approx.f32 %f1, %f2;"),
    (Op("createpolicy"), "sm_80", "createpolicy.fractional.L2::evict_last.b64 %rd1, 1.0;"),
    (Op("applypriority"), "sm_80", "applypriority.global.L2::evict_normal [%rd1], 128;"),
    (Op("discard"), "sm_80", "discard.global.L2 [%rd1], 128;"),
    (Op("elect"), "sm_90", "elect.sync %r1|%p1, 0xffffffff;"),
    (Op("griddepcontrol"), "sm_90", "griddepcontrol.wait;"),
    (Op("mapa"), "sm_90", "mapa.shared::cluster.u32 %r1, %r2, %r3;"),
    (Op("getctarank"), "sm_90", "getctarank.shared::cluster.u32 %r1, %r2;"),
    (Op("multimem"), "sm_90", "multimem.ld_reduce.relaxed.sys.global.add.u32 %r1, [%rd1];"),
    (Op("barrier.cluster"), "sm_90", "barrier.cluster.arrive;"),
    (Op("red.async"), "sm_90", "red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 [%r1], %r2, [%r3];"),
    (Op("st.async"), "sm_90", "st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%r1], %r2, [%r3];"),
    (Op("wgmma"), "sm_90a", "wgmma.fence.sync.aligned;"),
    (Op("setmaxnreg"), "sm_90a", "setmaxnreg.inc.sync.aligned.u32 64;"),
    (Op("tcgen05"), "sm_100a", "tcgen05.fence::before_thread_sync;"),
    (Part("relaxed"), "sm_70", "ld.relaxed.gpu.global.b32 %r1, [%rd1];"),
    (Part("acquire"), "sm_70", "ld.acquire.gpu.global.b32 %r1, [%rd1];"),
    (Part("release"), "sm_70", "st.release.gpu.global.b32 [%rd1], %r1;"),
    (Part("acq_rel"), "sm_70", "atom.acq_rel.gpu.global.add.u32 %r1, [%rd1], %r2;"),
    (Part("mmio"), "sm_70", "ld.mmio.relaxed.sys.global.b32 %r1, [%rd1];"),
    (Part("b128"), "sm_70", "{ .reg .b128 %q; ld.global.b128 %q, [%rd1]; }"),
    (Part("cluster"), "sm_90", "atom.cluster.global.add.u32 %r1, [%rd1], %r2;"),
    (Part("shared::cluster"), "sm_90", "mapa.shared::cluster.u32 %r1, %r2, %r3;"),
    (Part("NaN"), "sm_80", "max.NaN.f32 %f1, %f2, %f3;"),
    (Part("xorsign"), "sm_86", "min.xorsign.abs.f32 %f1, %f2, %f3;"),
    (Part("tf32"), "sm_80", "cvt.rna.tf32.f32 %r1, %f1;"),
    (PartPrefix("bf16"), "sm_80", "cvt.rn.bf16.f32 %h1, %f1;"),
    (Part("f16x2"), "sm_80 (cvt.rn.f16x2.f32; add/mul/fma.f16x2 assemble from sm_53 but are refused here too: the kernels use no half arithmetic)", "cvt.rn.f16x2.f32 %r1, %f1, %f2;"),
    (PartPrefix("e4m3"), "sm_89", "cvt.rn.f16x2.e4m3x2 %r1, %h1;"),
    (PartPrefix("e5m2"), "sm_89", "cvt.rn.f16x2.e5m2x2 %r1, %h1;"),
    (PartPrefix("L1::"), "sm_70", "ld.global.L1::evict_last.b32 %r1, [%rd1];"),
    (PartPrefix("L2::"), "sm_75 (prefetch sizes; cache hints and eviction priorities: sm_80)", "ld.global.L2::128B.b32 %r1, [%rd1];"),
    (PartPrefix("%cluster"), "sm_90", "mov.u32 %r1, %clusterid.x;"),
];

/// The entries of [`NEWER`] that `ptx` uses, each with the first line that uses it.
fn newer_than_sm60(ptx: &str) -> Vec<(Pat, String)> {
    let mut found: Vec<(Pat, String)> = Vec::new();
    for line in ptx.lines() {
        let code = line.split("//").next().unwrap_or("").trim();
        // The opcode: the first word after an optional `{` and predicate guard; none on
        // directives (`.`), labels (`$`) and closing braces.
        let mut rest = code.trim_start_matches('{').trim_start();
        if rest.starts_with('@') {
            rest = rest.split_once(char::is_whitespace).map_or("", |x| x.1);
        }
        rest = rest.trim_start().trim_start_matches('{').trim_start();
        let op = rest
            .split_whitespace()
            .next()
            .filter(|w| !w.starts_with(['.', '$', '}']))
            .map(|w| w.trim_end_matches(';'));
        let words = code.split(|c: char| c.is_whitespace() || ",;{}()[]|".contains(c));
        let parts: Vec<&str> = words.flat_map(|w| w.split('.')).collect();
        for &(pat, _, _) in NEWER {
            let hit = match pat {
                Op(o) => op.is_some_and(|w| {
                    w.strip_prefix(o)
                        .is_some_and(|r| r.is_empty() || r.starts_with('.'))
                }),
                Part(p) => parts.contains(&p),
                PartPrefix(p) => parts.iter().any(|x| x.starts_with(p)),
            };
            if hit && !found.iter().any(|f| f.0 == pat) {
                found.push((pat, line.trim().to_string()));
            }
        }
    }
    found
}

fn sm60() -> &'static str {
    module(60).expect("an sm_60 module is embedded")
}

#[test]
fn sm60_module_says_sm60_and_uses_nothing_newer() {
    let ptx = sm60();
    let directive = |d: &str| ptx.lines().find(|l| l.starts_with(d)).map(str::trim);
    assert_eq!(directive(".target"), Some(".target sm_60"));
    assert!(directive(".version").is_some(), "no .version line");
    let found = newer_than_sm60(ptx);
    assert!(
        found.is_empty(),
        "the sm_60 module uses instructions newer than sm_60:\n{}",
        found
            .iter()
            .map(|(p, l)| format!("  {p:?}: {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_scan_finds_each_newer_entry() {
    // Each example is caught by its own pattern...
    for &(pat, _, example) in NEWER {
        let found = newer_than_sm60(&format!("\t@%p1 {example}\n"));
        assert!(
            found.iter().any(|f| f.0 == pat),
            "{pat:?} not found in {example}"
        );
    }
    // ... and the real newer modules are caught by theirs: sm_75 has `mma` and `ldmatrix`, but
    // its cp.async are plain copies; sm_80 has all three.
    let pats = |arch| -> Vec<Pat> {
        newer_than_sm60(module(arch).expect("module"))
            .into_iter()
            .map(|f| f.0)
            .collect()
    };
    let (sm75, sm80) = (pats(75), pats(80));
    assert!(sm75.contains(&Op("mma")) && sm75.contains(&Op("ldmatrix")));
    assert!(!sm75.contains(&Op("cp.async")));
    for p in [Op("mma"), Op("ldmatrix"), Op("cp.async")] {
        assert!(sm80.contains(&p), "sm_80: {p:?} not found");
    }
    // Words that only look alike are not caught.
    let clean =
        "\tprmt.b32 %r1, %r2, %r3, %r4;\n\tmembar.gl;\n$L__mma_fence:\n\tcvt.f32.f16 %f1, %h1;\n";
    assert!(newer_than_sm60(clean).is_empty());
}

/// The ptxas to check with: `$MOE_PTXAS`, else `ptxas` on PATH. Panics when there is none.
pub(super) fn ptxas() -> PathBuf {
    if let Some(p) = std::env::var_os("MOE_PTXAS") {
        return PathBuf::from(p);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("ptxas"))
        .find(|p| p.is_file())
        .expect(
            "no ptxas: set MOE_PTXAS to the ptxas of a CUDA 12.x toolkit (13.x no longer \
             assembles sm_60), or put one on PATH",
        )
}

/// Runs `ptxas -arch=sm_<arch> -v` on `ptx` (`name` names its temporary files); (success,
/// ptxas's messages).
pub(super) fn assemble(ptxas: &Path, arch: u32, name: &str, ptx: &str) -> (bool, String) {
    let dir = std::env::temp_dir();
    let stem = format!("moe-prefill-{}-{name}", std::process::id());
    let (src, out) = (
        dir.join(format!("{stem}.ptx")),
        dir.join(format!("{stem}.cubin")),
    );
    std::fs::write(&src, ptx).expect("temp dir should be writable");
    let run = Command::new(ptxas)
        .arg(format!("-arch=sm_{arch}"))
        .arg("-v")
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", ptxas.display()));
    let _ = std::fs::remove_file(&src);
    let _ = std::fs::remove_file(&out);
    let text =
        String::from_utf8_lossy(&run.stderr).into_owned() + &String::from_utf8_lossy(&run.stdout);
    (run.status.success(), text)
}

/// [`assemble`] for sm_60, where a ptxas without sm_60 is a failure that says so.
fn assemble_sm60(ptxas: &Path, name: &str, ptx: &str) -> (bool, String) {
    let (ok, text) = assemble(ptxas, 60, name, ptx);
    // A ptxas without sm_60 (CUDA 13.x) says so for any input: not a finding about our PTX.
    assert!(
        !lacks_target(&text),
        "{} ({}) has no sm_60: set MOE_PTXAS to the ptxas of a CUDA 12.x toolkit\n{text}",
        ptxas.display(),
        ptxas_version(ptxas)
    );
    (ok, text)
}

/// Whether ptxas's messages say it has no such target (`-arch`): CUDA 13.x's ptxas has no
/// sm_60, for any input.
pub(super) fn lacks_target(messages: &str) -> bool {
    messages.contains("is not defined for option 'gpu-name'")
}

/// The last line of `ptxas --version` (its release), or why there is none.
pub(super) fn ptxas_version(ptxas: &Path) -> String {
    match Command::new(ptxas).arg("--version").output() {
        Ok(o) => String::from_utf8_lossy(&o.stdout)
            .lines()
            .last()
            .unwrap_or("no version line")
            .to_string(),
        Err(e) => format!("--version failed: {e}"),
    }
}

#[test]
#[ignore = "needs ptxas of CUDA 12.x (sm_60): set MOE_PTXAS"]
fn sm60_module_assembles_with_ptxas() {
    let ptxas = ptxas();
    let (ok, text) = assemble_sm60(&ptxas, "sm60", sm60());
    assert!(ok, "{} -arch=sm_60 failed:\n{text}", ptxas.display());
    let entries = text.matches("Compiling entry function").count();
    assert_eq!(entries, kernel_names_in(60).len(), "{text}");
    // Registers per kernel (shown with --nocapture).
    for l in text
        .lines()
        .filter(|l| l.contains("Compiling") || l.contains("registers"))
    {
        println!("{}", l.trim_start_matches("ptxas info    : "));
    }
}

#[test]
#[ignore = "needs ptxas of CUDA 12.x (sm_60): set MOE_PTXAS"]
fn ptxas_refuses_each_newer_entry_on_sm60() {
    let ptxas = ptxas();
    for (i, &(pat, needs, example)) in NEWER.iter().enumerate() {
        let ptx = format!(
            ".version 8.8\n.target sm_60\n.address_size 64\n.visible .entry k()\n{{\n\
             .reg .b32 %r<9>;\n.reg .b64 %rd<3>;\n.reg .f32 %f<9>;\n.reg .b16 %h<4>;\n\
             .reg .pred %p<2>;\n{example}\nret;\n}}\n"
        );
        let (ok, text) = assemble_sm60(&ptxas, &format!("newer{i}"), &ptx);
        assert!(!ok, "{pat:?}: ptxas assembles `{example}` for sm_60");
        let want = needs.split_whitespace().next().expect("a target");
        let said = if let Some((_, r)) = text.split_once("requires .target ") {
            r.split_whitespace().next().unwrap_or("")
        } else if text.contains("not supported on .target 'sm_60'") {
            // An arch-specific feature (sm_90a, sm_100a): ptxas names no minimum.
            if want.ends_with('a') { want } else { "" }
        } else {
            ""
        };
        assert_eq!(said, want, "{pat:?}: ptxas says\n{text}");
    }
}
