//! Offload: where a whole suffix array is built by a device instead of by the distributed
//! algorithm. One strategy, chosen once per build from the configuration ([`Offload::of`],
//! defined with the settings in `config` and held by the build's `Settings`; its work is
//! here), and asked at three places: the whole text (level 0, [`Offload::whole_text`]), a
//! recursion level of pDC3 ([`Offload::level`]) and a base case gathered on pe 0
//! ([`Offload::gathered`]). The algorithms ask it and decide nothing about devices.
//!
//! | strategy | when | the whole text | a recursion level | a gathered base case |
//! |---|---|---|---|---|
//! | `None` | no `--gpu` | the algorithm | the algorithm | libsais |
//! | `Device` | `--gpu`, p = 1 | the device (into a file streamed as it comes with `pool`) | the device, when it fits | the device, when it takes it |
//! | `Relay` | `--gpu`, p > 1 | streamed through pe 0 to its device, with `pool` ([`relay`]) | the same, when it fits | pe 0's device |
//! | `Host` | the plan's relay (`--algo node`, or chosen on one node) | streamed through pe 0 to libsais with its node's CPUs ([`relay`], [`crate::local::host`]) | the algorithm | libsais |
//!
//! Whatever the device does not take, or fails on, falls back to the CPU, decided together by
//! every pe. The device itself is the backend's ([`crate::local::DeviceSuffixArray`]); what a
//! level's characters look like to it is theirs ([`DeviceChar`]).

pub mod relay;

use std::borrow::Cow;

use bytemuck::Pod;

use crate::algo::sink::SaSink;
pub use crate::config::Offload;
use crate::dist::Layout;
use crate::error::Result;
use crate::local::host::HostSuffixArray;
use crate::local::DeviceSuffixArray;
use crate::Ctx;

/// A gathered text as a device takes it: bytes as they are, or integer values below 2^32.
pub enum DeviceText<'a> {
    Bytes(&'a [u8]),
    Ints(Cow<'a, [u32]>),
}

/// A character of a level's text as a device takes it: its value, in the same order as the
/// characters (the device takes values below 2^32), and a gathered text's form.
pub trait DeviceChar: Pod + Send + Sync {
    /// The value the device sorts by.
    fn device_val(self) -> u64;

    /// The whole gathered `text` as the device takes it; None: it cannot (a value of 2^32 or
    /// more). Integer values by default.
    fn device_text(text: &[Self]) -> Option<DeviceText<'_>> {
        let narrow: Option<Vec<u32>> = text
            .iter()
            .map(|&c| u32::try_from(c.device_val()).ok())
            .collect();
        Some(DeviceText::Ints(Cow::Owned(narrow?)))
    }
}

/// The strategy's work: what it is asked, for each kind of text.
impl Offload {
    /// Whether a level's names of at most 256 values may be held as bytes: not where a device
    /// may take the level (it takes levels as integers).
    pub(crate) fn names_as_bytes(self) -> bool {
        matches!(self, Offload::None | Offload::Host)
    }

    /// The whole byte text (level 0) for `sink`, built by the device when it takes it: Some(this
    /// pe's part, or None where it was written into the sink's file); None on every pe: the
    /// distributed algorithm builds it. Collective.
    pub(crate) fn whole_text(
        self,
        ctx: &Ctx,
        text: &[u8],
        layout: &Layout,
        sink: &SaSink,
    ) -> Option<Result<Option<Vec<u64>>>> {
        let pool = match self {
            Offload::None => return None,
            Offload::Device { pool } | Offload::Relay { pool } => pool,
            Offload::Host => true,
        };
        // libsais with the node's CPUs on pe 0, or pe 0's device.
        let host = (self == Offload::Host && ctx.comm.rank() == 0)
            .then(|| HostSuffixArray::new(&ctx.node_cpus, ctx.config.threads));
        let (device, phase) = match self {
            Offload::Host => (
                host.as_ref().map(|h| h as &dyn DeviceSuffixArray),
                HOST_PHASE,
            ),
            _ => (ctx.device_suffix_array(), "device suffix array"),
        };
        // Into a file, pe 0 writes what the device gives (no pe holds its part, nothing goes back
        // through MPI).
        if let (Some(out), true) = (sink.file(), pool) {
            return relay::to_file(ctx, device, phase, text, layout, out).map(|r| r.map(|()| None));
        }
        let sa = match self {
            Offload::Device { .. } => ctx.phase(phase, || {
                ctx.device_suffix_array()?.suffix_array_bytes(text)
            })?,
            _ if pool => ctx.phase(phase, || relay::bytes(ctx, device, text, layout))?,
            _ => return None,
        };
        Some(Ok(sink.deliver_layout(ctx, sa, layout)))
    }

    /// This pe's part of the suffix array of a recursion level (`depth` ≥ 1) of `t`, built whole
    /// on pe 0's device when it fits there; None on every pe: the level recurses as without a
    /// device. Collective: pe 0's capacity decides for all.
    pub(crate) fn level<C: DeviceChar>(
        self,
        ctx: &Ctx,
        depth: usize,
        t: &[C],
        layout: &Layout,
    ) -> Option<Vec<u64>> {
        if !self.has_device() || depth == 0 || !fits(ctx, layout.len()) {
            return None;
        }
        // No pe gathers the level: its characters stream through pe 0 to the device and back.
        ctx.phase("device suffix array", || relay::ints(ctx, t, layout))
    }

    /// The suffix array of a text gathered whole on pe 0 (a base case), by the device when it
    /// takes it; None: libsais builds it. Local (pe 0).
    pub(crate) fn gathered<C: DeviceChar>(self, ctx: &Ctx, all: &[C]) -> Option<Vec<u64>> {
        if !self.has_device() {
            return None;
        }
        let device = ctx.device_suffix_array()?;
        match C::device_text(all)? {
            DeviceText::Bytes(b) => device.suffix_array_bytes(b),
            DeviceText::Ints(v) => device.suffix_array_ints(&v),
        }
    }
}

/// The phase of the whole text's suffix array built by libsais on pe 0 (`Offload::Host`).
pub const HOST_PHASE: &str = "suffix array on pe 0 (libsais)";

impl Offload {
    /// Whether the strategy has a device (recursion levels and base cases may go to it).
    fn has_device(self) -> bool {
        matches!(self, Offload::Device { .. } | Offload::Relay { .. })
    }
}

/// Whether a text of `n` characters fits pe 0's device now. Collective (pe 0 decides).
fn fits(ctx: &Ctx, n: usize) -> bool {
    let mut cap = if ctx.comm.rank() == 0 {
        ctx.device_suffix_array()
            .map_or(0, |d| d.suffix_array_max_len()) as u64
    } else {
        0
    };
    ctx.comm.broadcast(&mut cap, 0);
    n as u64 <= cap
}
