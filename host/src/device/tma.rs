//! Tensor maps (`CUtensorMap`) of weight tensors, for the pipelined MMQ kernels' tensor copies
//! on sm_90 (`gpu::layout::MmqTmaMap`, `MmqParams::wmap0`).

use cudarc::driver::sys;
use gpu::layout::MmqTmaMap;

use crate::error::{DriverOp, Error, Result};

/// Bytes of one encoded tensor map; the kernels read it 64-byte aligned in global memory.
pub const TMA_MAP_BYTES: usize = 128;

/// The tensor map of `m` over the tensor at device address `base` (16-byte aligned): `u8`
/// elements, the box `m.box_dims()`, no interleave or swizzle, elements outside the tensor
/// read as zero. Encoded by the driver (`cuTensorMapEncodeTiled`) without touching the device.
pub fn encode(base: u64, m: &MmqTmaMap) -> Result<[u64; TMA_MAP_BYTES / 8]> {
    if !base.is_multiple_of(16) {
        return Err(Error::Unsupported(format!(
            "tensor map of a weight tensor at {base:#x}: not 16-byte aligned"
        )));
    }
    let dims = m.dims();
    let strides = m.strides();
    let boxes = m.box_dims();
    let elem = [1u32; 3];
    // The driver writes the map only to a 64-byte aligned address (`cuTensorMapEncodeTiled`'s
    // requirement; cudarc's `CUtensorMap` is 8-byte aligned).
    let mut map = Aligned(sys::CUtensorMap { opaque: [0; 16] });
    // SAFETY: every pointer is to a live local array of the rank's length (strides: rank - 1);
    // the driver only writes `map`.
    unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map.0,
            sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
            3,
            base as *mut core::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            elem.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    }
    .result()
    .op("cuTensorMapEncodeTiled")?;
    Ok(map.0.opaque)
}

/// A tensor map at a 64-byte aligned address.
#[repr(C, align(64))]
struct Aligned(sys::CUtensorMap);
