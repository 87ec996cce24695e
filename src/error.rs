//! The one error type of psa.
//!
//! Messages are lowercase and name the path or value at fault. An error that happens on one pe is
//! made known to all pes by [`crate::comm::Comm::agree`], so that every pe leaves with an error
//! instead of waiting in the next collective.

use std::fmt;
use std::path::PathBuf;

/// Everything that can go wrong in psa.
#[derive(Debug)]
pub enum Error {
    /// An I/O operation on `path` failed.
    Io {
        /// What was being done ("read input", "create output", …).
        what: &'static str,
        /// The file it was done to.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A user-given value is out of range or inconsistent.
    Invalid(String),
    /// The command line asks for something that must not be done (the output is the input, a
    /// value out of range): found before any input is read; the command-line tool exits with 2.
    Usage(String),
    /// Memory ran short: what was being done, the bytes wanted and the budget.
    OutOfMemory(String),
    /// The requested feature is not available in this build or on this machine.
    Unsupported(String),
    /// Another pe reported an error; it printed the message. `code` is that error's
    /// [`Error::exit_code`], so every pe leaves with the same status.
    Remote {
        /// The lowest pe that failed.
        pe: usize,
        /// Its error's exit code.
        code: u8,
    },
    /// The distributed checker found the suffix array wrong.
    CheckFailed(String),
}

/// Result with psa's error type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Wraps an I/O error with what was being done and to which path.
    pub fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            what,
            path: path.into(),
            source,
        }
    }
}

impl Error {
    /// The exit status the command-line tool gives for this error: 2 for usage errors, 1 for
    /// everything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) => 2,
            Error::Remote { code, .. } => *code,
            _ => 1,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { what, path, source } => {
                write!(f, "cannot {what} '{}': {source}", path.display())
            }
            Error::Invalid(m) | Error::Usage(m) => write!(f, "{m}"),
            Error::OutOfMemory(m) => write!(f, "out of memory: {m}"),
            Error::Unsupported(m) => write!(f, "{m}"),
            Error::Remote { pe, .. } => write!(f, "pe {pe} failed (see its message)"),
            Error::CheckFailed(m) => write!(f, "suffix array check failed: {m}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
