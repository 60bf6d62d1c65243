//! A long-lived Python msgspec process (`tests/oracle/msgspec_oracle.py`) that decodes and re-encodes inputs
//! with real msgspec Struct classes built from a spec revision: the cross-implementation oracle.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use mooncake_wire::codec::Codec;
use mooncake_wire::spec::Revision;
use mooncake_wire::typed;
use serde_json::{json, Value as J};

use crate::jsonl;

/// What msgspec did with one input.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// msgspec decoded it.
    Accept {
        /// The decoded value as JSON builtins.
        value: J,
        /// msgspec's re-encoding of the value, in hex.
        canonical_hex: String,
    },
    /// msgspec refused it.
    Reject {
        /// The exception's text.
        error: String,
        /// The exception's class name (`ValidationError`, `DecodeError`).
        error_type: String,
    },
}

/// A running msgspec oracle (`tests/oracle/msgspec_oracle.py`): a Python process that decodes inputs with a
/// revision's struct classes, asked over pipes. Dropping it stops the process.
pub struct Oracle {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// The msgspec version the process imported.
    pub msgspec_version: String,
}

/// Why the msgspec oracle could not be started or asked.
#[derive(Debug, thiserror::Error)]
pub enum OracleError {
    /// No Python interpreter where the test venv should be.
    #[error("no Python test venv at {} — run ./scripts/test.sh (it creates .venv with the pinned msgspec and pyzmq), or set MOONCAKE_PYTHON", .0.display())]
    NoVenv(PathBuf),
    /// The interpreter could not be started.
    #[error("starting the msgspec oracle: {0}")]
    Spawn(std::io::Error),
    /// The revision could not be serialised for it.
    #[error(transparent)]
    Revision(serde_json::Error),
    /// Talking to it over its pipes failed.
    #[error("oracle: {0}")]
    Io(#[from] std::io::Error),
    /// Its first line is not its JSON greeting.
    #[error("oracle did not start: {source}: {line:?}")]
    DidNotStart {
        /// The line it printed.
        line: String,
        /// The parser's complaint.
        source: serde_json::Error,
    },
    /// It exited before answering the whole batch.
    #[error("the msgspec oracle exited early")]
    ExitedEarly,
    /// An answer is not JSON.
    #[error("oracle answer {line:?}: {source}")]
    Answer {
        /// The line it printed.
        line: String,
        /// The parser's complaint.
        source: serde_json::Error,
    },
    /// The thread writing the batch panicked.
    #[error("oracle writer panicked")]
    WriterPanicked,
}

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace").to_path_buf()
}

/// The Python interpreter of the test venv: `$MOONCAKE_PYTHON`, else `<workspace>/.venv/bin/python`.
pub fn python() -> Result<PathBuf, OracleError> {
    let p = std::env::var_os("MOONCAKE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv/bin/python"));
    if p.exists() {
        Ok(p)
    } else {
        Err(OracleError::NoVenv(p))
    }
}

/// The oracle script: `$MOONCAKE_ORACLE_SCRIPT`, else `<workspace>/tests/oracle/msgspec_oracle.py`.
pub fn script() -> PathBuf {
    std::env::var_os("MOONCAKE_ORACLE_SCRIPT")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("tests/oracle/msgspec_oracle.py"))
}

impl Oracle {
    /// Starts the oracle with the struct classes of `rev`.
    pub fn start(rev: &Revision) -> Result<Oracle, OracleError> {
        let mut child = Command::new(python()?)
            .arg(script())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(OracleError::Spawn)?;
        let mut stdin = child.stdin.take().expect("piped");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let spec = serde_json::to_string(rev).map_err(OracleError::Revision)?;
        writeln!(stdin, "{spec}").and_then(|_| stdin.flush())?;
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        let hello: J = match serde_json::from_str(&line) {
            Ok(h) => h,
            Err(source) => return Err(OracleError::DidNotStart { line, source }),
        };
        let msgspec_version = hello["msgspec"].as_str().unwrap_or("?").to_string();
        Ok(Oracle { child, stdin, stdout, msgspec_version })
    }

    /// Asks msgspec about a batch of (message, input) pairs.
    pub fn ask(&mut self, batch: &[(&str, Vec<u8>)]) -> Result<Vec<Answer>, OracleError> {
        let stdin = &mut self.stdin;
        let stdout = &mut self.stdout;
        std::thread::scope(|s| {
            // Write from another thread so neither pipe can fill up while the other side waits.
            let writer = s.spawn(move || -> std::io::Result<()> {
                let mut w = std::io::BufWriter::new(stdin);
                for (i, (message, bytes)) in batch.iter().enumerate() {
                    let req =
                        json!({"id": i, "message": message, "hex": hex::encode(bytes), "flush": i + 1 == batch.len()});
                    writeln!(w, "{req}")?;
                }
                w.flush()
            });
            let mut out = Vec::with_capacity(batch.len());
            let mut line = String::new();
            // On a bad answer keep reading (so the writer can finish), and report the first problem.
            let mut first_error: Option<OracleError> = None;
            for _ in 0..batch.len() {
                line.clear();
                match stdout.read_line(&mut line) {
                    Ok(0) => {
                        first_error.get_or_insert(OracleError::ExitedEarly);
                        break;
                    }
                    Err(e) => {
                        first_error.get_or_insert(OracleError::Io(e));
                        break;
                    }
                    Ok(_) => {}
                }
                let r: J = match serde_json::from_str(&line) {
                    Ok(r) => r,
                    Err(e) => {
                        first_error.get_or_insert_with(|| OracleError::Answer { line: line.clone(), source: e });
                        continue;
                    }
                };
                out.push(if r["ok"] == J::Bool(true) {
                    Answer::Accept {
                        value: r["value"].clone(),
                        canonical_hex: r["canonical_hex"].as_str().unwrap_or_default().to_string(),
                    }
                } else {
                    Answer::Reject {
                        error: r["error"].as_str().unwrap_or_default().to_string(),
                        error_type: r["error_type"].as_str().unwrap_or_default().to_string(),
                    }
                });
            }
            let written = writer.join().map_err(|_| OracleError::WriterPanicked)?;
            if let Some(e) = first_error {
                return Err(e);
            }
            written?;
            Ok(out)
        })
    }
}

/// Where this implementation and msgspec disagree about one input, if anywhere: the verdict, the decoded value
/// (its `to_builtins` JSON, key order included), the re-encoded bytes, or the error text. With `check_typed`
/// (the typed structs' revision) the typed 0.33.0 decoders must give msgspec's answer too. Shared by the
/// differential tests and the differential fuzzer (`fuzz/harness`).
pub fn disagreement(codec: &Codec, message: &str, input: &[u8], answer: &Answer, check_typed: bool) -> Option<String> {
    let ours = codec.decode(message, input);
    let problem = match (answer, &ours) {
        (Answer::Accept { value, canonical_hex }, Ok(v)) => {
            let json = Codec::to_json(v);
            let bytes = codec.encode(message, v).map(hex::encode).unwrap_or_else(|e| format!("(cannot encode: {e})"));
            if !jsonl::eq_ordered(&json, value) {
                Some(format!("value differs: {}", jsonl::first_difference(&json, value, "$").unwrap_or_default()))
            } else if &bytes != canonical_hex {
                Some(format!("re-encoding differs: ours {bytes} vs msgspec {canonical_hex}"))
            } else {
                None
            }
        }
        (Answer::Reject { error, .. }, Err(e)) => (e.msgspec_message() != *error)
            .then(|| format!("error text: ours {:?} vs msgspec {error:?}", e.msgspec_message())),
        (Answer::Accept { .. }, Err(e)) => Some(format!("msgspec accepts, we reject: {}", e.msgspec_message())),
        (Answer::Reject { error, .. }, Ok(_)) => Some(format!("msgspec rejects ({error}), we accept")),
    };
    problem.or_else(|| {
        if !check_typed {
            return None;
        }
        let t = match message {
            "MooncakeXferMetadata" => typed::MooncakeXferMetadata::decode(input).map(|v| hex::encode(v.encode())),
            "MooncakeXferResponse" => typed::MooncakeXferResponse::decode(input).map(|v| hex::encode(v.encode())),
            _ => return None,
        }
        .map_err(|e| e.msgspec_message());
        let want = match answer {
            Answer::Accept { canonical_hex, .. } => Ok(canonical_hex.clone()),
            Answer::Reject { error, .. } => Err(error.clone()),
        };
        (t != want).then(|| format!("typed struct: {t:?} vs msgspec {want:?}"))
    })
}

impl Oracle {
    /// `msgspec.json.schema` of a message's class.
    pub fn schema(&mut self, message: &str) -> Result<J, OracleError> {
        writeln!(self.stdin, "{}", json!({"cmd": "schema", "message": message})).and_then(|_| self.stdin.flush())?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        let r: J = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(source) => return Err(OracleError::Answer { line, source }),
        };
        Ok(r["schema"].clone())
    }
}

/// Asks a line-protocol Python helper to quit, gives it 5 s to exit, then kills it; always reaps it.
pub fn quit(stdin: &mut ChildStdin, child: &mut Child) {
    let _ = writeln!(stdin, "{}", json!({"cmd": "quit"}));
    let _ = stdin.flush();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for Oracle {
    fn drop(&mut self) {
        quit(&mut self.stdin, &mut self.child);
    }
}
