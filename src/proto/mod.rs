//! Sans-IO protocol cores (quinn-proto style): the prefiller, the decoder and the bootstrap registry as state
//! machines that take messages and `now` and return what to send, what to do, and when to wake them. They
//! never touch a socket, a clock, a thread or a random number generator; `reference-impl/` drives them over
//! real ZeroMQ and HTTP, tests drive them with an in-memory pair and a simulated clock. The protocol they
//! implement, in prose: `spec/PROTOCOL.md`, "Roles and channels".

pub mod decoder;
pub mod gen1;
mod lease;
mod lru;
pub mod memory;
pub(crate) mod planner;
pub(crate) mod prefiller;
pub(crate) mod profile;
pub mod pull;
pub(crate) mod registry;
#[cfg(feature = "testing")]
pub mod sim;
mod vllm;

pub use decoder::{
    DecoderConfig, DecoderCore, DecoderEvent, DecoderLayout, EngineTable, ExchangeId, LeaseStats, PullRequest,
    QueryError,
};
pub use lease::{LeaseError, LeaseRequest};
pub use planner::{Descriptor, ReadyReq, SenderPlanner, TransferBatch};
pub use prefiller::{PeerId, PrefillerCore, PrefillerEvent, PrefillerStats, Transmit, WriteId};
pub use profile::{CarryError, Inbound, ProfileError, Rules, WireProfile};
pub use registry::{Registry, Reply};

mod machine;
pub use machine::{DecoderMachine, PrefillerMachine, SocketKind};
