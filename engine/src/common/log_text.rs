//! Client-provided text in log lines. A REST client chooses savepoint targets, paths and job
//! arguments, and those reach the logs in messages and errors: written raw, a newline or a
//! carriage return forges a log line and a 1.8 MB argument fills the log. [`clip`] escapes
//! control characters and shortens long text, so one value is one bounded field.

use std::fmt;

/// The most characters of one value a log line shows.
pub const MAX_LOGGED_CHARS: usize = 512;

/// `text` as a log field: control characters (newlines, NULs, escape sequences) written as
/// escapes, and cut after [`MAX_LOGGED_CHARS`] characters with the number of bytes left out.
pub fn clip(text: &str) -> Clipped<'_> {
    Clipped(text)
}

/// See [`clip`].
#[derive(Clone, Copy, Debug)]
pub struct Clipped<'a>(&'a str);

impl fmt::Display for Clipped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (shown, (at, c)) in self.0.char_indices().enumerate() {
            if shown == MAX_LOGGED_CHARS {
                return write!(f, "... ({} more bytes)", self.0.len() - at);
            }
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_long_text_is_cut() {
        assert_eq!(clip("/tmp/sp").to_string(), "/tmp/sp");
        assert_eq!(
            clip("/tmp/x\n2026-12-01T00:00:00Z  INFO forged\0\x1b[2J").to_string(),
            "/tmp/x\\n2026-12-01T00:00:00Z  INFO forged\\u{0}\\u{1b}[2J"
        );
        assert_eq!(clip("é\r").to_string(), "é\\r");
        let long = "x".repeat(1_800_000);
        let shown = clip(&long).to_string();
        assert!(shown.len() < MAX_LOGGED_CHARS + 40, "{}", shown.len());
        assert!(
            shown.ends_with(&format!(
                "... ({} more bytes)",
                1_800_000 - MAX_LOGGED_CHARS
            )),
            "{}",
            &shown[MAX_LOGGED_CHARS..]
        );
        assert!(!shown.contains('\n'));
        // Exactly at the limit nothing is cut.
        let at_limit = "y".repeat(MAX_LOGGED_CHARS);
        assert_eq!(clip(&at_limit).to_string(), at_limit);
    }
}
