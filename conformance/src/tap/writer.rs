//! The trace file a tap writes (`conformance/traces/README.md`, format_version 1): the header line, then one
//! event per line appended as it happens and flushed at once, so that nothing recorded is lost when the tap is
//! stopped. The header only becomes complete as traffic shows who is who (roles, endpoints, the revision);
//! it is rewritten in place (a copy renamed over the file) when it changed, at most once per `sync_header`.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use mooncake_trace::trace::Event;

pub(crate) struct TraceWriter {
    path: PathBuf,
    file: File,
    /// The header line the file should have (without its newline).
    header: String,
    dirty: bool,
}

/// Why the trace file could not be written: the file (the trace, or the copy a header rewrite writes) and
/// the cause.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub(crate) struct WriteError {
    /// The file.
    pub(crate) path: PathBuf,
    /// The cause.
    pub(crate) source: std::io::Error,
}

fn io(path: &Path, e: std::io::Error) -> WriteError {
    WriteError { path: path.to_path_buf(), source: e }
}

impl TraceWriter {
    /// Creates (or truncates) `path` and writes `header` (a [`mooncake_trace::trace::Header`], or any JSON while the
    /// tap knows nothing yet) as its first line.
    pub(crate) fn create(path: &Path, header: &impl Serialize) -> Result<TraceWriter, WriteError> {
        let header = serde_json::to_string(header).map_err(|e| io(path, e.into()))?;
        let mut file = File::create(path).map_err(|e| io(path, e))?;
        file.write_all(format!("{header}\n").as_bytes()).map_err(|e| io(path, e))?;
        Ok(TraceWriter { path: path.to_path_buf(), file, header, dirty: false })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one event line, written by the serde type the trace reader reads it with
    /// ([`Event::line_json`]); it is on disk (in the kernel's hands) when this returns.
    pub(crate) fn append(&mut self, event: &Event) -> Result<(), WriteError> {
        let line = event.line_json().map_err(|e| io(&self.path, e.into()))?;
        self.file.write_all(format!("{line}\n").as_bytes()).map_err(|e| io(&self.path, e))
    }

    /// The header the file should have, serialized by its serde type; written by the next
    /// [`TraceWriter::sync_header`].
    pub(crate) fn set_header(&mut self, header: &impl Serialize) -> Result<(), WriteError> {
        let header = serde_json::to_string(header).map_err(|e| io(&self.path, e.into()))?;
        if header != self.header {
            self.header = header;
            self.dirty = true;
        }
        Ok(())
    }

    /// Rewrites the header line if it changed: the file is copied behind the new header and the copy renamed
    /// over it, so a reader never sees a half-written file.
    pub(crate) fn sync_header(&mut self) -> Result<(), WriteError> {
        if !self.dirty {
            return Ok(());
        }
        self.file.flush().map_err(|e| io(&self.path, e))?;
        let name = self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = self.path.with_file_name(format!(".{name}.tap-tmp"));
        {
            let mut old = BufReader::new(File::open(&self.path).map_err(|e| io(&self.path, e))?);
            let mut first = vec![];
            old.read_until(b'\n', &mut first).map_err(|e| io(&self.path, e))?;
            let mut out = File::create(&tmp).map_err(|e| io(&tmp, e))?;
            out.write_all(format!("{}\n", self.header).as_bytes()).map_err(|e| io(&tmp, e))?;
            std::io::copy(&mut old, &mut out).map_err(|e| io(&tmp, e))?;
            out.flush().map_err(|e| io(&tmp, e))?;
        }
        std::fs::rename(&tmp, &self.path).map_err(|e| io(&self.path, e))?;
        self.file = OpenOptions::new().append(true).open(&self.path).map_err(|e| io(&self.path, e))?;
        self.dirty = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mooncake_trace::trace::{HttpDir, HttpEvent};
    use serde_json::json;

    fn event(seq: u64) -> Event {
        Event::Http(HttpEvent {
            seq,
            line: 0,
            conn: "bootstrap".into(),
            dir: HttpDir::Request,
            method: "GET".into(),
            path: "/query".into(),
            status: None,
            body: None,
            body_raw: String::new(),
            t: None,
        })
    }

    #[test]
    fn the_header_is_rewritten_in_place_and_appending_goes_on() {
        let dir = std::env::temp_dir().join(format!("tap-writer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.jsonl");
        let mut w = TraceWriter::create(&p, &json!({"h": 1})).unwrap();
        w.append(&event(1)).unwrap();
        w.set_header(&json!({"h": 2, "longer": "header line"})).unwrap();
        w.sync_header().unwrap();
        w.append(&event(2)).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "{\"h\":2,\"longer\":\"header line\"}\n".to_string()
                + &[1, 2]
                    .map(|n| {
                        format!(
                            "{{\"seq\":{n},\"kind\":\"http\",\"conn\":\"bootstrap\",\"dir\":\"request\",\"method\":\"GET\",\"path\":\"/query\",\"body\":null,\"body_raw\":\"\"}}\n"
                        )
                    })
                    .concat()
        );
        // Unchanged: no rewrite.
        w.set_header(&json!({"h": 2, "longer": "header line"})).unwrap();
        assert!(!w.dirty);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_that_cannot_be_created_is_named_with_its_cause() {
        let p = std::env::temp_dir().join(format!("tap-writer-missing-{}", std::process::id())).join("t.jsonl");
        let e = TraceWriter::create(&p, &json!({})).err().expect("no such directory");
        assert_eq!(e.path, p);
        assert_eq!(e.source.kind(), std::io::ErrorKind::NotFound);
        assert_eq!(e.to_string(), format!("{}: {}", p.display(), e.source));
    }
}
