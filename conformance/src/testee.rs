//! Connections to testees (`conformance/TESTEE.md`): the built-in reference peer in-process, or any command
//! that speaks the protocol on its standard input and output.

use std::collections::VecDeque;
use std::io::Write as _;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mooncake_testee_protocol::{read_answer, Command, Done};
use serde_json::{json, Value as J};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command as Process};

/// Which implementation to test.
#[derive(Clone, Debug)]
pub enum TesteeSpec {
    /// `mooncake-peer`, in this process.
    Builtin,
    /// A command line, split with shell quoting (`./peer --name 'a b'`); see [`split_command`].
    Command(String),
    /// The built-in peer with deliberate faults in what it sends (to test the runner itself).
    BuiltinWithFaults(Vec<String>),
}

impl TesteeSpec {
    pub fn describe(&self) -> String {
        match self {
            TesteeSpec::Builtin => "built-in reference peer (mooncake-peer)".into(),
            TesteeSpec::Command(c) => c.clone(),
            TesteeSpec::BuiltinWithFaults(f) => format!("built-in reference peer with faults {}", f.join(", ")),
        }
    }
}

/// A testee command line as a shell would split it (quotes and backslashes), without running a shell.
pub fn split_command(cmd: &str) -> Result<Vec<String>, String> {
    let argv = shell_words::split(cmd).map_err(|e| format!("--testee `{cmd}`: {e}"))?;
    if argv.is_empty() {
        return Err("--testee: an empty command".into());
    }
    Ok(argv)
}

pub use mooncake_testee_protocol::Hello;

/// The standard error of the testee processes of one case: the last lines in memory (shown when the case
/// fails), every line in a file with `--testee-log DIR`; and whether a testee died.
#[derive(Clone, Default)]
pub struct TesteeLog(Arc<Mutex<LogState>>);

#[derive(Default)]
struct LogState {
    tail: VecDeque<String>,
    file: Option<std::fs::File>,
    started: usize,
    died: Option<String>,
}

/// Lines of standard error kept in memory per case.
const TAIL_LINES: usize = 200;

impl TesteeLog {
    /// A log that also writes every line to `file` (created or truncated).
    pub fn to_file(file: &std::path::Path) -> Result<TesteeLog, String> {
        let f = std::fs::File::create(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let log = TesteeLog::default();
        log.0.lock().expect("log").file = Some(f);
        Ok(log)
    }
    fn push(&self, line: String) {
        let mut st = self.0.lock().expect("log");
        if let Some(f) = st.file.as_mut() {
            let _ = writeln!(f, "{line}");
        }
        if st.tail.len() == TAIL_LINES {
            st.tail.pop_front();
        }
        st.tail.push_back(line);
    }
    fn started(&self, cmd: &str) -> usize {
        let mut st = self.0.lock().expect("log");
        st.started += 1;
        let n = st.started;
        if let Some(f) = st.file.as_mut() {
            let _ = writeln!(f, "== testee {n}: {cmd}");
        }
        n
    }
    fn mark_died(&self, why: &str) {
        let mut st = self.0.lock().expect("log");
        if st.died.is_none() {
            st.died = Some(why.to_string());
        }
    }
    /// The last `n` lines of standard error.
    pub fn tail(&self, n: usize) -> Vec<String> {
        let st = self.0.lock().expect("log");
        st.tail.iter().skip(st.tail.len().saturating_sub(n)).cloned().collect()
    }
    /// Why a testee of this case died, if one did.
    pub fn died(&self) -> Option<String> {
        self.0.lock().expect("log").died.clone()
    }
}

/// Why a testee could not be started: `environment` when it started and then failed (died, never said
/// hello) — exit 3 — rather than a command that cannot run at all or does not speak the protocol (exit 2).
#[derive(Clone, Debug)]
pub struct StartError {
    pub environment: bool,
    pub message: String,
}

impl From<StartError> for String {
    fn from(e: StartError) -> String {
        e.message
    }
}

#[allow(clippy::large_enum_variant)] // one per case, never moved in a loop
pub enum Testee {
    Builtin(Box<mooncake_reference::testee::Testee>, Vec<String>),
    Process { child: Child, stdin: ChildStdin, lines: Lines<BufReader<ChildStdout>>, log: TesteeLog },
}

const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// `status` with the last lines of standard error, for messages about a testee that stopped.
fn with_tail(msg: String, log: &TesteeLog) -> String {
    let tail = log.tail(5);
    if tail.is_empty() {
        format!("{msg} (it wrote nothing on standard error)")
    } else {
        format!("{msg}; its standard error ended with:\n    {}", tail.join("\n    "))
    }
}

/// How a process ended, as people read it.
fn exit_text(st: std::process::ExitStatus) -> String {
    match st.code() {
        Some(c) => format!("exit status {c}"),
        None => {
            #[cfg(unix)]
            if let Some(sig) = std::os::unix::process::ExitStatusExt::signal(&st) {
                return format!("killed by signal {sig}");
            }
            "no exit status".into()
        }
    }
}

impl Testee {
    pub async fn start(spec: &TesteeSpec) -> Result<(Testee, Hello), StartError> {
        Self::start_logged(spec, None).await
    }

    /// Starts a testee; a process's standard error goes to `log` (a log of its own when `None`).
    pub async fn start_logged(spec: &TesteeSpec, log: Option<&TesteeLog>) -> Result<(Testee, Hello), StartError> {
        let usage = |message: String| StartError { environment: false, message };
        match spec {
            TesteeSpec::Builtin => Ok((
                Testee::Builtin(Box::default(), vec![]),
                Ok::<_, String>(mooncake_reference::testee::hello()).map_err(usage)?,
            )),
            TesteeSpec::BuiltinWithFaults(f) => Ok((
                Testee::Builtin(Box::default(), f.clone()),
                Ok::<_, String>(mooncake_reference::testee::hello()).map_err(usage)?,
            )),
            TesteeSpec::Command(cmd) => {
                let log = log.cloned().unwrap_or_default();
                let argv = split_command(cmd).map_err(usage)?;
                let mut child = Process::new(&argv[0])
                    .args(&argv[1..])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .kill_on_drop(true)
                    .spawn()
                    .map_err(|e| usage(format!("cannot start testee `{}`: {e}", argv[0])))?;
                log.started(cmd);
                let stderr = child.stderr.take().expect("piped");
                let sink = log.clone();
                tokio::spawn(async move {
                    let mut lines = BufReader::new(stderr).lines();
                    while let Ok(Some(l)) = lines.next_line().await {
                        sink.push(l);
                    }
                });
                let stdin = child.stdin.take().expect("piped");
                let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
                let env = |message: String, log: &TesteeLog| {
                    log.mark_died(&message);
                    StartError { environment: true, message: with_tail(message, log) }
                };
                let line = match tokio::time::timeout(ANSWER_TIMEOUT, lines.next_line()).await {
                    Err(_) => {
                        return Err(env(format!("testee `{cmd}` sent no hello within {}", secs(ANSWER_TIMEOUT)), &log))
                    }
                    Ok(Err(e)) => return Err(env(format!("testee `{cmd}`: reading its standard output: {e}"), &log)),
                    Ok(Ok(None)) => {
                        let st = tokio::time::timeout(Duration::from_secs(2), child.wait())
                            .await
                            .ok()
                            .and_then(|r| r.ok())
                            .map(exit_text)
                            .unwrap_or_else(|| "still running".into());
                        // Let the stderr reader catch up with what the process wrote before it went.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        return Err(env(format!("testee `{cmd}` exited before its hello ({st})"), &log));
                    }
                    Ok(Ok(Some(l))) => l,
                };
                let hello = serde_json::from_str(&line)
                    .map_err(|e| format!("the testee's hello is not JSON ({e}): {line}"))
                    .and_then(|h| Hello::parse(&h))
                    .map_err(usage)?;
                Ok((Testee::Process { child, stdin, lines, log }, hello))
            }
        }
    }

    /// Sends a command and reads its answer as `T` ([`mooncake_testee_protocol::Done`] for a bare
    /// `{"ok": true}`); an `{"ok": false}` answer is an `Err` with the testee's error text.
    pub async fn send<T: serde::de::DeserializeOwned>(&mut self, cmd: &Command) -> Result<T, String> {
        let v = serde_json::to_value(cmd).map_err(|e| format!("{}: {e}", cmd.name()))?;
        let answer = self.exchange(v).await?;
        read_answer(&answer).map_err(|e| format!("`{}`: {e}", cmd.name()))
    }

    /// A role's `status`, typed by role ([`mooncake_testee_protocol::PrefillerStatus`],
    /// [`mooncake_testee_protocol::DecoderStatus`]).
    pub async fn status<T: serde::de::DeserializeOwned>(&mut self) -> Result<T, String> {
        self.send(&Command::Status).await
    }

    /// Sends a command given as raw JSON (a test's malformed command, a key a later protocol version adds);
    /// an `{"ok": false}` answer is an `Err` with the testee's error text. The runner itself uses
    /// [`Testee::send`].
    pub async fn cmd(&mut self, cmd: J) -> Result<J, String> {
        let answer = self.exchange(cmd).await?;
        read_answer::<J>(&answer)
    }

    /// Sends one command line and returns the testee's answer line as it came (`ok` true or false).
    async fn exchange(&mut self, cmd: J) -> Result<J, String> {
        let answer = match self {
            Testee::Builtin(t, faults) => {
                let mut cmd = cmd;
                let role = cmd.get("role").and_then(J::as_str).unwrap_or("").to_string();
                if !faults.is_empty() && cmd.get("cmd").and_then(J::as_str) == Some("start") && role != "bootstrap" {
                    cmd["config"]["faults"] = json!(faults);
                }
                t.handle(&cmd).await
            }
            Testee::Process { child, stdin, lines, log } => {
                let what = cmd.get("cmd").and_then(J::as_str).unwrap_or("?").to_string();
                let sent = async {
                    stdin.write_all(format!("{cmd}\n").as_bytes()).await?;
                    stdin.flush().await
                }
                .await;
                let line = match sent {
                    Err(_) => None,
                    Ok(()) => tokio::time::timeout(ANSWER_TIMEOUT, lines.next_line())
                        .await
                        .map_err(|_| format!("no answer to `{what}` within {}", secs(ANSWER_TIMEOUT)))?
                        .map_err(|e| format!("reading the testee's answer to `{what}`: {e}"))?,
                };
                let Some(line) = line else {
                    let st = tokio::time::timeout(Duration::from_secs(2), child.wait())
                        .await
                        .ok()
                        .and_then(|r| r.ok())
                        .map(exit_text)
                        .unwrap_or_else(|| "still running".into());
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    // The report shows the last lines of standard error under the case: not repeated here.
                    let msg = format!("the testee died during `{what}` ({st})");
                    log.mark_died(&msg);
                    return Err(msg);
                };
                serde_json::from_str(&line)
                    .map_err(|e| format!("the testee's answer to `{what}` is not JSON ({e}): {line}"))?
            }
        };
        Ok(answer)
    }

    /// Stops the testee and everything it started.
    pub async fn stop(mut self) {
        // A stop is not a death: a testee that exits on `stop` without answering must not count as one that
        // died, so the stop's answer is read with a log of its own.
        if let Testee::Process { log, .. } = &mut self {
            *log = TesteeLog::default();
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), self.send::<Done>(&Command::Stop)).await;
        if let Testee::Process { mut child, .. } = self {
            if tokio::time::timeout(Duration::from_secs(5), child.wait()).await.is_err() {
                let _ = child.kill().await;
            }
        }
    }
}

/// A duration as people read it: `3s`, `2.5s`, `250ms`.
pub fn secs(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}
