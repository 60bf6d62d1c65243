//! `mooncake-conformance tap`: records a live generation-2 deployment without changing it.
//!
//! The tap is the bootstrap server prefillers register with and decoders query (`front`); for every
//! registered prefiller worker it opens a ROUTER of its own and hands decoders that endpoint instead of the
//! worker's; it forwards every ZeroMQ message both ways unchanged (`relay`); it writes the traffic as a trace
//! with the real endpoints, appending each event as it happens (`recorder`, `writer`); and it checks the
//! traffic against the spec as it flows, with the checks `validate` runs (`live`).
//!
//! A tap sees only the wire: not the transfer-engine calls, not what the connectors report to their schedulers.
//! Its traces say so (`unobserved`), and the checks that need those (`TE-CALLS`, `P-FINISHED-SENDING`,
//! `D-OUTCOME`) do not apply to them.

mod front;
mod live;
mod recorder;
mod relay;
mod workers;
mod writer;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mooncake_wire::bootstrap::BootstrapSpec;
use mooncake_wire::proto::Registry;
use mooncake_wire::spec::{Revision, Spec};
use tokio::sync::{mpsc, oneshot};

use crate::run::RunError;
use mooncake_trace::finding::Finding;

/// What to tap and where to write.
#[derive(Clone, Debug)]
pub struct TapConfig {
    /// `HOST:PORT` the tap's bootstrap server listens on (port 0 picks one).
    pub bootstrap_bind: String,
    /// The real bootstrap server (`http://host:port`) to forward every request to; none: the tap answers
    /// with the revision's registry.
    pub upstream: Option<String>,
    /// The trace file to write.
    pub out: PathBuf,
    /// Any name the spec's resolver takes; none: read off the first pull request.
    pub revision: Option<String>,
    /// The header's `scenario` (a `conformance/scenarios.toml` entry lets `run` replay the trace).
    pub scenario: String,
    /// The IP the tap's ROUTERs bind (decoders must reach it).
    pub zmq_host: String,
    /// How long a pull may wait for its terminal reply before it is checked as it is (default: the revision's
    /// abort timeout + 60 s, as vLLM's decoder waits).
    pub reply_timeout: Option<Duration>,
}

impl TapConfig {
    /// A tap on `bootstrap_bind` writing `out`: no upstream, the revision read off the traffic, scenario `tap`,
    /// ROUTERs on 127.0.0.1, the revision's reply timeout.
    pub fn new(bootstrap_bind: &str, out: PathBuf) -> TapConfig {
        TapConfig {
            bootstrap_bind: bootstrap_bind.into(),
            upstream: None,
            out,
            revision: None,
            scenario: "tap".into(),
            zmq_host: "127.0.0.1".into(),
            reply_timeout: None,
        }
    }
}

/// What the tap saw, in the order it happened (one channel, so the trace keeps causality: a `/query` answer is
/// recorded before the pulls it leads to).
pub(crate) enum Seen {
    Zmq(relay::Obs),
    Http(HttpSeen),
    /// `environment`: the tap's own surroundings failed (the upstream server, the disk).
    Trouble {
        environment: bool,
        text: String,
    },
}

/// One bootstrap exchange as the real server saw it.
pub(crate) struct HttpSeen {
    pub method: String,
    /// With the query string, if any.
    pub path: String,
    pub request: Vec<u8>,
    pub status: u16,
    /// The real answer (the workers' own endpoints).
    pub response: Vec<u8>,
}

/// What the tap tells as it goes.
pub enum Say<'a> {
    /// Something a check found.
    Finding(&'a Finding),
    /// A remark that is not a finding.
    Note(&'a str),
}

/// Where the tap prints what it tells as it goes.
pub type Printer = Box<dyn FnMut(Say<'_>) + Send>;

/// The end of a tap.
#[derive(Debug)]
pub struct TapReport {
    /// The trace written.
    pub path: PathBuf,
    /// Events written (ZeroMQ and HTTP).
    pub events: u64,
    /// ZeroMQ events written.
    pub zmq: u64,
    /// HTTP events written.
    pub http: u64,
    /// Decoder pull requests seen (each opens an exchange).
    pub requests: u64,
    /// Exchanges checked (ended, or waited past the reply timeout).
    pub exchanges: u64,
    /// The revision the trace was checked against (and its header names).
    pub revision: String,
    /// The first findings (up to 10,000; every one was printed as it happened).
    pub findings: Vec<Finding>,
    /// How many findings there were in all.
    pub finding_count: u64,
    /// Remarks that are not findings (the first 10,000).
    pub notes: Vec<String>,
    /// Failures of the tap's surroundings (upstream, disk).
    pub troubles: Vec<String>,
}

impl TapReport {
    /// No finding, and the tap's surroundings did not fail.
    pub fn ok(&self) -> bool {
        self.troubles.is_empty() && self.finding_count == 0
    }

    /// One line saying what the tap saw and found, and where the trace is.
    pub fn summary(&self) -> String {
        let n = |k: u64, one: &str, many: &str| format!("{k} {}", if k == 1 { one } else { many });
        format!(
            "tap: {} ({} zmq, {} http); {}, {} at {}; {}{} — {}; trace {}",
            n(self.events, "event", "events"),
            self.zmq,
            self.http,
            n(self.requests, "decoder request", "decoder requests"),
            n(self.exchanges, "exchange checked", "exchanges checked"),
            self.revision,
            n(self.finding_count, "finding", "findings"),
            if self.troubles.is_empty() {
                String::new()
            } else {
                format!(", {}", n(self.troubles.len() as u64, "environment failure", "environment failures"))
            },
            if self.ok() { "OK" } else { "FAILED" },
            self.path.display()
        )
    }
}

/// A finding as one line (as `validate` prints them).
pub fn finding_line(f: &Finding) -> String {
    let at = match (f.seq, f.line) {
        (Some(s), Some(l)) => format!(" seq {s} (line {l})"),
        (None, Some(l)) => format!(" line {l}"),
        _ => String::new(),
    };
    format!("[{}]{at}{}: {}", f.check, f.message.as_deref().map(|m| format!(" {m}")).unwrap_or_default(), f.detail)
}

/// `--revision` → the generation-2 revision and the release the header names.
fn resolve(name: &str) -> Result<(Arc<Revision>, String), RunError> {
    let r = Spec::builtin().resolve(name).map_err(|e| RunError::usage(format!("--revision {e}")))?;
    if r.revision.family != "push" || r.revision.generation != 2 {
        return Err(RunError::usage(format!(
            "--revision {name}: {} is not a generation-2 revision of vLLM's MooncakeConnector (the tap needs the bootstrap server and DEALER/ROUTER pulls)",
            r.revision.revision
        )));
    }
    let release = r.release.clone().or_else(|| r.revision.releases.last().cloned()).unwrap_or_default();
    Ok((r.revision, release))
}

/// A running tap.
pub struct Tap {
    front: front::Front,
    relay: Arc<relay::Relay>,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<TapReport>,
    /// What the bootstrap server does: `answering as …` or `forwarding to …`.
    pub mode: String,
}

impl Tap {
    /// Checks the configuration, binds the bootstrap server and starts recording. Usage errors (a bad
    /// revision, an unwritable `--out`) are exit 2; a port in use or an upstream that does not answer, 3.
    pub async fn start(cfg: TapConfig, say: Printer) -> Result<Tap, RunError> {
        let revision = cfg.revision.as_deref().map(resolve).transpose()?;
        let (answer, mode) = match (&cfg.upstream, &revision) {
            (Some(u), _) => {
                let hp = crate::run::http_host(u, "--upstream")?;
                crate::run::reachable(&hp, u)?;
                (front::Answerer::Upstream(u.trim_end_matches('/').to_string()), format!("forwarding to {u}"))
            }
            (None, Some((rev, _))) => {
                let spec = BootstrapSpec::new(rev.clone())
                    .ok_or_else(|| RunError::usage(format!("{} has no bootstrap server", rev.revision)))?
                    .map_err(|e| RunError::usage(e.to_string()))?;
                (
                    front::Answerer::Registry(Mutex::new(Registry::new(spec))),
                    format!("answering as {}'s bootstrap server", rev.revision),
                )
            }
            (None, None) => {
                return Err(RunError::usage("without --upstream the tap is the bootstrap server, with a revision's registry semantics: give --revision (or --upstream URL to forward to the real server)"));
            }
        };
        if cfg.out.is_dir() {
            return Err(RunError::usage(format!("--out {}: a directory, not a file", cfg.out.display())));
        }
        let (tx, mut rx) = mpsc::unbounded_channel::<Seen>();
        let emit = {
            let tx = tx.clone();
            Box::new(move |o: relay::Obs| {
                let _ = tx.send(Seen::Zmq(o));
            })
        };
        let relay =
            Arc::new(relay::Relay::start(&cfg.zmq_host, emit).map_err(|e| RunError::environment(e.to_string()))?);
        let workers = Arc::new(workers::Workers::default());
        let front = front::Front::start(&cfg.bootstrap_bind, answer, workers.clone(), relay.clone(), tx).await?;
        let writer = writer::TraceWriter::create(&cfg.out, &serde_json::json!({}))
            .map_err(|e| RunError::usage(format!("--out {e}")))?;
        let setup = recorder::Setup {
            scenario: cfg.scenario.clone(),
            bootstrap_url: front.url(),
            upstream: cfg.upstream.clone(),
        };
        let mut rec =
            recorder::Recorder::new(writer, live::Live::new(cfg.reply_timeout), workers, say, setup, revision)
                .map_err(|e| RunError::environment(e.to_string()))?;
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    m = rx.recv() => match m {
                        Some(s) => rec.handle(s),
                        None => break,
                    },
                    _ = tick.tick() => rec.tick(),
                }
            }
            while let Ok(s) = rx.try_recv() {
                rec.handle(s);
            }
            rec.finish()
        });
        Ok(Tap { front, relay, stop, task, mode })
    }

    /// The bootstrap server's URL (what prefillers and decoders are configured with).
    pub fn url(&self) -> String {
        self.front.url()
    }

    /// Stops forwarding and recording: what was forwarded is recorded and checked, the header completed.
    pub async fn finish(self) -> TapReport {
        drop(self.front);
        let relay = self.relay;
        // Joining the relay thread blocks; everything it forwarded has been reported once it returns.
        let _ = tokio::task::spawn_blocking(move || relay.stop()).await;
        let _ = self.stop.send(());
        match self.task.await {
            Ok(r) => r,
            Err(e) => TapReport {
                path: PathBuf::new(),
                events: 0,
                zmq: 0,
                http: 0,
                requests: 0,
                exchanges: 0,
                revision: String::new(),
                findings: vec![],
                finding_count: 0,
                notes: vec![],
                troubles: vec![format!("the recorder failed: {e}")],
            },
        }
    }
}
