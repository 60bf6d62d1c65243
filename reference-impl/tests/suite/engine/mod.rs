//! A real Mooncake Transfer Engine process (tests/engine/engine_peer.py in the test venv) for the interop
//! tests and the throughput bench. Bounded: every answer within 60 s; the process is killed on drop.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

/// The test venv's interpreter: `$MOONCAKE_PYTHON`, else `<workspace>/.venv/bin/python`.
pub(crate) fn python() -> PathBuf {
    std::env::var_os("MOONCAKE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python"))
}

/// Why the real engine cannot be used: the test prints it in a SKIPPED line.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unavailable {
    /// The interpreter cannot be run.
    #[error("{}: {source} (run ./scripts/test.sh, which creates the venv)", python.display())]
    NoPython {
        /// The interpreter.
        python: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The interpreter runs but cannot import the engine package.
    #[error(
        "{} cannot import mooncake.engine (pip mooncake-transfer-engine-non-cuda, tests/store/requirements.txt; \
         ./scripts/engine-venv.sh installs it): {last_line}",
        python.display()
    )]
    NoEngine {
        /// The interpreter.
        python: PathBuf,
        /// The last line of its standard error (the ImportError).
        last_line: String,
    },
}

/// `Err(reason)` when the pinned engine package cannot be imported (the caller prints a SKIPPED line).
pub(crate) fn available() -> Result<(), Unavailable> {
    let py = python();
    let out = Command::new(&py)
        .args(["-c", "import mooncake.engine"])
        .output()
        .map_err(|source| Unavailable::NoPython { python: py.clone(), source })?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(Unavailable::NoEngine { python: py, last_line: err.lines().last().unwrap_or("").to_string() })
    }
}

/// Byte `i` of a buffer filled with seed `s` (the same formula as engine_peer.py).
pub(crate) fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (7u32 * (i % 251) as u32 + seed as u32) as u8).collect()
}

pub(crate) struct Engine {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    /// `127.0.0.1:<rpc_port>`.
    pub(crate) session: String,
}

impl Engine {
    pub(crate) fn start() -> Engine {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/engine/engine_peer.py");
        let mut child = Command::new(python())
            .arg(script)
            .env("GLOG_minloglevel", "2")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the engine process");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let mut e = Engine { child, stdin, lines, session: String::new() };
        let r = e.call(json!({"cmd": "init"}));
        assert_eq!(r["rc"], 0, "engine initialize: {r}");
        e.session = r["session"].as_str().expect("session").to_string();
        e
    }

    /// One command, its answer (panics on an `error` answer or no answer within 60 s).
    pub(crate) fn call(&mut self, cmd: Value) -> Value {
        writeln!(self.stdin, "{cmd}").expect("engine stdin");
        self.stdin.flush().expect("engine stdin");
        let line = self.lines.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| panic!("no answer to {cmd}"));
        let v: Value = serde_json::from_str(&line).expect("engine answers JSON");
        assert!(v.get("error").is_none(), "{cmd}: {v}");
        v
    }

    /// Allocates and registers `len` bytes (filled with `seed`'s pattern, or zeros); returns the address.
    pub(crate) fn alloc(&mut self, len: usize, seed: Option<u8>) -> u64 {
        let mut c = json!({"cmd": "alloc", "len": len});
        if let Some(s) = seed {
            c["seed"] = json!(s);
        }
        let r = self.call(c);
        assert_eq!(r["rc"], 0, "register_memory: {r}");
        r["addr"].as_u64().expect("addr")
    }

    pub(crate) fn bytes(&mut self, addr: u64, len: usize) -> Vec<u8> {
        let r = self.call(json!({"cmd": "hex", "addr": addr, "len": len}));
        hex::decode(r["hex"].as_str().expect("hex")).expect("hex")
    }

    /// `transfer_sync_write`/`_read` (`op` = "write" / "read"): the engine's return code and seconds taken.
    pub(crate) fn transfer(&mut self, op: &str, target: &str, local: u64, remote: u64, len: usize) -> (i64, f64) {
        let r = self.call(json!({"cmd": op, "target": target, "local": local, "remote": remote, "len": len}));
        (r["rc"].as_i64().expect("rc"), r["secs"].as_f64().unwrap_or(0.0))
    }

    /// `batch_transfer_sync_write`/`_read` (`op` = "batch_write" / "batch_read").
    pub(crate) fn batch(&mut self, op: &str, target: &str, reqs: &[(u64, u64, usize)]) -> i64 {
        let r = self.call(json!({
            "cmd": op, "target": target,
            "locals": reqs.iter().map(|r| r.0).collect::<Vec<_>>(),
            "remotes": reqs.iter().map(|r| r.1).collect::<Vec<_>>(),
            "lens": reqs.iter().map(|r| r.2).collect::<Vec<_>>(),
        }));
        r["rc"].as_i64().expect("rc")
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"cmd": "quit"}));
        let _ = self.stdin.flush();
        for _ in 0..20 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
