//! Paths as Flink configurations and commands give them: a plain path, or a `file:` URI
//! (`file:///tmp/x`, `file:/tmp/x`, `file://localhost/tmp/x`). Every configuration key, REST
//! field and job argument that names a local file or directory goes through [`local_path`], so
//! `execution.checkpointing.dir: file:///tmp/x` means `/tmp/x` wherever it is used.
//!
//! Durable storage (checkpoints, savepoints) may also live on HDFS: [`storage_path`] accepts
//! `hdfs://namenode:port/path`, `hdfs://nameservice/path` and `hdfs:///path` (the authority of
//! `fs.defaultFS`, resolved by the file-system layer where the Hadoop configuration is read).
//! A plain path stays a local path, as in Flink, whose default scheme is `file`.

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

/// The scheme of durable paths on HDFS.
pub const HDFS_SCHEME: &str = "hdfs";

/// An `hdfs:` URI taken apart: the authority (a NameNode `host[:port]`, a logical name service,
/// or empty for `fs.defaultFS`'s) and the absolute path on that file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HdfsUri {
    /// `host:port`, `host` (the NameNode's default port) or a name service; empty in
    /// `hdfs:///path`.
    pub authority: String,
    /// The absolute path, `/` at least, `%XX` escapes decoded.
    pub path: String,
    /// The path as the URI writes it (escapes kept), so that [`Self::to_uri`] read again gives
    /// the same path: decoding twice would turn `%2541` into `A`.
    encoded_path: String,
}

impl HdfsUri {
    /// The `hdfs:` URI `raw` names, `None` if it has another scheme or none, or why it is not
    /// one this version reads: it must have an authority part (`hdfs://`), an absolute path,
    /// no user info, query or fragment.
    pub fn parse(raw: &str) -> Option<Result<HdfsUri, String>> {
        let raw = raw.trim();
        let (scheme, rest) = split_scheme(raw)?;
        if !scheme.eq_ignore_ascii_case(HDFS_SCHEME) {
            return None;
        }
        Some(Self::parse_rest(raw, rest))
    }

    fn parse_rest(raw: &str, rest: &str) -> Result<HdfsUri, String> {
        let Some(after) = rest.strip_prefix("//") else {
            return Err(format!(
                "'{raw}' is not an hdfs:// URI: write hdfs://namenode:port/path or hdfs:///path"
            ));
        };
        if after.contains(['?', '#']) {
            return Err(format!(
                "'{raw}' has a query or fragment, which an HDFS path cannot have"
            ));
        }
        let (authority, path) = after.split_at(after.find('/').unwrap_or(after.len()));
        if authority.contains('@') {
            return Err(format!(
                "'{raw}' names a user in its authority: the HDFS user is the process's (HADOOP_USER_NAME)"
            ));
        }
        if let Some((_, port)) = authority.rsplit_once(':')
            && port.parse::<u16>().is_err()
        {
            return Err(format!(
                "'{raw}' has the port '{port}', which is not a port number"
            ));
        }
        let encoded = if path.is_empty() { "/" } else { path };
        let path = decode(encoded).map_err(|e| format!("'{raw}': {e}"))?;
        // Not lowercased: a name service is a case-sensitive part of Hadoop's setting names.
        Ok(HdfsUri {
            authority: authority.to_string(),
            path,
            encoded_path: encoded.to_string(),
        })
    }

    /// `hdfs://authority/path`, the form storage paths keep (escapes as written).
    pub fn to_uri(&self) -> String {
        format!("{HDFS_SCHEME}://{}{}", self.authority, self.encoded_path)
    }
}

/// The storage path `raw` names, for keys and requests that name durable storage (checkpoint
/// and savepoint directories, restore paths): an `hdfs:` URI in its canonical form
/// (`hdfs://authority/path`), or else a local path as [`local_path`] reads it. Other schemes are
/// refused with their name.
pub fn storage_path(raw: &str) -> Result<String, String> {
    let raw = raw.trim();
    if let Some(uri) = HdfsUri::parse(raw) {
        return uri.map(|u| u.to_uri());
    }
    match split_scheme(raw) {
        Some((scheme, _)) if !scheme.eq_ignore_ascii_case("file") => Err(format!(
            "'{raw}' uses the scheme '{scheme}', which this version cannot read or write: use a plain path, a file:// URI or an hdfs:// URI"
        )),
        _ => local_path(raw).map(|p| p.display().to_string()),
    }
}

/// [`check_client_path`] for a storage path (see [`storage_path`]): an HDFS path must be
/// absolute, normalized and not the root too. `security.io.allowed-dirs` lists local
/// directories, so when it is set an HDFS path is refused: no list of allowed HDFS directories
/// exists yet, and the daemon's HDFS user may write where a client must not.
pub fn check_client_storage_path(
    path: &str,
    what: &str,
    allowed: &[PathBuf],
) -> Result<(), String> {
    let Some(uri) = HdfsUri::parse(path) else {
        return check_client_path(std::path::Path::new(path), what, allowed);
    };
    let uri = uri.map_err(|e| format!("{what}: {e}"))?;
    check_client_path(std::path::Path::new(&uri.path), what, &[])
        .map_err(|e| e.replace(&format!("{:?}", uri.path), &format!("{path:?}")))?;
    if !allowed.is_empty() {
        return Err(format!(
            "{what} {path:?} is on HDFS, and security.io.allowed-dirs allows local directories only"
        ));
    }
    Ok(())
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
    fn storage_paths_keep_hdfs_uris_and_read_the_rest_as_local_paths() {
        for (raw, want) in [
            ("hdfs://nn:8020/flink/chk", "hdfs://nn:8020/flink/chk"),
            (
                "HDFS://NN.example.com:8020/a%20b/",
                "hdfs://NN.example.com:8020/a%20b/",
            ),
            ("hdfs://MyCluster/x", "hdfs://MyCluster/x"),
            ("hdfs://mycluster/chk", "hdfs://mycluster/chk"),
            ("hdfs:///chk", "hdfs:///chk"),
            ("hdfs://nn:8020", "hdfs://nn:8020/"),
            ("file:///tmp/x", "/tmp/x"),
            (" /tmp/x", "/tmp/x"),
        ] {
            assert_eq!(storage_path(raw).unwrap(), want, "{raw}");
        }
        let uri = HdfsUri::parse("hdfs://ns1/a/b").unwrap().unwrap();
        assert_eq!((uri.authority.as_str(), uri.path.as_str()), ("ns1", "/a/b"));
        // Escapes are decoded once, however often the canonical form is read again.
        let once = storage_path("hdfs://nn/a%2541").unwrap();
        let uri = HdfsUri::parse(&once).unwrap().unwrap();
        assert_eq!(uri.path, "/a%41");
        assert_eq!(
            HdfsUri::parse(&uri.to_uri()).unwrap().unwrap().path,
            "/a%41"
        );
        assert_eq!(HdfsUri::parse("/tmp/x"), None);
        assert_eq!(HdfsUri::parse("file:///tmp/x"), None);
        for (bad, needle) in [
            ("s3://bucket/x", "scheme 's3'"),
            ("hdfs:/x", "not an hdfs:// URI"),
            ("hdfs:x", "not an hdfs:// URI"),
            ("hdfs://nn:80x/x", "port '80x'"),
            ("hdfs://bob@nn/x", "names a user"),
            ("hdfs://nn/x?y=1", "query or fragment"),
            ("hdfs://nn/%zz", "bad escape"),
        ] {
            let e = storage_path(bad).unwrap_err();
            assert!(e.contains(needle) && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn client_hdfs_paths_are_checked_as_local_ones_and_refused_beside_allowed_dirs() {
        let none: &[PathBuf] = &[];
        check_client_storage_path("hdfs://nn:8020/sp", "the target directory", none).unwrap();
        check_client_storage_path("/data/sp", "the target directory", none).unwrap();
        for (bad, needle) in [
            ("hdfs://nn:8020/", "root"),
            ("hdfs://nn/a/../b", "'..'"),
            ("hdfs://nn", "root"),
            ("hdfs:/x", "not an hdfs:// URI"),
        ] {
            let e = check_client_storage_path(bad, "the target directory", none).unwrap_err();
            assert!(
                e.contains("the target directory") && e.contains(needle),
                "{bad}: {e}"
            );
        }
        let e = check_client_storage_path("hdfs://nn/a/../b", "x", none).unwrap_err();
        assert!(e.contains("hdfs://nn/a/../b"), "{e}");
        let allowed = [PathBuf::from("/data")];
        let e = check_client_storage_path("hdfs://nn/data", "x", &allowed).unwrap_err();
        assert!(
            e.contains("allowed-dirs") && e.contains("hdfs://nn/data"),
            "{e}"
        );
        check_client_storage_path("/data/x", "x", &allowed).unwrap();
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
