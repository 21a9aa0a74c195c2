//! ggml's block formats (`ggml-common.h`, docs/ggml-reference.md §2, §3), the q8_1 "D4"
//! activation block of MMQ, the weight types and their activation layouts. Sizes are checked at
//! compile time below.

use core::mem::size_of;

#[cfg(not(target_arch = "nvptx64"))]
use bytemuck::{Pod, Zeroable};

/// Values per q8_1 group: one f32 scale per 32 activation values.
pub const QK8_1: usize = 32;
/// Values per `block_q8_1_mmq` (four q8_1 groups).
pub const MMQ_BLOCK_VALUES: usize = 128;
/// ggml's `MATRIX_ROW_PADDING`: activation rows are quantized to a multiple of this many values,
/// the tail being zeros (q = 0, d = 0).
pub const ROW_PADDING: usize = 512;

/// `K` rounded up to [`ROW_PADDING`]: the number of values a quantized activation row holds.
pub const fn padded_k(k: usize) -> usize {
    k.div_ceil(ROW_PADDING) * ROW_PADDING
}
/// `block_q8_1_mmq` in the D4 layout (`cuda/mmq.cuh`): 128 consecutive values of one activation
/// row; `d[g]` is the f32 scale of values `32g .. 32g+31`. In a buffer, block `(kc, col)` sits at
/// index `kc * n_cols + col` (K-chunk major, row minor), as `quantize_mmq_q8_1` writes it.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct BlockQ8_1Mmq {
    pub d: [f32; 4],
    pub qs: [i8; 128],
}

/// Q8_0: 32 values, `qs[j] * d`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockQ8_0 {
    pub d: u16,
    pub qs: [i8; 32],
}

/// Q2_0: 64 values, 2-bit codes c (element j in bits 2(j%4).. of byte j/4), value `(c - 1) * d`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockQ2_0 {
    pub d: u16,
    pub qs: [u8; 16],
}

/// Q2_0 as the kernels read it (its device layout): [`BlockQ2_0`]'s bytes with the 8 codes of
/// each 16-bit word of `qs` (values `8 p .. 8 p + 7` of the block, code i in bits `2 i ..`)
/// reordered so that value `8 p + 4 w + m` sits in bits `4 m + 2 w ..` of word p: each of the
/// word's two groups of 4 values is one mask and one `prmt` away from its int8 word
/// (gpu/src/formats/device.rs). The host converts every Q2_0 tensor once, as it uploads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockQ2_0Dev {
    pub d: u16,
    pub qs: [u8; 16],
}

/// IQ4_NL: 32 values; byte j: low nibble -> element j, high nibble -> element j + 16; value
/// `d * KVALUES_IQ4NL[nibble]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIq4Nl {
    pub d: u16,
    pub qs: [u8; 16],
}

/// IQ4_NL as the kernels read it (its device layout): [`BlockIq4Nl`]'s bytes with the nibbles
/// of each 32-bit word c of `qs` (bytes `4 c ..`: values `4 c ..` in their low nibbles,
/// `16 + 4 c ..` in the high ones) reordered so that its low 16 bits hold values `4 c .. 4 c + 3`
/// (nibble k value `4 c + k`) and its high 16 bits values `16 + 4 c ..`
/// (gpu/src/formats/device.rs). The host converts every IQ4_NL tensor once, as it uploads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIq4NlDev {
    pub d: u16,
    pub qs: [u8; 16],
}

/// IQ2_XXS: 256 values in 8 sub-blocks of 32; per sub-block 4 grid-index bytes, then a u32 of
/// four 7-bit sign indices and a 4-bit scale (bits 28..31).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIq2Xxs {
    pub d: u16,
    pub qs: [u8; 64],
}

/// IQ2_XS: 256 values; u16 `qs[4 ib + l]` = 9-bit grid index | 7-bit sign index << 9; one scale
/// byte per sub-block (low nibble: first 16 values, high nibble: last 16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIq2Xs {
    pub d: u16,
    pub qs: [u16; 32],
    pub scales: [u8; 8],
}

/// IQ2_S: 256 values; low 8 index bits (`qs[0..32]`), explicit sign bytes (`qs[32..64]`),
/// 2 high index bits per group (`qh`), scale nibbles per 16 values as IQ2_XS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIq2S {
    pub d: u16,
    pub qs: [u8; 64],
    pub qh: [u8; 8],
    pub scales: [u8; 8],
}

/// IQ3_XXS: 256 values; 64 grid-index bytes (one per 4 values), then 8 u32 of four 7-bit sign
/// indices and a 4-bit scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIq3Xxs {
    pub d: u16,
    pub qs: [u8; 96],
}

/// IQ3_S: 256 values; low 8 index bits, 9th bits (`qh`), explicit sign bytes, 4-bit scales.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct BlockIq3S {
    pub d: u16,
    pub qs: [u8; 64],
    pub qh: [u8; 8],
    pub signs: [u8; 32],
    pub scales: [u8; 4],
}

host_pod!(
    BlockQ8_1Mmq,
    BlockQ8_0,
    BlockQ2_0,
    BlockQ2_0Dev,
    BlockIq4Nl,
    BlockIq4NlDev,
    BlockIq2Xxs,
    BlockIq2Xs,
    BlockIq2S,
    BlockIq3Xxs,
    BlockIq3S
);

const _: () = assert!(size_of::<BlockQ8_1Mmq>() == 144);
/// Bytes of one [`BlockQ8_1Mmq`] (128 values): the unit of every q8_1 activation buffer.
pub const Q8_1_MMQ_BYTES: usize = size_of::<BlockQ8_1Mmq>();
/// 16-byte pieces of one [`BlockQ8_1Mmq`] (the unit of the copies that move whole blocks).
pub const Q8_1_MMQ_PIECES: usize = Q8_1_MMQ_BYTES / 16;
const _: () = assert!(size_of::<BlockQ8_0>() == 34);
const _: () = assert!(size_of::<BlockQ2_0>() == 18);
const _: () = assert!(size_of::<BlockQ2_0Dev>() == 18);
const _: () = assert!(size_of::<BlockIq4Nl>() == 18);
const _: () = assert!(size_of::<BlockIq4NlDev>() == 18);
const _: () = assert!(size_of::<BlockIq2Xxs>() == 66);
const _: () = assert!(size_of::<BlockIq2Xs>() == 74);
const _: () = assert!(size_of::<BlockIq2S>() == 82);
const _: () = assert!(size_of::<BlockIq3Xxs>() == 98);
const _: () = assert!(size_of::<BlockIq3S>() == 110);

/// The eight weight formats this project runs, with their ggml/GGUF type ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum WType {
    Q8_0 = 8,
    Iq2Xxs = 16,
    Iq2Xs = 17,
    Iq3Xxs = 18,
    Iq4Nl = 20,
    Iq3S = 21,
    Iq2S = 22,
    Q2_0 = 42,
}

impl WType {
    /// All eight, in ggml id order.
    pub const ALL: [WType; 8] = [
        WType::Q8_0,
        WType::Iq2Xxs,
        WType::Iq2Xs,
        WType::Iq3Xxs,
        WType::Iq4Nl,
        WType::Iq3S,
        WType::Iq2S,
        WType::Q2_0,
    ];

    /// The ggml / GGUF type id.
    pub const fn id(self) -> u32 {
        self as u32
    }

    /// From a ggml / GGUF type id.
    pub const fn from_id(id: u32) -> Option<WType> {
        Some(match id {
            8 => WType::Q8_0,
            16 => WType::Iq2Xxs,
            17 => WType::Iq2Xs,
            18 => WType::Iq3Xxs,
            20 => WType::Iq4Nl,
            21 => WType::Iq3S,
            22 => WType::Iq2S,
            42 => WType::Q2_0,
            _ => return None,
        })
    }

    /// Values per block.
    pub const fn block_values(self) -> usize {
        match self {
            WType::Q8_0 | WType::Iq4Nl => 32,
            WType::Q2_0 => 64,
            _ => 256,
        }
    }

    /// Bytes per block.
    pub const fn block_bytes(self) -> usize {
        match self {
            WType::Q8_0 => size_of::<BlockQ8_0>(),
            WType::Q2_0 => size_of::<BlockQ2_0>(),
            WType::Iq4Nl => size_of::<BlockIq4Nl>(),
            WType::Iq2Xxs => size_of::<BlockIq2Xxs>(),
            WType::Iq2Xs => size_of::<BlockIq2Xs>(),
            WType::Iq2S => size_of::<BlockIq2S>(),
            WType::Iq3Xxs => size_of::<BlockIq3Xxs>(),
            WType::Iq3S => size_of::<BlockIq3S>(),
        }
    }

    /// Values per weight scale inside MMQ's integer sums: 16 for IQ2_XS and IQ2_S (their "Q8_0_16"
    /// epilogue, docs/ggml-reference.md §5.1), 32 for the others.
    pub const fn scale_values(self) -> usize {
        match self {
            WType::Iq2Xs | WType::Iq2S => 16,
            _ => 32,
        }
    }

    /// The name as ggml spells it.
    pub const fn name(self) -> &'static str {
        match self {
            WType::Q8_0 => "q8_0",
            WType::Q2_0 => "q2_0",
            WType::Iq4Nl => "iq4_nl",
            WType::Iq2Xxs => "iq2_xxs",
            WType::Iq2Xs => "iq2_xs",
            WType::Iq2S => "iq2_s",
            WType::Iq3Xxs => "iq3_xxs",
            WType::Iq3S => "iq3_s",
        }
    }

    /// Bytes of one row of `k` values (`k` must be a multiple of [`Self::block_values`]).
    pub const fn row_bytes(self, k: usize) -> usize {
        k / self.block_values() * self.block_bytes()
    }

    /// Entries of the type's value grid (ggml's `iq*_grid`: 8 values an entry for the IQ2
    /// types, 4 for the IQ3 types); 0 for the types without one.
    pub const fn grid_entries(self) -> usize {
        match self {
            WType::Iq2Xxs => 256,
            WType::Iq2Xs => 512,
            WType::Iq2S => 1024,
            WType::Iq3Xxs => 256,
            WType::Iq3S => 512,
            WType::Q8_0 | WType::Q2_0 | WType::Iq4Nl => 0,
        }
    }

    /// Whether the type's signs are 7-bit indices into ggml's `ksigns_iq2xs` (IQ2_XXS, IQ2_XS,
    /// IQ3_XXS); IQ2_S and IQ3_S store their sign bits.
    pub const fn sign_indices(self) -> bool {
        matches!(self, WType::Iq2Xxs | WType::Iq2Xs | WType::Iq3Xxs)
    }

    /// Offset of the grid in the type's lookup tables as a kernel keeps them in shared memory
    /// (`formats::SharedTables`): after ggml's 128-byte sign table `ksigns_iq2xs`
    /// ([`SIGN_TABLE_BYTES`]) for the types with [`Self::sign_indices`], else at 0.
    pub const fn lookup_grid_offset(self) -> usize {
        if self.sign_indices() {
            SIGN_TABLE_BYTES
        } else {
            0
        }
    }

    /// Bytes of the type's lookup tables in shared memory (see [`Self::lookup_grid_offset`];
    /// [`LOOKUP_ENTRY_BYTES`] a grid entry); 0 for the types without a grid.
    pub const fn lookup_table_bytes(self) -> usize {
        let n = self.grid_entries();
        if n == 0 {
            0
        } else {
            self.lookup_grid_offset() + n * LOOKUP_ENTRY_BYTES
        }
    }
}

/// Bytes of a grid entry in the lookup tables a kernel keeps in shared memory: an IQ3 entry
/// (4 values), or an IQ2 entry's 8 values as 8 code nibbles (`formats::SharedTables`).
pub const LOOKUP_ENTRY_BYTES: usize = 4;

/// Bytes of ggml's sign table `ksigns_iq2xs` (128 entries of 8 sign bits). In shared memory
/// its 32 words sit in the 32 banks, so a warp's 32 lookups are one wavefront (measured on the
/// H200: a table of 16-byte sign masks per entry in its place, one load and two instructions
/// fewer per 8 values, made the IQ2_XXS products 37 % slower: BENCHMARKS.md).
pub const SIGN_TABLE_BYTES: usize = 128;

/// How MMQ lays out the q8_1 activations a weight type reads (`mmq_get_q8_1_ds_layout`,
/// docs/ggml-reference.md §3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActLayout {
    /// Four f32 scales per 128 values, no sums. Every [`WType`] reads this.
    D4,
    /// Four (f16 scale, f16 sum) pairs: Q4_0, Q4_1, Q5_1, Q4_K, Q5_K, IQ1_S.
    Ds4,
    /// Two f16 scales and six f16 sums: Q2_K.
    D2s6,
}

/// The activation layout MMQ uses for ggml type `id`, for the types MMQ runs; `None` for types
/// MMQ does not run (f32, f16, bf16, ...) or ids ggml does not define.
pub const fn act_layout_of_ggml_type(id: u32) -> Option<ActLayout> {
    match id {
        // Q4_0, Q4_1, Q5_1, Q4_K, Q5_K, IQ1_S
        2 | 3 | 7 | 12 | 13 | 19 => Some(ActLayout::Ds4),
        // Q2_K
        10 => Some(ActLayout::D2s6),
        // Q5_0, Q8_0, Q3_K, Q6_K, IQ2_XXS, IQ2_XS, IQ3_XXS, IQ4_NL, IQ3_S, IQ2_S, IQ4_XS, MXFP4,
        // Q1_0 (41), Q2_0 (42), NVFP4 (40)
        6 | 8 | 11 | 14 | 16 | 17 | 18 | 20 | 21 | 22 | 23 | 39 | 40 | 41 | 42 => {
            Some(ActLayout::D4)
        }
        _ => None,
    }
}
