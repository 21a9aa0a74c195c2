//! The work list built on the device (`moe_expert_tiles`) equals the host's
//! (`tiles_from_bounds` in expert order) followed by tiles of no rows, for expert counts below,
//! at and past one pass of its CTA (1,024), empty experts, one expert holding every row, and
//! both widths, whole and split into each expert's tail and the rest (`TilePart`); the slots
//! past `n_slots` stay poisoned. And the scatter with the most experts
//! and the largest top-k it takes (2,048, top-32: two experts per thread of its prefix sum, a
//! full 48 KB of shared memory in its placement), through every path.

use super::common::*;
use gpu::layout::MAX_EXPERTS;
use host::moe::expert::{TilePart, part_from_bounds, tiles};
use host::moe::layer::DeviceLayer;
use host::rng::Rng;
use host::synth::{self, Popularity, SyntheticLayer};
use tests::*;

fn bounds_of(counts: &[u32]) -> Vec<u32> {
    let mut b = vec![0u32];
    for &c in counts {
        b.push(b.last().unwrap() + c);
    }
    b
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_tile_list_equals_the_hosts() {
    let gpu = gpu();
    let mut rng = Rng::new(seed("device_tile_list_equals_the_hosts"));
    let mut cases: Vec<(String, Vec<u32>)> = Vec::new();
    for n_experts in [1usize, 37, 512, 1024, 1025, MAX_EXPERTS] {
        let random: Vec<u32> = (0..n_experts)
            .map(|_| match rng.below(4) {
                0 => 0,
                1 => rng.below(64) as u32 + 1,
                _ => rng.below(300) as u32,
            })
            .collect();
        cases.push((format!("{n_experts} experts, random rows"), random));
        let mut one = vec![0u32; n_experts];
        one[n_experts / 2] = 4113;
        cases.push((format!("{n_experts} experts, all rows in one"), one));
        cases.push((format!("{n_experts} experts, no rows"), vec![0; n_experts]));
        cases.push((
            format!("{n_experts} experts, 65 rows each"),
            vec![65; n_experts],
        ));
    }
    for (label, counts) in &cases {
        let bounds = bounds_of(counts);
        let n_rows = *bounds.last().unwrap() as usize;
        let dev_bounds = gpu.upload(&bounds).expect("upload bounds");
        let parts = |width: u32| {
            [
                TilePart::All,
                TilePart::Body { tail: width / 2 },
                TilePart::Tails { tail: width / 2 },
                TilePart::Body { tail: width },
                TilePart::Tails { tail: 1 },
            ]
        };
        for (width, part) in [32usize, 64, 128]
            .into_iter()
            .flat_map(|w| parts(w as u32).map(|p| (w, p)))
        {
            let slots = part.max_tiles(n_rows, counts.len(), width);
            let mut buf = gpu
                .alloc_filled::<[u32; 4]>(slots + GUARD, POISON)
                .expect("tile buffer");
            // SAFETY: dev_bounds holds counts.len() + 1 non-decreasing entries.
            unsafe {
                tiles::build_on_device(
                    &gpu,
                    host::device::dptr(&dev_bounds, &gpu.stream),
                    counts.len(),
                    width,
                    part,
                    &mut buf,
                    slots,
                )
                .expect("moe_expert_tiles")
            };
            let got = gpu.download(&buf).expect("download tiles");
            let list = part_from_bounds(&bounds, width, part, false);
            assert!(
                list.len() <= slots,
                "{label}: {} tiles > {slots}",
                list.len()
            );
            let mut want: Vec<[u32; 4]> = list.iter().map(tiles::tile_repr).collect();
            want.resize(slots, [0; 4]);
            want.resize(slots + GUARD, [u32::from_ne_bytes([POISON; 4]); 4]);
            if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
                panic!(
                    "{label}, width {width}, {part:?}: slot {i} of {slots} is {:?}, want {:?} \
                     ({} tiles)",
                    got[i],
                    want[i],
                    list.len()
                );
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn most_experts_largest_top_k() {
    let gpu = gpu();
    let sd = seed("most_experts_largest_top_k");
    let s = most_experts();
    let layer = SyntheticLayer::new(s, false, sd).expect("layer");
    let dev = DeviceLayer::upload(&gpu, &layer.weights(), &s).expect("upload");
    let mut pfs = pipelines(&gpu, &s, 300);
    for (t, pop) in [
        (300, Popularity::Uniform),
        (37, Popularity::Skewed { sigma: 1.0 }),
    ] {
        let r = synth::routing(t, s.n_experts, s.top_k, pop, sd ^ t as u64);
        check(
            &gpu,
            &format!("{} experts top-{} T = {t}", s.n_experts, s.top_k),
            &layer,
            &dev,
            &mut pfs,
            &r,
            sd ^ 7,
        );
        // The MMQ pipelines (pipelined and classic kernels) build their list on the device.
        if host::ptx::has_mma(gpu.info.ptx_arch) {
            let on_device = pfs.iter().filter(|p| !p.read_back()).count();
            assert!(on_device >= 2, "{on_device} pipelines without a read-back");
        }
    }
}
