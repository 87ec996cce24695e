//! GPU backend: LSD radix sort and whole suffix arrays on an NVIDIA GPU through cudarc.
//!
//! cudarc loads libcuda and libnvrtc at run time, so a build with `--features gpu` runs (and fails
//! cleanly in [`GpuSort::open`]) on machines without CUDA. The kernels (`kernels.cu`, `saca.cu`)
//! are CUDA C compiled by NVRTC to PTX for the device's architecture on the first GPU sort of the
//! process and cached.
//!
//! The result of a sort is exactly the ascending order of the CPU backend (keys are compared as
//! whole unsigned integers). Inputs of fewer than [`MIN_GPU_KEYS`] keys are sorted by the CPU
//! backend; a sort that fails on the device before it touched the caller's keys is redone on the
//! CPU, with a warning.
//!
//! | module | what |
//! |---|---|
//! | `state` | what a [`GpuSort`] holds: the device, its kernels, the sort engine's memory, the last [`Profile`] |
//! | `backend` | [`GpuSort`]: opening it, its settings; [`crate::local::LocalSort`] |
//! | `device` | finding and opening the device (context, streams), kernel launches, events |
//! | `kernels` | NVRTC compilation, the PTX caches (process and disk), the loaded kernels (the suffix array's too) |
//! | `buffer` | `DeviceBuffer`: the one owner of device memory, freed when dropped |
//! | `sort` | the radix sort engine (passes, grouped sorts with overlapped copies, chunks) |
//! | `merge` | the CPU merge of sorted chunks |
//! | `stage` | host ↔ device transfers through pinned staging buffers, or directly |
//! | `host_mem` | page-locked host memory for [`HostBuf`](crate::local::HostBuf) |
//! | [`saca`] | whole suffix arrays on the device (the build in `saca/engine.rs`); [`crate::local::DeviceSuffixArray`] |
//! | `lazy` | [`LazyGpu`]: the backend that opens its device at its first use |
//! | `error` | [`GpuError`] |

/// Kernel parameter array: pointers to the given locals (which must outlive the launch call),
/// each a [`KernelArg`].
macro_rules! params {
    ($($a:ident),*) => { [$($crate::local::gpu::kernel_arg(&$a)),*] };
}

/// A value that a kernel takes as a parameter: the 32- and 64-bit integers and the device
/// addresses (`CUdeviceptr`, u64) of the kernels' signatures. Nothing else can get into a
/// parameter list (an owning buffer, say, instead of its address).
trait KernelArg: Copy {}
impl KernelArg for u32 {}
impl KernelArg for u64 {}

/// The address of a kernel parameter, as the driver takes it.
fn kernel_arg<T: KernelArg>(a: &T) -> *mut std::ffi::c_void {
    a as *const T as *mut std::ffi::c_void
}

mod backend;
mod buffer;
mod device;
mod error;
mod host_mem;
mod kernels;
mod lazy;
mod merge;
pub mod saca;
mod sort;
mod stage;
mod state;

pub use error::GpuError;
pub use lazy::LazyGpu;
pub use saca::{SacaText, MIN_GPU_SA};
pub use sort::{GpuKey, MIN_GPU_KEYS};
pub use state::{GpuSort, Profile};
