//! The side stream: long, bandwidth-bound work beside the main stream's short serial kernels (the
//! scatter's quantizer and gather beside its count, offsets, place and the tile list:
//! host/src/moe/scatter.rs), ordered against the main stream by events only. Work queued on it
//! after [`Side::fork`] starts after everything queued on the main stream before;
//! [`SideJoin::join`] makes the main stream wait for it. The main stream has the device's
//! greatest stream priority and the side stream its least (`Gpu::open`), so that the CTAs of a
//! short main-stream kernel start before the waiting CTAs of a long side-stream one.

use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};

use crate::error::{DriverOp, Result};

/// A second stream and the three events that order it against the main one.
pub struct Side {
    pub stream: Arc<CudaStream>,
    fork: CudaEvent,
    mid: CudaEvent,
    join: CudaEvent,
}

impl Side {
    pub(super) fn new(ctx: &Arc<CudaContext>, priority: i32) -> Result<Side> {
        let ev = || {
            ctx.new_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))
                .op("cuEventCreate")
        };
        Ok(Side {
            stream: ctx
                .new_stream_with_priority(priority)
                .op("cuStreamCreateWithPriority (side stream)")?,
            fork: ev()?,
            mid: ev()?,
            join: ev()?,
        })
    }

    /// The side stream waits for everything queued on `main` so far; returns the join that
    /// the main stream must make before it touches what the side stream writes.
    pub fn fork<'a>(&'a self, main: &'a CudaStream) -> Result<SideJoin<'a>> {
        self.fork.record(main).op("cuEventRecord (fork)")?;
        self.stream
            .wait(&self.fork)
            .op("cuStreamWaitEvent (fork)")?;
        Ok(SideJoin(Some((self, main))))
    }
}

/// Side-stream work queued since a [`Side::fork`], not yet waited for by the main stream.
/// Dropping it joins too (errors then go unreported), so no path can read the side stream's
/// buffers unordered.
#[must_use = "the main stream must join the side stream before it reads its buffers"]
pub struct SideJoin<'a>(Option<(&'a Side, &'a CudaStream)>);

impl SideJoin<'_> {
    /// No side-stream work: joining does nothing.
    pub fn none() -> Self {
        SideJoin(None)
    }

    /// The side stream waits for everything queued on the main stream so far (a second fork
    /// point inside the same side work).
    pub fn side_waits_main(&self) -> Result<()> {
        if let Some((side, main)) = self.0 {
            side.mid.record(main).op("cuEventRecord (side wait)")?;
            side.stream
                .wait(&side.mid)
                .op("cuStreamWaitEvent (side wait)")?;
        }
        Ok(())
    }

    /// The main stream waits for the side stream's work; later calls do nothing.
    pub fn join(&mut self) -> Result<()> {
        if let Some((side, main)) = self.0.take() {
            side.join.record(&side.stream).op("cuEventRecord (join)")?;
            main.wait(&side.join).op("cuStreamWaitEvent (join)")?;
        }
        Ok(())
    }
}

impl Drop for SideJoin<'_> {
    fn drop(&mut self) {
        let _ = self.join();
    }
}
