//! Reading `config.yaml` the way Flink does: nested maps flatten to dotted keys.
//!
//! `taskmanager:\n  numberOfTaskSlots: 2` and `taskmanager.numberOfTaskSlots: 2` are the same
//! key, and a file may mix both styles. Every leaf must be a scalar; it is handed on as text so
//! that the file and `-D key=value` share one parser per option.

use std::collections::HashSet;

use serde_yaml_ng::Value;

use super::ConfigError;

/// Parses `yaml` into `(dotted key, scalar text)` pairs in file order.
///
/// YAML null and an empty file yield no pairs at the top level; a null leaf yields `""`
/// (which optional options read as "unset"). `origin` names the file in errors.
pub(super) fn flatten(yaml: &str, origin: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let root: Value = serde_yaml_ng::from_str(yaml).map_err(|e| ConfigError::Syntax {
        origin: origin.to_owned(),
        line: e.location().map(|l| l.line()),
        message: e.to_string(),
    })?;
    let mut pairs = Vec::new();
    match root {
        Value::Null => {}
        Value::Mapping(_) => flatten_into(root, None, &mut pairs, origin)?,
        _ => {
            return Err(ConfigError::Malformed {
                origin: origin.to_owned(),
                reason: "the file must be a map of configuration keys to values".into(),
            });
        }
    }
    let mut seen = HashSet::new();
    for (key, _) in &pairs {
        if !seen.insert(key.as_str()) {
            return Err(ConfigError::DuplicateKey {
                key: key.clone(),
                origin: origin.to_owned(),
            });
        }
    }
    Ok(pairs)
}

fn flatten_into(
    value: Value,
    prefix: Option<&str>,
    out: &mut Vec<(String, String)>,
    origin: &str,
) -> Result<(), ConfigError> {
    let malformed = |reason: String| ConfigError::Malformed {
        origin: origin.to_owned(),
        reason,
    };
    let at = |prefix: Option<&str>| prefix.map_or_else(String::new, |p| format!(" under \"{p}\""));
    match value {
        Value::Mapping(map) => {
            for (key, child) in map {
                let key = match key {
                    Value::String(s) => s,
                    other => {
                        return Err(malformed(format!(
                            "keys must be strings, found {}{}",
                            describe(&other),
                            at(prefix)
                        )));
                    }
                };
                let full = match prefix {
                    Some(p) => format!("{p}.{key}"),
                    None => key,
                };
                flatten_into(child, Some(&full), out, origin)?;
            }
            Ok(())
        }
        scalar => {
            // Only reached for map values, so a prefix is always present.
            let key = prefix.unwrap_or_default().to_owned();
            let text = match scalar {
                Value::Null => String::new(),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                Value::String(s) => s,
                other => {
                    return Err(malformed(format!(
                        "key \"{key}\" must have a single value, found {}",
                        describe(&other)
                    )));
                }
            };
            out.push((key, text));
            Ok(())
        }
    }
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a map",
        Value::Tagged(_) => "a tagged value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(yaml: &str) -> Vec<(String, String)> {
        flatten(yaml, "test.yaml").expect("valid yaml")
    }

    #[test]
    fn nested_and_flat_keys_flatten_alike() {
        let nested =
            pairs("taskmanager:\n  numberOfTaskSlots: 2\n  memory:\n    segment-size: 64kb\n");
        let flat =
            pairs("taskmanager.numberOfTaskSlots: 2\ntaskmanager.memory.segment-size: 64kb\n");
        let mixed = pairs("taskmanager:\n  numberOfTaskSlots: 2\n  memory.segment-size: 64kb\n");
        assert_eq!(nested, flat);
        assert_eq!(mixed, flat);
        assert_eq!(
            flat,
            vec![
                ("taskmanager.numberOfTaskSlots".to_owned(), "2".to_owned()),
                (
                    "taskmanager.memory.segment-size".to_owned(),
                    "64kb".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn scalars_become_text() {
        let got = pairs("a: 0.1\nb: true\nc: \"10 s\"\nd: 10 s\ne:\nf: ~\ng: 32768\n");
        let texts: Vec<&str> = got.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(texts, ["0.1", "true", "10 s", "10 s", "", "", "32768"]);
    }

    #[test]
    fn empty_and_comment_only_files_have_no_keys() {
        assert!(pairs("").is_empty());
        assert!(pairs("# nothing here\n").is_empty());
    }

    #[test]
    fn the_same_key_nested_and_flat_is_a_duplicate() {
        let err = flatten("rest.port: 1\nrest:\n  port: 2\n", "conf/config.yaml").unwrap_err();
        assert!(matches!(&err, ConfigError::DuplicateKey { key, .. } if key == "rest.port"));
        assert!(err.to_string().contains("conf/config.yaml"), "{err}");
    }

    #[test]
    fn a_key_repeated_in_one_map_is_rejected() {
        let err = flatten("rest.port: 1\nrest.port: 2\n", "c.yaml").unwrap_err();
        assert!(err.to_string().starts_with("c.yaml"), "{err}");
        assert!(err.to_string().contains("rest.port"), "{err}");
    }

    #[test]
    fn lists_and_non_string_keys_are_malformed() {
        let err = flatten("rest:\n  port: [1, 2]\n", "c.yaml").unwrap_err();
        assert!(err.to_string().contains("\"rest.port\""), "{err}");
        assert!(err.to_string().contains("a list"), "{err}");
        let err = flatten("1: x\n", "c.yaml").unwrap_err();
        assert!(matches!(err, ConfigError::Malformed { .. }), "{err}");
        let err = flatten("- a\n- b\n", "c.yaml").unwrap_err();
        assert!(matches!(err, ConfigError::Malformed { .. }), "{err}");
    }

    #[test]
    fn syntax_errors_name_file_and_line() {
        let err = flatten(
            "rest.port: 1\nrest.address: [oops\n",
            "/etc/sluice/config.yaml",
        )
        .unwrap_err();
        let ConfigError::Syntax { line, .. } = &err else {
            panic!("expected a syntax error, got {err}");
        };
        assert!(line.is_some());
        let text = err.to_string();
        assert!(text.starts_with("/etc/sluice/config.yaml:"), "{text}");
    }
}
