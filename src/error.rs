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
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A user-given value is out of range or inconsistent.
    Invalid(String),
    /// The requested feature is not available in this build or on this machine.
    Unsupported(String),
    /// Another pe reported an error; it printed the message.
    Remote { pe: usize },
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

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { what, path, source } => {
                write!(f, "cannot {what} '{}': {source}", path.display())
            }
            Error::Invalid(m) => write!(f, "{m}"),
            Error::Unsupported(m) => write!(f, "{m}"),
            Error::Remote { pe } => write!(f, "pe {pe} failed (see its message)"),
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
