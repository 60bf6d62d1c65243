//! Standard output and error: every command writes through these. A closed output pipe (`… | head -1`) ends
//! the program quietly with status 0, as `cat` and `rg` do; any other write error is an environment failure
//! (exit 3). A result with `--format text|json` is written through [`Report`], over the library's writers.

use std::io::Write;
use std::process::ExitCode;

use clap::ValueEnum;

use super::error::ENVIRONMENT;

/// `--format` of the commands whose result is text or one JSON document.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum Format {
    /// Lines for people.
    Text,
    /// One JSON document.
    Json,
}

/// A command's result as `--format` shows it: lines for people, or one JSON document (each through the
/// library's writer of that result).
pub(crate) trait Report {
    /// Lines for people.
    fn write_text(&self, w: &mut impl Write) -> std::io::Result<()>;
    /// One JSON document.
    fn write_json(&self, w: &mut impl Write) -> std::io::Result<()>;
}

impl Format {
    /// `report` on standard output, in this format.
    pub(crate) fn show(self, report: &(impl Report + ?Sized)) {
        out_with(|w| match self {
            Format::Text => report.write_text(w),
            Format::Json => report.write_json(w),
        });
    }
}

/// Results whose library writer takes `json_out` (`hashcmd`, `keycmd`): a [`Report`] through it.
macro_rules! report_through {
    ($($t:ty => $write:path),* $(,)?) => {$(
        impl $crate::cli::output::Report for $t {
            fn write_text(&self, w: &mut impl std::io::Write) -> std::io::Result<()> {
                $write(w, self, false)
            }
            fn write_json(&self, w: &mut impl std::io::Write) -> std::io::Result<()> {
                $write(w, self, true)
            }
        }
    )*};
}
pub(crate) use report_through;

/// Writes to standard output or error; a closed pipe exits 0, another write error exits 3.
pub(crate) fn write_or_exit<W: Write>(mut w: W, write: impl FnOnce(&mut W) -> std::io::Result<()>) {
    if let Err(e) = write(&mut w).and_then(|_| w.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        let _ = writeln!(std::io::stderr(), "error: writing output: {e}");
        std::process::exit(ENVIRONMENT as i32);
    }
}

/// Standard output, written by a writer.
pub(crate) fn out_with(write: impl FnOnce(&mut std::io::StdoutLock<'static>) -> std::io::Result<()>) {
    write_or_exit(std::io::stdout().lock(), write);
}

/// Standard output text, as given.
pub(crate) fn out(text: &str) {
    out_with(|w| w.write_all(text.as_bytes()));
}

/// Text on standard error, as given.
pub(crate) fn err(text: &str) {
    write_or_exit(std::io::stderr().lock(), |w| w.write_all(text.as_bytes()));
}

/// Standard error's `error: …` lines, then the exit code.
pub(crate) fn finish(errors: &[String], code: u8) -> ExitCode {
    for e in errors {
        err(&format!("error: {e}\n"));
    }
    ExitCode::from(code)
}
