//! Paths as Flink configurations and commands give them: a plain path, or a `file:` URI
//! (`file:///tmp/x`, `file:/tmp/x`, `file://localhost/tmp/x`). Every configuration key, REST
//! field and job argument that names a file or directory goes through [`local_path`], so
//! `execution.checkpointing.dir: file:///tmp/x` means `/tmp/x` wherever it is used.

use std::path::PathBuf;

/// The local path `raw` names. Plain paths are taken as they are (relative ones stay relative);
/// `file:` URIs must name an absolute path on this host (an empty authority or `localhost`),
/// with `%XX` escapes decoded. Any other scheme (`hdfs://`, `s3://`, ...) is refused with its
/// name: no file system for it is built in.
pub fn local_path(raw: &str) -> Result<PathBuf, String> {
    let raw = raw.trim();
    let Some((scheme, rest)) = split_scheme(raw) else {
        return Ok(PathBuf::from(raw));
    };
    if !scheme.eq_ignore_ascii_case("file") {
        return Err(format!(
            "'{raw}' uses the scheme '{scheme}', which this version cannot read or write: use a plain path or a file:// URI"
        ));
    }
    let path = match rest.strip_prefix("//") {
        Some(after) => {
            let (authority, path) = after.split_at(after.find('/').unwrap_or(after.len()));
            if !(authority.is_empty() || authority.eq_ignore_ascii_case("localhost")) {
                return Err(format!(
                    "'{raw}' names the host '{authority}': a file:// URI names a path on this host (file:///path)"
                ));
            }
            path
        }
        None => rest,
    };
    if !path.starts_with('/') {
        return Err(format!(
            "'{raw}' is not an absolute path: a file: URI is file:///absolute/path"
        ));
    }
    decode(path)
        .map(PathBuf::from)
        .map_err(|e| format!("'{raw}': {e}"))
}

/// Checks a path a client chose (a savepoint target, a restore path, a job's input or output):
/// it must be absolute and normalized (no `.` or `..` parts), must not be the file-system root,
/// and, when `allowed` lists directories (`security.io.allowed-dirs`), must lie inside one of
/// them. `what` names the path in the reason. The daemon runs with its own user's rights, so a
/// path a client chose is one the daemon must be allowed to write for anyone who can reach it.
pub fn check_client_path(
    path: &std::path::Path,
    what: &str,
    allowed: &[PathBuf],
) -> Result<(), String> {
    use std::path::Component;
    let shown = path.display();
    if path.as_os_str().is_empty() {
        return Err(format!("{what} is empty: give an absolute path"));
    }
    if !path.is_absolute() {
        return Err(format!("{what} {shown:?} is not an absolute path"));
    }
    // A newline or NUL in a directory name would reach logs and listings as forged lines.
    if path.to_string_lossy().chars().any(char::is_control) {
        return Err(format!("{what} {shown:?} contains control characters"));
    }
    // Split by hand: `components()` silently drops inner `.` parts.
    if path
        .to_string_lossy()
        .split('/')
        .any(|part| part == "." || part == "..")
    {
        return Err(format!(
            "{what} {shown:?} has '.' or '..' parts: give the path it means"
        ));
    }
    if path.components().all(|c| matches!(c, Component::RootDir)) {
        return Err(format!("{what} is the file-system root"));
    }
    if !allowed.is_empty() && !allowed.iter().any(|dir| path.starts_with(dir)) {
        let dirs: Vec<String> = allowed.iter().map(|d| d.display().to_string()).collect();
        return Err(format!(
            "{what} {shown:?} is outside the directories security.io.allowed-dirs allows ({})",
            dirs.join(", ")
        ));
    }
    Ok(())
}

/// `scheme:rest` when `raw` starts with a URI scheme (a letter, then letters, digits, `+`, `-`
/// or `.`, then `:`), as in RFC 3986.
fn split_scheme(raw: &str) -> Option<(&str, &str)> {
    let colon = raw.find(':')?;
    let scheme = &raw[..colon];
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then(|| (scheme, &raw[colon + 1..]))
}

/// Decodes `%XX` escapes (the result must be UTF-8).
fn decode(path: &str) -> Result<String, String> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = path
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    format!("bad escape at byte {i}: '%' must be followed by two hex digits")
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "the decoded path is not UTF-8".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_and_plain_paths_name_the_same_local_path() {
        for (raw, path) in [
            ("file:///tmp/x", "/tmp/x"),
            ("file:/tmp/x", "/tmp/x"),
            ("FILE:///tmp/x/", "/tmp/x/"),
            ("file://localhost/tmp/x", "/tmp/x"),
            ("file:///tmp/a%20b", "/tmp/a b"),
            ("/tmp/x", "/tmp/x"),
            (" /tmp/x ", "/tmp/x"),
            ("relative/dir", "relative/dir"),
        ] {
            assert_eq!(local_path(raw).unwrap(), PathBuf::from(path), "{raw}");
        }
    }

    #[test]
    fn client_paths_are_absolute_normalized_and_inside_the_allowed_dirs() {
        let none: &[PathBuf] = &[];
        check_client_path("/data/out".as_ref(), "--output", none).unwrap();
        check_client_path("/data/out/".as_ref(), "--output", none).unwrap();
        for (bad, needle) in [
            ("", "empty"),
            ("out", "not an absolute path"),
            ("/data/../etc", "'..'"),
            ("/data/./x", "'..'"),
            ("/", "root"),
            ("//", "root"),
            ("/tmp/sp\n2026-12-01 INFO forged", "control characters"),
            ("/tmp/sp\0", "control characters"),
        ] {
            let e = check_client_path(bad.as_ref(), "the target directory", none).unwrap_err();
            assert!(
                e.contains("the target directory") && e.contains(needle),
                "{bad}: {e}"
            );
        }
        let allowed = [PathBuf::from("/data"), PathBuf::from("/srv/savepoints")];
        check_client_path("/data".as_ref(), "x", &allowed).unwrap();
        check_client_path("/srv/savepoints/sp-1".as_ref(), "x", &allowed).unwrap();
        for bad in ["/etc", "/database", "/srv", "/tmp/data"] {
            let e = check_client_path(bad.as_ref(), "--output", &allowed).unwrap_err();
            assert!(
                e.contains("security.io.allowed-dirs")
                    && e.contains(bad)
                    && e.contains("/srv/savepoints"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn other_schemes_hosts_and_relative_uris_are_refused_with_the_reason() {
        let e = local_path("hdfs://namenode:8020/flink/checkpoints").unwrap_err();
        assert!(e.contains("scheme 'hdfs'"), "{e}");
        let e = local_path("file://otherhost/tmp").unwrap_err();
        assert!(e.contains("host 'otherhost'"), "{e}");
        let e = local_path("file:relative").unwrap_err();
        assert!(e.contains("not an absolute path"), "{e}");
        let e = local_path("file:///tmp/%zz").unwrap_err();
        assert!(e.contains("bad escape"), "{e}");
    }
}
