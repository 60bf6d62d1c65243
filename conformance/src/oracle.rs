//! A long-lived Python msgspec process (`tests/oracle/msgspec_oracle.py`) that decodes and re-encodes inputs
//! with real msgspec Struct classes built from a spec revision: the cross-implementation oracle.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use mooncake_wire::spec::Revision;
use serde_json::{json, Value as J};

/// What msgspec did with one input.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Accept { value: J, canonical_hex: String },
    Reject { error: String, error_type: String },
}

pub struct Oracle {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pub msgspec_version: String,
}

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace").to_path_buf()
}

/// The Python interpreter of the test venv: `$MOONCAKE_PYTHON`, else `<workspace>/.venv/bin/python`.
pub fn python() -> Result<PathBuf, String> {
    let p = std::env::var_os("MOONCAKE_PYTHON").map(PathBuf::from).unwrap_or_else(|| workspace_root().join(".venv/bin/python"));
    if p.exists() {
        Ok(p)
    } else {
        Err(format!(
            "no Python test venv at {} — run ./scripts/test.sh (it creates .venv with the pinned msgspec and pyzmq), or set MOONCAKE_PYTHON",
            p.display()
        ))
    }
}

pub fn script() -> PathBuf {
    std::env::var_os("MOONCAKE_ORACLE_SCRIPT").map(PathBuf::from).unwrap_or_else(|| workspace_root().join("tests/oracle/msgspec_oracle.py"))
}

impl Oracle {
    /// Starts the oracle with the struct classes of `rev`.
    pub fn start(rev: &Revision) -> Result<Oracle, String> {
        let mut child = Command::new(python()?)
            .arg(script())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting the msgspec oracle: {e}"))?;
        let mut stdin = child.stdin.take().expect("piped");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let spec = serde_json::to_string(rev).map_err(|e| e.to_string())?;
        writeln!(stdin, "{spec}").and_then(|_| stdin.flush()).map_err(|e| format!("oracle: {e}"))?;
        let mut line = String::new();
        stdout.read_line(&mut line).map_err(|e| format!("oracle: {e}"))?;
        let hello: J = serde_json::from_str(&line).map_err(|e| format!("oracle did not start: {e}: {line:?}"))?;
        let msgspec_version = hello["msgspec"].as_str().unwrap_or("?").to_string();
        Ok(Oracle { child, stdin, stdout, msgspec_version })
    }

    /// Asks msgspec about a batch of (message, input) pairs.
    pub fn ask(&mut self, batch: &[(&str, Vec<u8>)]) -> Result<Vec<Answer>, String> {
        let stdin = &mut self.stdin;
        let stdout = &mut self.stdout;
        std::thread::scope(|s| {
            // Write from another thread so neither pipe can fill up while the other side waits.
            let writer = s.spawn(move || -> std::io::Result<()> {
                let mut w = std::io::BufWriter::new(stdin);
                for (i, (message, bytes)) in batch.iter().enumerate() {
                    let req = json!({"id": i, "message": message, "hex": hex::encode(bytes), "flush": i + 1 == batch.len()});
                    writeln!(w, "{req}")?;
                }
                w.flush()
            });
            let mut out = Vec::with_capacity(batch.len());
            let mut line = String::new();
            // On a bad answer keep reading (so the writer can finish), and report the first problem.
            let mut first_error: Option<String> = None;
            for _ in 0..batch.len() {
                line.clear();
                match stdout.read_line(&mut line) {
                    Ok(0) => {
                        first_error.get_or_insert_with(|| "the msgspec oracle exited early".to_string());
                        break;
                    }
                    Err(e) => {
                        first_error.get_or_insert_with(|| format!("oracle: {e}"));
                        break;
                    }
                    Ok(_) => {}
                }
                let r: J = match serde_json::from_str(&line) {
                    Ok(r) => r,
                    Err(e) => {
                        first_error.get_or_insert_with(|| format!("oracle answer {line:?}: {e}"));
                        continue;
                    }
                };
                out.push(if r["ok"] == J::Bool(true) {
                    Answer::Accept { value: r["value"].clone(), canonical_hex: r["canonical_hex"].as_str().unwrap_or_default().to_string() }
                } else {
                    Answer::Reject {
                        error: r["error"].as_str().unwrap_or_default().to_string(),
                        error_type: r["error_type"].as_str().unwrap_or_default().to_string(),
                    }
                });
            }
            let written = writer.join().map_err(|_| "oracle writer panicked".to_string())?;
            if let Some(e) = first_error {
                return Err(e);
            }
            written.map_err(|e| format!("oracle: {e}"))?;
            Ok(out)
        })
    }
}

impl Oracle {
    /// `msgspec.json.schema` of a message's class.
    pub fn schema(&mut self, message: &str) -> Result<J, String> {
        writeln!(self.stdin, "{}", json!({"cmd": "schema", "message": message})).and_then(|_| self.stdin.flush()).map_err(|e| format!("oracle: {e}"))?;
        let mut line = String::new();
        self.stdout.read_line(&mut line).map_err(|e| format!("oracle: {e}"))?;
        let r: J = serde_json::from_str(&line).map_err(|e| format!("oracle answer {line:?}: {e}"))?;
        Ok(r["schema"].clone())
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"cmd": "quit"}));
        let _ = self.stdin.flush();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
