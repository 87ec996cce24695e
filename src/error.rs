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
    /// An input psa cannot read as one: not a regular file, too large, malformed FASTA or
    /// FASTQ, a damaged gzip stream or index, a file that differs between nodes or changed while
    /// being read. The command-line tool exits with 3.
    BadInput(String),
    /// The memory budget is too small for the leanest plan: the run is refused before the input
    /// is read (a FASTA/FASTQ input after a first scan). The command-line tool exits with 4.
    Budget(String),
    /// Memory ran short: what was being done, the bytes wanted and the budget. Exit status 4.
    OutOfMemory(String),
    /// The system refused or failed an operation that the message names, where Error::Io's
    /// one path and error do not tell it (an output directory missing or not writable, a full
    /// disk, a file another node cannot see, MPI not starting). Exit status 5, as Error::Io.
    System(String),
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
    /// The exit status the command-line tool gives for this error (`psa --help` and README list
    /// them): 2 usage ([`Error::Usage`]: bad arguments, refused outputs), 3 bad input
    /// ([`Error::BadInput`]), 4 memory ([`Error::Budget`], [`Error::OutOfMemory`]), 5 a system
    /// failure ([`Error::Io`], [`Error::System`]), 1 anything else (a failed check, an unsupported
    /// feature); [`Error::Remote`] carries the failing pe's. (101 is an internal error, a
    /// panic; 128 + N a signal N.)
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) => 2,
            Error::BadInput(_) => 3,
            Error::Budget(_) | Error::OutOfMemory(_) => 4,
            Error::Io { .. } | Error::System(_) => 5,
            Error::Remote { code, .. } => *code,
            Error::Invalid(_) | Error::Unsupported(_) | Error::CheckFailed(_) => 1,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { what, path, source } => {
                write!(f, "cannot {what} '{}': {source}", path.display())
            }
            Error::Invalid(m) | Error::Usage(m) | Error::BadInput(m) => write!(f, "{m}"),
            Error::Budget(m) | Error::System(m) => write!(f, "{m}"),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind of error has its exit status, and a remote error carries the failing pe's.
    #[test]
    fn exit_statuses_by_kind() {
        let io = Error::io("read input", "x", std::io::ErrorKind::NotFound.into());
        let cases = [
            (Error::Usage("u".into()), 2),
            (Error::BadInput("b".into()), 3),
            (Error::Budget("m".into()), 4),
            (Error::OutOfMemory("o".into()), 4),
            (io, 5),
            (Error::System("s".into()), 5),
            (Error::Invalid("i".into()), 1),
            (Error::Unsupported("g".into()), 1),
            (Error::CheckFailed("c".into()), 1),
            (Error::Remote { pe: 3, code: 4 }, 4),
        ];
        for (e, code) in cases {
            assert_eq!(e.exit_code(), code, "{e:?}");
        }
        assert_eq!(Error::Budget("as given".into()).to_string(), "as given");
    }
}
