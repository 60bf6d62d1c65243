//! Why a player could not finish its case: the testee refused a command or is broken ([`TesteeError`]), it
//! could not be started ([`StartError`]), the case cannot be set up from its trace, or the runner's own side
//! failed. The case's report shows the text as a `CASE-SETUP` finding.

use std::time::Duration;

pub use crate::counterpart::CounterpartError;
use crate::setup::gen1::NoConsecutivePorts;
use crate::setup::SetupError;
use crate::testee::{secs, StartError, TesteeError};

/// A boxed error of the runner's own side (the wire library's profiles and encoders, the I/O layer).
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Why a player could not finish its case.
#[derive(Debug, thiserror::Error)]
pub enum PlayError {
    /// A testee could not be started.
    #[error(transparent)]
    Start(#[from] StartError),
    /// A command to a running testee failed: the testee refused it ([`TesteeError::Answer`]) or is broken.
    #[error(transparent)]
    Testee(#[from] TesteeError),
    /// A testee refused or failed its `start` in a role.
    #[error("starting {role} testee {conn}: {source}")]
    Starting {
        /// The role it was started in (`prefiller`, `decoder`).
        role: &'static str,
        /// The recorded connection it stands in for.
        conn: String,
        /// What went wrong.
        source: TesteeError,
    },
    /// A testee's `start` answer leaves out the address the runner needs.
    #[error("the {role} testee did not say its {what}")]
    Unsaid {
        /// The role it was started in.
        role: &'static str,
        /// What it did not say (`endpoint`, `URL`).
        what: &'static str,
    },
    /// The runner's own prefiller failed.
    #[error(transparent)]
    Counterpart(#[from] CounterpartError),
    /// The case's setup cannot be made from its trace and scenario.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The case's setup is neither in the scenarios file nor derivable from the trace.
    #[error(transparent)]
    MissingSetup(#[from] Box<crate::derive::MissingSetup>),
    /// The runner's own generation-1 prefillers found no run of consecutive free ports.
    #[error(transparent)]
    Ports(Box<NoConsecutivePorts<PlayError>>),
    /// The runner's own side failed: its profile, bootstrap server, sockets or encoder.
    #[error(transparent)]
    Runner(Cause),
    /// The trace's revision has no generation-2 profile.
    #[error("the trace's revision has no generation-2 profile")]
    NoProfile,
    /// The trace's revision has no bootstrap server.
    #[error("no bootstrap in this revision")]
    NoBootstrap,
    /// A recorded prefiller endpoint has no live prefiller standing in for it.
    #[error("no live prefiller for {0}")]
    NoLivePrefiller(String),
    /// A recorded decoder has no layout to play it with.
    #[error("no layout for decoder {0}")]
    NoDecoderLayout(String),
    /// `replay` against a peer already running, with a pull-family trace.
    #[error("replay against a running peer plays push-family traces; a pull-family trace runs with `run --testee`")]
    ExternalPull,
    /// Fewer `--peer` endpoints than the trace has prefillers.
    #[error("the trace has {0} prefillers; give an endpoint for each (--peer a,b,...)")]
    TooFewPeers(usize),
    /// `--listen` with a trace of several prefillers.
    #[error("--listen serves traces with one prefiller; {scenario} has {prefillers}")]
    ListenPrefillers {
        /// The trace's scenario.
        scenario: String,
        /// How many prefillers it has.
        prefillers: usize,
    },
    /// A recorded request the runner replays does not decode.
    #[error("recorded request {index}: {why}")]
    RecordedRequest {
        /// Its index among the trace's exchanges.
        index: usize,
        /// Why it does not decode.
        why: String,
    },
    /// A recorded request the runner compares with does not decode.
    #[error("recorded request does not decode")]
    RecordedRequestUndecodable,
    /// A recorded reply the runner compares with does not decode.
    #[error("recorded reply does not decode")]
    RecordedReplyUndecodable,
    /// Something did not finish in time (the whole case, [`super::bounded`]).
    #[error("{what}: no answer within {}", secs(*waited))]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long.
        waited: Duration,
    },
}

impl PlayError {
    /// The runner's own side failed.
    pub fn runner(e: impl Into<Cause>) -> PlayError {
        PlayError::Runner(e.into())
    }
    /// `start` in `role` for recorded connection `conn` failed.
    pub fn starting<'a>(role: &'static str, conn: &'a str) -> impl FnOnce(TesteeError) -> PlayError + 'a {
        move |source| PlayError::Starting { role, conn: conn.to_string(), source }
    }
    /// The testee's own error text when a testee refused a command; `None` for every other failure.
    pub fn refusal(&self) -> Option<&str> {
        match self {
            PlayError::Testee(e) | PlayError::Starting { source: e, .. } => e.refusal(),
            _ => None,
        }
    }
}
