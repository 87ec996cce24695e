//! The one error type of the GPU backend.
//!
//! Messages are lowercase and say what was being done. Errors of opening the device cross into
//! the library as [`crate::Error::Unsupported`] (prefixed "--gpu: "); a failure of a sort or a
//! suffix array never does: the backend logs it and the CPU takes over.

use std::fmt;

use cudarc::driver::DriverError;
use cudarc::nvrtc;

/// Everything that can go wrong on the device.
#[derive(Clone, Debug)]
pub enum GpuError {
    /// The CUDA driver (libcuda.so) could not be loaded.
    NoDriver,
    /// The driver is there but NVRTC (libnvrtc.so) could not be loaded.
    NoNvrtc,
    /// The driver sees no device.
    NoDevice,
    /// The device is older than the kernels need (compute capability 7.0).
    OldDevice {
        /// The device's number.
        ordinal: usize,
        /// Its compute capability, major …
        major: i32,
        /// … and minor.
        minor: i32,
    },
    /// A driver call failed: what was being done, and the driver's error.
    Driver {
        /// What was being done.
        what: String,
        /// The driver's error.
        source: DriverError,
    },
    /// A kernel failed, found when its stream was synchronized: which, and the driver's error.
    Kernel {
        /// The kernel or the work it did.
        what: &'static str,
        /// The driver's error.
        source: DriverError,
    },
    /// NVRTC could not compile the kernels: its log.
    Compile {
        /// NVRTC's compile log.
        log: String,
    },
    /// NVRTC failed otherwise.
    Nvrtc(String),
    /// Device memory could not be allocated: the bytes asked for, and the driver's error.
    Alloc {
        /// The bytes asked for.
        bytes: usize,
        /// The driver's error.
        source: DriverError,
    },
    /// The device has too little free memory for the work: what, the bytes it needs and has.
    OutOfMemory(String),
    /// A call of the operating system failed (page-locking host memory): which, and its error.
    Os {
        /// The call.
        what: &'static str,
        /// Its error.
        message: String,
    },
    /// The input is beyond what the device path takes (its length, its values).
    Unsupported(String),
    /// A broken promise inside the backend (a bug).
    Internal(String),
}

impl fmt::Display for GpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuError::NoDriver => write!(
                f,
                "no CUDA driver found (libcuda.so could not be loaded); run on a machine with an \
                 NVIDIA GPU and its driver, or leave out --gpu"
            ),
            GpuError::NoNvrtc => write!(
                f,
                "the CUDA driver is there but NVRTC (libnvrtc.so) could not be loaded; add CUDA's \
                 lib64 folder (e.g. /usr/local/cuda/lib64) to LD_LIBRARY_PATH, or leave out --gpu"
            ),
            GpuError::NoDevice => write!(
                f,
                "the CUDA driver found no GPU on this machine; leave out --gpu"
            ),
            GpuError::OldDevice {
                ordinal,
                major,
                minor,
            } => write!(
                f,
                "device {ordinal} has compute capability {major}.{minor}; the kernels need 7.0 or newer"
            ),
            GpuError::Driver { what, source } => write!(f, "{what}: {source}"),
            GpuError::Kernel { what, source } => write!(f, "{what}: {source}"),
            GpuError::Compile { log } => {
                write!(f, "NVRTC failed to compile the sort kernels:\n{log}")
            }
            GpuError::Nvrtc(m) => write!(f, "NVRTC failed: {m}"),
            GpuError::Alloc { bytes, source } => write!(
                f,
                "cannot allocate {} MiB on the device: {source}",
                bytes >> 20
            ),
            GpuError::OutOfMemory(m) | GpuError::Unsupported(m) => write!(f, "{m}"),
            GpuError::Os { what, message } => write!(f, "{what}: {message}"),
            GpuError::Internal(m) => write!(f, "internal error: {m}"),
        }
    }
}

impl std::error::Error for GpuError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GpuError::Driver { source, .. }
            | GpuError::Kernel { source, .. }
            | GpuError::Alloc { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// A driver error with nothing said about what was being done.
impl From<DriverError> for GpuError {
    fn from(source: DriverError) -> Self {
        GpuError::Driver {
            what: "a CUDA driver call failed".into(),
            source,
        }
    }
}

impl From<nvrtc::CompileError> for GpuError {
    fn from(e: nvrtc::CompileError) -> Self {
        match e {
            nvrtc::CompileError::CompileError { log, .. } => GpuError::Compile {
                log: log.to_string_lossy().into_owned(),
            },
            e => GpuError::Nvrtc(e.to_string()),
        }
    }
}

/// The backend cannot be used: the error the library reports (and the command-line tool prints).
impl From<GpuError> for crate::Error {
    fn from(e: GpuError) -> Self {
        crate::Error::Unsupported(format!("--gpu: {e}"))
    }
}

/// Maps a driver error to [`GpuError::Driver`] saying `what` was being done.
pub(super) fn drv(what: &str) -> impl Fn(DriverError) -> GpuError + '_ {
    move |source| GpuError::Driver {
        what: what.to_string(),
        source,
    }
}

/// Maps the error of a synchronization after kernel `what` to [`GpuError::Kernel`].
pub(super) fn fault(what: &'static str) -> impl Fn(DriverError) -> GpuError {
    move |source| GpuError::Kernel { what, source }
}

#[cfg(test)]
mod tests {
    use super::GpuError;

    #[test]
    fn opening_errors_reach_the_library_with_the_flag_named() {
        let e = crate::Error::from(GpuError::NoDriver);
        assert!(matches!(e, crate::Error::Unsupported(_)));
        let m = e.to_string();
        assert!(m.starts_with("--gpu: no CUDA driver found"), "{m}");
        let m = crate::Error::from(GpuError::OldDevice {
            ordinal: 1,
            major: 6,
            minor: 1,
        })
        .to_string();
        assert_eq!(
            m,
            "--gpu: device 1 has compute capability 6.1; the kernels need 7.0 or newer"
        );
    }

    #[test]
    fn messages_name_what_failed() {
        let e = GpuError::Compile {
            log: "psa_radix.cu(3): error".into(),
        };
        assert_eq!(
            e.to_string(),
            "NVRTC failed to compile the sort kernels:\npsa_radix.cu(3): error"
        );
        let e = GpuError::Internal("SA[0..5) of 4".into());
        assert_eq!(e.to_string(), "internal error: SA[0..5) of 4");
        let e = GpuError::Os {
            what: "mmap",
            message: "Cannot allocate memory (os error 12)".into(),
        };
        assert_eq!(e.to_string(), "mmap: Cannot allocate memory (os error 12)");
    }
}
