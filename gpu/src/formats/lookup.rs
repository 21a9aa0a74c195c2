//! The grid formats' lookup tables as a kernel keeps them in shared memory: the image a kernel
//! copies in its prologue ([`lookup_table_word`]: for the types with 7-bit sign indices ggml's
//! sign table `ksigns_iq2xs` (`layout::SIGN_TABLE_BYTES`), then the type's grid at
//! `WType::lookup_grid_offset`, 4 bytes an entry) and, on the GPU, the block reader that looks
//! its entries up there ([`SharedTables`]). A warp's 32 lookups of random entries cost a few
//! shared-memory wavefronts (bank conflicts; one for the sign table, whose 32 words sit in the
//! 32 banks) where the same loads from the constant tables in global memory take one L1 tag
//! lookup per cache line they touch.
//!
//! The IQ2 grids' entries (8 bytes, each one of three levels) are kept as 8 code nibbles
//! (`words::iq2_entry_codes`, 4 bytes) and expanded with their signs by two `prmt`s
//! (`words::iq2_signed_values`): a warp's 32 random 4-byte lookups cost about 3.2-3.4
//! wavefronts where 8-byte ones cost 4.4-6 (a random model of the banks), and the table is half
//! the size.

use super::words::iq2_entry_codes;
use crate::layout::{LOOKUP_ENTRY_BYTES, SIGN_TABLE_BYTES, WType};
use crate::tables::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS};

// The layout's table sizes are the tables'.
const _: () = {
    assert!(WType::Iq2Xxs.grid_entries() == IQ2XXS_GRID.len());
    assert!(WType::Iq2Xs.grid_entries() == IQ2XS_GRID.len());
    assert!(WType::Iq2S.grid_entries() == IQ2S_GRID.len());
    assert!(WType::Iq3Xxs.grid_entries() == IQ3XXS_GRID.len());
    assert!(WType::Iq3S.grid_entries() == IQ3S_GRID.len());
    assert!(SIGN_TABLE_BYTES == KSIGNS_IQ2XS.len());
    assert!(LOOKUP_ENTRY_BYTES == 4);
};

/// An IQ2 grid as code words (`iq2_entry_codes`), computed at compile time.
const fn codes_of<const N: usize>(grid: &[u64; N]) -> [u32; N] {
    let mut c = [0u32; N];
    let mut i = 0;
    while i < N {
        c[i] = iq2_entry_codes(grid[i]);
        i += 1;
    }
    c
}

static IQ2XXS_CODES: [u32; 256] = codes_of(&IQ2XXS_GRID);
static IQ2XS_CODES: [u32; 512] = codes_of(&IQ2XS_GRID);
static IQ2S_CODES: [u32; 1024] = codes_of(&IQ2S_GRID);

/// Word `i` (little-endian) of type `w`'s lookup-table image (`i` below
/// `w.lookup_table_bytes() / 4`; masked, so any `i` reads inside the tables).
#[inline(always)]
pub fn lookup_table_word(w: WType, i: usize) -> u32 {
    let mut k = i;
    if w.sign_indices() {
        const SIGN_WORDS: usize = SIGN_TABLE_BYTES / 4;
        if i < SIGN_WORDS {
            let b = |j: usize| KSIGNS_IQ2XS[(4 * i + j) & 127] as u32;
            return b(0) | b(1) << 8 | b(2) << 16 | b(3) << 24;
        }
        k -= SIGN_WORDS;
    }
    let word = |t: &[u32]| t[k & (t.len() - 1)];
    match w {
        WType::Iq2Xxs => word(&IQ2XXS_CODES),
        WType::Iq2Xs => word(&IQ2XS_CODES),
        WType::Iq2S => word(&IQ2S_CODES),
        WType::Iq3Xxs => word(&IQ3XXS_GRID),
        WType::Iq3S => word(&IQ3S_GRID),
        WType::Q8_0 | WType::Q2_0 | WType::Iq4Nl => 0,
    }
}

/// A block staged in shared memory (as [`super::Shared`]) whose type's lookups read the kernel's
/// shared copy of its tables.
#[cfg(target_arch = "nvptx64")]
#[derive(Clone, Copy)]
pub struct SharedTables {
    block: super::Shared,
    tables: u32,
    grid: u32,
}

#[cfg(target_arch = "nvptx64")]
impl SharedTables {
    /// # Safety
    /// `block` as `Shared::at`, a block of type `w`; `tables` a 16-byte aligned shared address
    /// holding the image of `w`'s tables ([`lookup_table_word`], `w.lookup_table_bytes()`
    /// bytes), written and visible to this thread.
    #[inline(always)]
    pub unsafe fn at(block: u32, tables: u32, w: WType) -> SharedTables {
        SharedTables {
            // SAFETY: forwarded contract.
            block: unsafe { super::Shared::at(block) },
            tables,
            grid: tables + w.lookup_grid_offset() as u32,
        }
    }
}

#[cfg(target_arch = "nvptx64")]
impl super::BlockBytes for SharedTables {
    #[inline(always)]
    fn u8(self, off: usize) -> u32 {
        self.block.u8(off)
    }
    #[inline(always)]
    fn u16(self, off: usize) -> u32 {
        self.block.u16(off)
    }
    #[inline(always)]
    fn signs(self, i: u32) -> u32 {
        // SAFETY: the sign table's 128 bytes at `tables` (a type with sign indices: `at`'s
        // contract).
        unsafe { crate::ptx::ld_shared_u8(self.tables + (i & 127)) }
    }
    #[inline(always)]
    fn grid8_signed(self, table: &'static [u64], i: u32, signs: u32) -> [u32; 2] {
        let i = i & (table.len() as u32 - 1);
        // SAFETY: the decoded type's grid (`table`'s entries as code words) at `grid`, 4-byte
        // aligned.
        super::iq2_signed_values(
            unsafe { crate::ptx::ld_shared_u32(self.grid + 4 * i) },
            signs,
        )
    }
    #[inline(always)]
    fn grid4(self, table: &'static [u32], i: u32) -> u32 {
        let i = i & (table.len() as u32 - 1);
        // SAFETY: the decoded type's grid (`table`, the same entries) at `grid`, 4-byte aligned.
        unsafe { crate::ptx::ld_shared_u32(self.grid + 4 * i) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::{BlockBytes, WeightBlock};
    use crate::layout::{BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs};
    use std::{vec, vec::Vec};

    /// A block read with its lookups served from a type's image, as `SharedTables` does.
    #[derive(Clone, Copy)]
    struct Image<'a> {
        block: &'a [u8],
        image: &'a [u32],
        /// The grid's first word.
        grid: usize,
    }

    impl BlockBytes for Image<'_> {
        fn u8(self, off: usize) -> u32 {
            self.block[off] as u32
        }
        fn u16(self, off: usize) -> u32 {
            u16::from_le_bytes([self.block[off], self.block[off + 1]]) as u32
        }
        fn signs(self, i: u32) -> u32 {
            let i = (i & 127) as usize;
            (self.image[i / 4] >> (8 * (i % 4))) & 0xff
        }
        fn grid8_signed(self, table: &'static [u64], i: u32, signs: u32) -> [u32; 2] {
            let k = self.grid + (i as usize & (table.len() - 1));
            crate::formats::iq2_signed_values(self.image[k], signs)
        }
        fn grid4(self, table: &'static [u32], i: u32) -> u32 {
            self.image[self.grid + (i as usize & (table.len() - 1))]
        }
    }

    /// Every group and lane of random blocks of `B` decodes the same through its image as
    /// through the static tables (all grid entries and sign indices are reached).
    fn same_through_image<B: WeightBlock + Copy>() {
        let w = B::WTYPE;
        let image: Vec<u32> = (0..w.lookup_table_bytes() / 4)
            .map(|i| lookup_table_word(w, i))
            .collect();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut bytes = vec![0u8; size_of::<B>()];
        for _ in 0..4096 {
            for b in bytes.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            // A finite scale: d = 1.0.
            bytes[0..2].copy_from_slice(&0x3c00u16.to_le_bytes());
            let via = Image {
                block: &bytes,
                image: &image,
                grid: w.lookup_grid_offset() / 4,
            };
            // SAFETY: B is plain bytes of its size (the layout's block structs).
            let blk: B = unsafe { core::ptr::read_unaligned(bytes.as_ptr() as *const B) };
            for g in 0..B::GROUPS {
                assert_eq!(B::group_q_in(via, g), blk.group_q(g), "{w:?} group {g}");
                for t in 0..4 {
                    let want = B::frag_q_in(crate::formats::Mem::of(&blk), g, t);
                    assert_eq!(B::frag_q_in(via, g, t), want, "{w:?} group {g} lane {t}");
                }
            }
        }
    }

    #[test]
    fn images_hold_the_tables() {
        same_through_image::<BlockIq2Xxs>();
        same_through_image::<BlockIq2Xs>();
        same_through_image::<BlockIq2S>();
        same_through_image::<BlockIq3Xxs>();
        same_through_image::<BlockIq3S>();
        for w in [WType::Q8_0, WType::Q2_0, WType::Iq4Nl] {
            assert_eq!(w.lookup_table_bytes(), 0);
        }
        assert_eq!(WType::Iq2S.lookup_table_bytes(), 4096);
        assert_eq!(WType::Iq2Xxs.lookup_table_bytes(), 128 + 1024);
        assert_eq!(WType::Iq3S.lookup_table_bytes(), 2048);
    }
}
