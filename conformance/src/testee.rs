//! Connections to testees (`conformance/TESTEE.md`): processes that speak the protocol on their standard
//! input and output — the built-in one, `mooncake-peer testee` (found next to this program, then on PATH;
//! the runner does not link it), or any command.

use std::collections::VecDeque;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mooncake_testee_protocol::{read_answer, AnswerError, Command, Done};
use serde_json::{json, Value as J};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command as Process};

/// Which implementation to test.
#[derive(Clone, Debug)]
pub enum TesteeSpec {
    /// The reference peer, `mooncake-peer --log error testee` ([`builtin_peer`] finds the program).
    Builtin,
    /// A command line, split with shell quoting (`./peer --name 'a b'`); see [`split_command`].
    Command(String),
    /// The built-in peer with deliberate faults in what it sends (to test the runner itself): the runner adds
    /// them as `faults` to the config of every role (bootstrap server, prefiller, decoder) it starts.
    BuiltinWithFaults(Vec<String>),
}

impl TesteeSpec {
    /// How reports name the testee.
    pub fn describe(&self) -> String {
        match self {
            TesteeSpec::Builtin => "built-in reference peer (mooncake-peer)".into(),
            TesteeSpec::Command(c) => c.clone(),
            TesteeSpec::BuiltinWithFaults(f) => format!("built-in reference peer with faults {}", f.join(", ")),
        }
    }

    /// The program and arguments to run, and the faults to add to its start configs.
    fn argv(&self) -> Result<(Vec<String>, Vec<String>), TesteeCommandError> {
        let builtin = || -> Result<Vec<String>, TesteeCommandError> {
            let peer = builtin_peer()?;
            Ok(vec![peer.to_string_lossy().into_owned(), "--log".into(), "error".into(), "testee".into()])
        };
        Ok(match self {
            TesteeSpec::Builtin => (builtin()?, vec![]),
            TesteeSpec::BuiltinWithFaults(f) => (builtin()?, f.clone()),
            TesteeSpec::Command(c) => (split_command(c)?, vec![]),
        })
    }
}

/// The reference peer's program name.
const PEER: &str = "mooncake-peer";

/// Why a testee cannot be launched as asked (`--testee`, the built-in peer, `--testee-log`): bad usage.
#[derive(Debug, thiserror::Error)]
pub enum TesteeCommandError {
    /// The built-in peer is neither next to this program nor on PATH.
    #[error(
        "the built-in testee `{PEER}` was not found: not next to this program ({}) nor on PATH. Build it with \
         `cargo build -p mooncake-reference` (or install it with `cargo install --path reference-impl`), or \
         name a testee with --testee",
        if next_to.is_empty() { "its location is unknown".to_string() } else { next_to.join(", ") }
    )]
    PeerNotFound {
        /// The directories next to this program that were searched.
        next_to: Vec<String>,
    },
    /// `--testee` does not split as a shell would (an unclosed quote).
    #[error("--testee `{cmd}`: {source}")]
    BadCommand {
        /// The command line.
        cmd: String,
        /// Why it does not split.
        source: shell_words::ParseError,
    },
    /// `--testee` is empty.
    #[error("--testee: an empty command")]
    EmptyCommand,
    /// A `--testee-log` file cannot be created.
    #[error("{}: {source}", path.display())]
    LogFile {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// The built-in testee's program: `mooncake-peer` next to this program (in cargo's target directory also
/// from a test binary in `deps/`), else on PATH. The error names where it looked and how to get it.
pub fn builtin_peer() -> Result<PathBuf, TesteeCommandError> {
    let exe = std::env::current_exe().ok();
    builtin_peer_from(exe.as_deref(), std::env::var_os("PATH").as_deref())
}

/// [`builtin_peer`] for a given program path and PATH value.
fn builtin_peer_from(exe: Option<&Path>, path: Option<&std::ffi::OsStr>) -> Result<PathBuf, TesteeCommandError> {
    let name = format!("{PEER}{}", std::env::consts::EXE_SUFFIX);
    let mut dirs: Vec<PathBuf> = vec![];
    if let Some(dir) = exe.and_then(Path::parent) {
        dirs.push(dir.to_path_buf());
        if dir.file_name().is_some_and(|n| n == "deps") {
            dirs.extend(dir.parent().map(Path::to_path_buf));
        }
    }
    let next_to: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    dirs.extend(path.map(|p| std::env::split_paths(p).collect::<Vec<_>>()).unwrap_or_default());
    if let Some(found) = dirs.iter().map(|d| d.join(&name)).find(|p| p.is_file()) {
        return Ok(found);
    }
    Err(TesteeCommandError::PeerNotFound { next_to })
}

/// A testee command line as a shell would split it (quotes and backslashes), without running a shell.
pub fn split_command(cmd: &str) -> Result<Vec<String>, TesteeCommandError> {
    let argv = shell_words::split(cmd).map_err(|source| TesteeCommandError::BadCommand { cmd: cmd.into(), source })?;
    if argv.is_empty() {
        return Err(TesteeCommandError::EmptyCommand);
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
    pub fn to_file(file: &std::path::Path) -> Result<TesteeLog, TesteeCommandError> {
        let f = std::fs::File::create(file)
            .map_err(|source| TesteeCommandError::LogFile { path: file.to_path_buf(), source })?;
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
#[derive(Clone, Debug, thiserror::Error)]
#[error("{message}")]
pub struct StartError {
    /// It started and then failed (exit 3), rather than could not run or speak the protocol (exit 2).
    pub environment: bool,
    /// What went wrong.
    pub message: String,
}

/// Why a command to a running testee gave no answer of the expected type: the testee answered with an error
/// of its own ([`TesteeError::Answer`], data a player may expect or compare), or the testee or its answer is
/// broken (it died, closed its output, hung, or answered with something that is not the protocol's).
#[derive(Debug, thiserror::Error)]
pub enum TesteeError {
    /// The testee answered `{"ok": false, "error": ...}`: it refused the command.
    #[error("{}{message}", named(cmd))]
    Answer {
        /// The command's name, when the text names it ([`Testee::send`]; `None` from [`Testee::cmd`]).
        cmd: Option<String>,
        /// The testee's own error text, as it gave it.
        message: String,
    },
    /// An `{"ok": true}` answer whose keys do not read as the command's answer.
    #[error("{}the testee's answer does not read as this protocol's answer: {error}: {answer}", named(cmd))]
    Unreadable {
        /// The command's name, when the text names it ([`Testee::send`]; `None` from [`Testee::cmd`]).
        cmd: Option<String>,
        /// What serde said.
        error: String,
        /// The answer, as JSON.
        answer: String,
    },
    /// The command does not serialize as JSON.
    #[error("{cmd}: {source}")]
    Encode {
        /// The command's name.
        cmd: String,
        /// What serde said.
        source: serde_json::Error,
    },
    /// The testee did not answer in time.
    #[error("no answer to `{cmd}` within {}", secs(*waited))]
    Timeout {
        /// The command's name.
        cmd: String,
        /// How long the runner waited.
        waited: Duration,
    },
    /// The testee's standard output could not be read.
    #[error("reading the testee's answer to `{cmd}`: {source}")]
    Read {
        /// The command's name.
        cmd: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The testee closed its standard input or output (it exited or was killed) before answering.
    #[error("the testee died during `{cmd}` ({ended})")]
    Died {
        /// The command's name.
        cmd: String,
        /// How the process ended (`exit status 1`, `killed by signal 9`, `still running`).
        ended: String,
    },
    /// An answer line that is not JSON.
    #[error("the testee's answer to `{cmd}` is not JSON ({source}): {line}")]
    NotJson {
        /// The command's name.
        cmd: String,
        /// The line it wrote.
        line: String,
        /// What serde said.
        source: serde_json::Error,
    },
}

/// The `` `name`: `` prefix of an answer error from [`Testee::send`].
fn named(cmd: &Option<String>) -> String {
    cmd.as_ref().map(|c| format!("`{c}`: ")).unwrap_or_default()
}

impl TesteeError {
    /// The testee's own error text when it refused the command (`{"ok": false}`); `None` when the testee or
    /// its answer is broken.
    pub fn refusal(&self) -> Option<&str> {
        match self {
            TesteeError::Answer { message, .. } => Some(message),
            _ => None,
        }
    }

    /// An answer that gives no `T`, for the command `cmd` (named in the text when given).
    fn answer(cmd: Option<&str>, e: AnswerError) -> TesteeError {
        let cmd = cmd.map(str::to_string);
        match e {
            AnswerError::Refused(message) => TesteeError::Answer { cmd, message },
            AnswerError::Unreadable { error, answer } => TesteeError::Unreadable { cmd, error, answer },
        }
    }
}

/// A running testee process.
pub struct Testee {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    log: TesteeLog,
    /// Added as `faults` to every role's start config ([`TesteeSpec::BuiltinWithFaults`]).
    faults: Vec<String>,
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

/// How a process that closed its output ended (waiting up to 2 s for it), once the standard error reader
/// has caught up with what it wrote before it went.
async fn ended(child: &mut Child) -> String {
    let st = tokio::time::timeout(Duration::from_secs(2), child.wait())
        .await
        .ok()
        .and_then(|r| r.ok())
        .map(exit_text)
        .unwrap_or_else(|| "still running".into());
    tokio::time::sleep(Duration::from_millis(50)).await;
    st
}

impl Testee {
    /// Starts the testee (its standard error to a log of its own) and reads its hello.
    pub async fn start(spec: &TesteeSpec) -> Result<(Testee, Hello), StartError> {
        Self::start_logged(spec, None).await
    }

    /// Starts a testee; a process's standard error goes to `log` (a log of its own when `None`).
    pub async fn start_logged(spec: &TesteeSpec, log: Option<&TesteeLog>) -> Result<(Testee, Hello), StartError> {
        let usage = |message: String| StartError { environment: false, message };
        let (argv, faults) = spec.argv().map_err(|e| usage(e.to_string()))?;
        let cmd = &spec.describe();
        let log = log.cloned().unwrap_or_default();
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
            Err(_) => return Err(env(format!("testee `{cmd}` sent no hello within {}", secs(ANSWER_TIMEOUT)), &log)),
            Ok(Err(e)) => return Err(env(format!("testee `{cmd}`: reading its standard output: {e}"), &log)),
            Ok(Ok(None)) => {
                let st = ended(&mut child).await;
                return Err(env(format!("testee `{cmd}` exited before its hello ({st})"), &log));
            }
            Ok(Ok(Some(l))) => l,
        };
        let hello = serde_json::from_str(&line)
            .map_err(|e| format!("the testee's hello is not JSON ({e}): {line}"))
            .and_then(|h| Hello::parse(&h).map_err(|e| e.to_string()))
            .map_err(usage)?;
        Ok((Testee { child, stdin, lines, log, faults }, hello))
    }

    /// Sends a command and reads its answer as `T` ([`mooncake_testee_protocol::Done`] for a bare
    /// `{"ok": true}`); an `{"ok": false}` answer is [`TesteeError::Answer`] with the testee's error text.
    pub async fn send<T: serde::de::DeserializeOwned>(&mut self, cmd: &Command) -> Result<T, TesteeError> {
        let v = serde_json::to_value(cmd).map_err(|source| TesteeError::Encode { cmd: cmd.name().into(), source })?;
        let answer = self.exchange(v).await?;
        read_answer(&answer).map_err(|e| TesteeError::answer(Some(cmd.name()), e))
    }

    /// A role's `status`, typed by role ([`mooncake_testee_protocol::PrefillerStatus`],
    /// [`mooncake_testee_protocol::DecoderStatus`]).
    pub async fn status<T: serde::de::DeserializeOwned>(&mut self) -> Result<T, TesteeError> {
        self.send(&Command::Status).await
    }

    /// Sends a command given as raw JSON (a test's malformed command, a key a later protocol version adds);
    /// an `{"ok": false}` answer is [`TesteeError::Answer`] with the testee's error text. The runner itself
    /// uses [`Testee::send`].
    pub async fn cmd(&mut self, cmd: J) -> Result<J, TesteeError> {
        let answer = self.exchange(cmd).await?;
        read_answer::<J>(&answer).map_err(|e| TesteeError::answer(None, e))
    }

    /// Sends one command line and returns the testee's answer line as it came (`ok` true or false).
    async fn exchange(&mut self, mut cmd: J) -> Result<J, TesteeError> {
        let Testee { child, stdin, lines, log, faults } = self;
        if !faults.is_empty() && cmd.get("cmd").and_then(J::as_str) == Some("start") {
            cmd["config"]["faults"] = json!(faults);
        }
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
                .map_err(|_| TesteeError::Timeout { cmd: what.clone(), waited: ANSWER_TIMEOUT })?
                .map_err(|source| TesteeError::Read { cmd: what.clone(), source })?,
        };
        let Some(line) = line else {
            let ended = ended(child).await;
            // The report shows the last lines of standard error under the case: not repeated here.
            let e = TesteeError::Died { cmd: what, ended };
            log.mark_died(&e.to_string());
            return Err(e);
        };
        serde_json::from_str(&line).map_err(|source| TesteeError::NotJson { cmd: what, line, source })
    }

    /// Stops the testee and everything it started.
    pub async fn stop(mut self) {
        // A stop is not a death: a testee that exits on `stop` without answering must not count as one that
        // died, so the stop's answer is read with a log of its own.
        self.log = TesteeLog::default();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.send::<Done>(&Command::Stop)).await;
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await.is_err() {
            let _ = self.child.kill().await;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of its own under the system's temporary directory, holding the named empty files.
    fn dir_with(tag: &str, files: &[&str]) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mooncake-peer-lookup-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        for f in files {
            let p = d.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"").unwrap();
        }
        d
    }

    fn peer_name() -> String {
        format!("{PEER}{}", std::env::consts::EXE_SUFFIX)
    }

    #[test]
    fn the_builtin_peer_is_found_next_to_the_runner_then_above_deps_then_on_path() {
        let name = peer_name();
        // Next to the program.
        let d = dir_with("next", &[&name, "on-path/x"]);
        let path = std::env::join_paths([d.join("on-path")]).unwrap();
        let found = builtin_peer_from(Some(&d.join("mooncake-conformance")), Some(&path)).unwrap();
        assert_eq!(found, d.join(&name));
        // A test binary in target/<profile>/deps: the program is one directory up.
        let t = dir_with("deps", &[&name, "deps/run-0123"]);
        let found = builtin_peer_from(Some(&t.join("deps/run-0123")), None).unwrap();
        assert_eq!(found, t.join(&name));
        // Not next to it: the first directory of PATH that has it.
        let p = dir_with("path", &["bin/mooncake-conformance", &format!("b/{name}"), &format!("c/{name}")]);
        let path = std::env::join_paths([p.join("a"), p.join("b"), p.join("c")]).unwrap();
        let found = builtin_peer_from(Some(&p.join("bin/mooncake-conformance")), Some(&path)).unwrap();
        assert_eq!(found, p.join("b").join(&name));
        for x in [d, t, p] {
            std::fs::remove_dir_all(x).unwrap();
        }
    }

    #[test]
    fn a_refusal_is_the_testees_answer_and_a_broken_answer_or_a_death_is_not() {
        let script = r#"echo '{"hello": "mooncake-testee", "protocol": 1, "name": "t", "revisions": ["vllm-0.33.0"], "roles": ["prefiller"]}'
while read -r line; do
  case "$line" in
    *refuse*) echo '{"ok": false, "error": "no such transfer"}' ;;
    *garbage*) echo 'not json' ;;
    *die*) exit 3 ;;
    *) echo '{"ok": true}' ;;
  esac
done"#;
        let spec = TesteeSpec::Command(format!("sh -c {}", shell_words::quote(script)));
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let (mut t, _) = Testee::start(&spec).await.unwrap();
            // The testee's own refusal: data, its text as it gave it.
            let e = t.cmd(json!({"cmd": "refuse"})).await.unwrap_err();
            assert!(matches!(&e, TesteeError::Answer { cmd: None, .. }), "{e:?}");
            assert_eq!(e.refusal(), Some("no such transfer"));
            assert_eq!(e.to_string(), "no such transfer");
            // An `ok` answer that is not the command's: the testee is broken, the text names the command.
            let e = t.send::<mooncake_testee_protocol::Memory>(&Command::Status).await.unwrap_err();
            assert!(matches!(&e, TesteeError::Unreadable { cmd: Some(c), .. } if c == "status"), "{e:?}");
            assert_eq!(e.refusal(), None);
            assert!(e.to_string().starts_with("`status`: the testee's answer does not read as"), "{e}");
            let e = t.cmd(json!({"cmd": "garbage"})).await.unwrap_err();
            assert!(matches!(&e, TesteeError::NotJson { line, .. } if line == "not json"), "{e:?}");
            assert!(e.to_string().starts_with("the testee's answer to `garbage` is not JSON ("), "{e}");
            assert_eq!(e.refusal(), None);
            let e = t.cmd(json!({"cmd": "die"})).await.unwrap_err();
            assert_eq!(e.to_string(), "the testee died during `die` (exit status 3)");
            assert!(matches!(&e, TesteeError::Died { .. }) && e.refusal().is_none(), "{e:?}");
            assert_eq!(t.log.died().as_deref(), Some("the testee died during `die` (exit status 3)"));
            t.stop().await;
        });
    }

    #[test]
    fn a_missing_builtin_peer_says_where_it_looked_and_how_to_build_it() {
        let d = dir_with("missing", &["deps/run-0123"]);
        let e = builtin_peer_from(Some(&d.join("deps/run-0123")), Some(std::ffi::OsStr::new(""))).unwrap_err();
        assert!(matches!(&e, TesteeCommandError::PeerNotFound { next_to } if next_to.len() == 2), "{e}");
        let e = e.to_string();
        assert!(e.contains(&d.join("deps").display().to_string()) && e.contains(&d.display().to_string()), "{e}");
        assert!(e.contains("nor on PATH"), "{e}");
        assert!(e.contains("cargo build -p mooncake-reference"), "{e}");
        assert!(e.contains("--testee"), "{e}");
        std::fs::remove_dir_all(d).unwrap();
    }
}
