//! Connections to testees (`conformance/TESTEE.md`): the built-in reference peer in-process, or any command
//! that speaks the protocol on its standard input and output.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value as J};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// Which implementation to test.
#[derive(Clone, Debug)]
pub enum TesteeSpec {
    /// `mooncake-peer`, in this process.
    Builtin,
    /// A command line (split on whitespace; quote-free).
    Command(String),
    /// The built-in peer with deliberate faults in what it sends (to test the runner itself).
    BuiltinWithFaults(Vec<String>),
}

impl TesteeSpec {
    pub fn describe(&self) -> String {
        match self {
            TesteeSpec::Builtin => "built-in reference peer (mooncake-peer)".into(),
            TesteeSpec::Command(c) => c.clone(),
            TesteeSpec::BuiltinWithFaults(f) => format!("built-in reference peer with faults {f:?}"),
        }
    }
}

/// What a testee said about itself.
#[derive(Clone, Debug)]
pub struct Hello {
    pub name: String,
    pub revisions: Vec<String>,
    pub roles: Vec<String>,
}

pub enum Testee {
    Builtin(Box<mooncake_reference::testee::Testee>, Vec<String>),
    Process { child: Child, stdin: ChildStdin, lines: Lines<BufReader<ChildStdout>> },
}

const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

fn parse_hello(h: &J) -> Result<Hello, String> {
    if h.get("hello").and_then(J::as_str) != Some("mooncake-testee") {
        return Err(format!("not a mooncake testee hello: {h}"));
    }
    if h.get("protocol").and_then(J::as_u64) != Some(1) {
        return Err(format!("testee speaks protocol {:?}, the runner speaks 1", h.get("protocol")));
    }
    let list = |k: &str| h.get(k).and_then(J::as_array).map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default();
    Ok(Hello { name: h.get("name").and_then(J::as_str).unwrap_or("?").to_string(), revisions: list("revisions"), roles: list("roles") })
}

impl Testee {
    pub async fn start(spec: &TesteeSpec) -> Result<(Testee, Hello), String> {
        match spec {
            TesteeSpec::Builtin => Ok((Testee::Builtin(Box::default(), vec![]), parse_hello(&mooncake_reference::testee::hello())?)),
            TesteeSpec::BuiltinWithFaults(f) => Ok((Testee::Builtin(Box::default(), f.clone()), parse_hello(&mooncake_reference::testee::hello())?)),
            TesteeSpec::Command(cmd) => {
                let mut parts = cmd.split_whitespace();
                let prog = parts.next().ok_or("empty testee command")?;
                let mut child = Command::new(prog)
                    .args(parts)
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .kill_on_drop(true)
                    .spawn()
                    .map_err(|e| format!("starting testee {cmd:?}: {e}"))?;
                let stdin = child.stdin.take().expect("piped");
                let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
                let line = tokio::time::timeout(ANSWER_TIMEOUT, lines.next_line())
                    .await
                    .map_err(|_| format!("testee {cmd:?} sent no hello within {ANSWER_TIMEOUT:?}"))?
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("testee {cmd:?} exited before its hello"))?;
                let hello = parse_hello(&serde_json::from_str(&line).map_err(|e| format!("testee hello is not JSON: {e}: {line:?}"))?)?;
                Ok((Testee::Process { child, stdin, lines }, hello))
            }
        }
    }

    /// Sends a command; an `{"ok": false}` answer is an `Err` with the testee's error text.
    pub async fn cmd(&mut self, cmd: J) -> Result<J, String> {
        let answer = match self {
            Testee::Builtin(t, faults) => {
                let mut cmd = cmd;
                let role = cmd.get("role").and_then(J::as_str).unwrap_or("").to_string();
                if !faults.is_empty() && cmd.get("cmd").and_then(J::as_str) == Some("start") && role != "bootstrap" {
                    cmd["config"]["faults"] = json!(faults);
                }
                t.handle(&cmd).await
            }
            Testee::Process { stdin, lines, .. } => {
                stdin.write_all(format!("{cmd}\n").as_bytes()).await.map_err(|e| format!("testee stdin: {e}"))?;
                stdin.flush().await.map_err(|e| format!("testee stdin: {e}"))?;
                let line = tokio::time::timeout(ANSWER_TIMEOUT, lines.next_line())
                    .await
                    .map_err(|_| format!("no answer to {} within {ANSWER_TIMEOUT:?}", cmd["cmd"]))?
                    .map_err(|e| e.to_string())?
                    .ok_or("the testee exited")?;
                serde_json::from_str(&line).map_err(|e| format!("testee answer is not JSON: {e}: {line:?}"))?
            }
        };
        if answer.get("ok") == Some(&J::Bool(true)) {
            Ok(answer)
        } else {
            Err(answer.get("error").and_then(J::as_str).unwrap_or("the testee refused without a reason").to_string())
        }
    }

    /// Stops the testee and everything it started.
    pub async fn stop(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.cmd(json!({"cmd": "stop"}))).await;
        if let Testee::Process { mut child, .. } = self {
            if tokio::time::timeout(Duration::from_secs(5), child.wait()).await.is_err() {
                let _ = child.kill().await;
            }
        }
    }
}
