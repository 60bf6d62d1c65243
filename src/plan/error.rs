//! The exceptions vLLM's planner raises, as values.
//!
//! In vLLM 0.33.0 an exception raised while a prefiller handles a pull (`send_kv_to_decode`) is caught by
//! `MooncakeConnectorWorker._sender_worker`, which replies `ERROR` with `err_msg = str(exception)`
//! (`mooncake_connector.py`). [`PlanError::err_msg`] is that text; [`Display`](std::fmt::Display) gives the
//! `"<ExceptionType>: <message>"` form the golden files record.

use std::fmt;

/// Which exception type vLLM raises (or, for the last two variants, where this crate stops instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ExceptionKind {
    /// A failed `assert` (the message may be empty: an assert without a message).
    AssertionError,
    /// A Python list index out of range.
    IndexError,
    /// A missing dict key; the message is the `repr` of the key, as `str(KeyError(k))` gives.
    KeyError,
    /// numpy refusing to broadcast two arrays.
    ValueError,
    /// Python integer `//` or `%` by zero.
    ZeroDivisionError,
    /// Not a vLLM exception: a value outside the integer range this crate plans with (`i64` inputs, `u64`
    /// descriptors). vLLM computes with unbounded Python integers and would hand such a value to the transfer
    /// engine's binding, which rejects it with its own text.
    OutOfRange,
    /// Not a vLLM exception: a result larger than [`crate::limits::MAX_PLAN_RANKS`]. vLLM would build the
    /// list (or exhaust memory trying).
    LimitExceeded,
}

impl ExceptionKind {
    /// The Python class name (or this crate's name for the two non-Python kinds).
    pub fn name(self) -> &'static str {
        match self {
            ExceptionKind::AssertionError => "AssertionError",
            ExceptionKind::IndexError => "IndexError",
            ExceptionKind::KeyError => "KeyError",
            ExceptionKind::ValueError => "ValueError",
            ExceptionKind::ZeroDivisionError => "ZeroDivisionError",
            ExceptionKind::OutOfRange => "OutOfRange",
            ExceptionKind::LimitExceeded => "LimitExceeded",
        }
    }
}

/// An exception raised by one of vLLM's planning functions, with the exact message it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanError {
    /// The exception class.
    pub kind: ExceptionKind,
    /// `str(exception)`: what vLLM puts in `err_msg` when this escapes `send_kv_to_decode`.
    pub message: String,
}

impl PlanError {
    pub(crate) fn new(kind: ExceptionKind, message: impl Into<String>) -> Self {
        PlanError { kind, message: message.into() }
    }
    /// A failed `assert cond, message`.
    pub(crate) fn assertion(message: impl Into<String>) -> Self {
        Self::new(ExceptionKind::AssertionError, message)
    }
    /// `IndexError: list index out of range`.
    pub(crate) fn list_index() -> Self {
        Self::new(ExceptionKind::IndexError, "list index out of range")
    }
    pub(crate) fn out_of_range(what: &str) -> Self {
        Self::new(ExceptionKind::OutOfRange, format!("{what} does not fit the planner's integer range"))
    }
    /// The text vLLM's generic handler sends as `err_msg`.
    pub fn err_msg(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.name(), self.message)
    }
}

impl std::error::Error for PlanError {}
