//! Why a configuration could not be loaded. Every variant names the key and where it came from.

use std::path::PathBuf;

/// A configuration problem found at start-up; all of them are fatal (fix the config and restart).
///
/// `origin` is where the offending value came from: the file path as given (or the `source`
/// passed to [`Config::from_yaml_str`](super::Config::from_yaml_str)), `-D` for overrides, or
/// `command line` for [`Config::set`](super::Config::set).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A key that no option defines; `suggestion` is the closest known key, if one is close.
    #[error("{origin}: unknown configuration key \"{key}\"{}", did_you_mean(.suggestion))]
    UnknownKey {
        /// The key as written.
        key: String,
        /// Where the key was written.
        origin: String,
        /// The closest known key by edit distance, when it is plausibly a typo.
        suggestion: Option<String>,
    },
    /// A value that does not parse as the option's type.
    #[error("{origin}: invalid value \"{value}\" for key \"{key}\": {expected}")]
    InvalidValue {
        /// The option's key.
        key: String,
        /// The value as written.
        value: String,
        /// What the option accepts.
        expected: String,
        /// Where the value was written.
        origin: String,
    },
    /// A well-formed value outside the option's allowed range.
    #[error("{origin}: value \"{value}\" for key \"{key}\" is out of range: {allowed}")]
    OutOfRange {
        /// The option's key.
        key: String,
        /// The value as written.
        value: String,
        /// The range the option allows.
        allowed: String,
        /// Where the value was written.
        origin: String,
    },
    /// Two options whose values are individually valid but contradict each other.
    #[error("{origin}: \"{key}\" and \"{other_key}\" conflict: {reason}")]
    Conflict {
        /// The first option of the pair.
        key: String,
        /// The second option of the pair.
        other_key: String,
        /// The rule they break, with both values.
        reason: String,
        /// Where the two values came from.
        origin: String,
    },
    /// The same key given twice in one file (once nested, once as a dotted key).
    #[error("{origin}: key \"{key}\" is given more than once")]
    DuplicateKey {
        /// The flattened, dotted key.
        key: String,
        /// The file that repeats it.
        origin: String,
    },
    /// The file is not valid YAML.
    #[error("{origin}{}: YAML syntax error: {message}", at_line(.line))]
    Syntax {
        /// The file.
        origin: String,
        /// The 1-based line of the error, when the parser reports one.
        line: Option<usize>,
        /// The parser's description.
        message: String,
    },
    /// Valid YAML that is not a map of keys to single values (a list, a non-string key, a tag).
    #[error("{origin}: {reason}")]
    Malformed {
        /// The file.
        origin: String,
        /// What is wrong and where.
        reason: String,
    },
    /// The conf dir has no `config.yaml`.
    #[error("configuration file {} does not exist", path.display())]
    MissingFile {
        /// The path that was looked for.
        path: PathBuf,
    },
    /// The configuration file exists but could not be read.
    #[error("cannot read configuration file {}: {error}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        error: std::io::Error,
    },
    /// A `-D` argument without `=`.
    #[error("malformed -D override \"{arg}\": expected key=value")]
    MalformedOverride {
        /// The argument as given.
        arg: String,
    },
}

fn did_you_mean(suggestion: &Option<String>) -> String {
    suggestion
        .as_ref()
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default()
}

fn at_line(line: &Option<usize>) -> String {
    line.map(|l| format!(":{l}")).unwrap_or_default()
}
