//! What a command produced, for `main` to print: the library modules print nothing themselves, so one place
//! decides how output is written (a closed pipe ends the program quietly) and which exit code it gets.
//!
//! Exit codes, everywhere: [`AGREE`] 0, [`DISAGREE`] 1, [`USAGE`] 2, [`ENVIRONMENT`] 3.

/// Everything checked agrees (or the command did what it was asked).
pub const AGREE: u8 = 0;
/// At least one disagreement: a failed case, a finding, a breaking change, incompatible revisions.
pub const DISAGREE: u8 = 1;
/// Bad usage or bad input: unknown names, unreadable or wrong-format files, nothing to check.
pub const USAGE: u8 = 2;
/// The environment failed: nothing listening, a port in use, a testee that died or never said hello.
pub const ENVIRONMENT: u8 = 3;

/// Standard output text, error lines (printed as `error: …` on standard error) and the exit code.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub stdout: String,
    pub errors: Vec<String>,
    pub code: u8,
}

impl Outcome {
    /// A usage or input error: exit 2.
    pub fn usage(msg: impl Into<String>) -> Outcome {
        Outcome { stdout: String::new(), errors: vec![msg.into()], code: USAGE }
    }
    /// One line of standard output.
    pub fn say(&mut self, line: impl AsRef<str>) {
        self.stdout.push_str(line.as_ref());
        self.stdout.push('\n');
    }
    /// A JSON document on standard output, pretty-printed.
    pub fn json(&mut self, v: &serde_json::Value) {
        self.say(serde_json::to_string_pretty(v).expect("JSON values serialize"));
    }
    /// An error line for standard error (the code is set separately).
    pub fn error(&mut self, msg: impl Into<String>) {
        self.errors.push(msg.into());
    }
    /// Sets the exit code and returns the outcome.
    pub fn done(mut self, code: u8) -> Outcome {
        self.code = code;
        self
    }
}
