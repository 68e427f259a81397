//! [`StateStorage`] on HDFS, through the pure-Rust `hdfs-native` client (no JVM, no libhdfs).
//!
//! Files are written whole and renamed into place: a reader sees the old file or the new one,
//! never a prefix, and nothing relies on append. Within one attempt the client itself drops a
//! DataNode lost mid-block from the pipeline (and replaces it as
//! `dfs.client.block.write.replace-datanode-on-failure.*` say); a write that fails all the same
//! (a pipeline that could not be set up because its first DataNode is gone, a NameNode that
//! refused to complete the file) is retried from the start as a new temporary file, after a
//! pause that lets the NameNode notice the lost DataNode and leave it out of new pipelines.
//! A NameNode that cannot be reached fails the write at once: the client has already retried
//! it (see [`HadoopConf::client_settings`]), and the next checkpoint tries again.
//!
//! The client is asynchronous, the storage calls are not: they come from blocking threads
//! (checkpoint I/O lanes, task threads, the JobManager's blocking pool). Each call runs its
//! future with [`tokio::runtime::Runtime::block_on`] on a small runtime of the HDFS module's own
//! ([`io_runtime`]), whose workers also carry the client's connection tasks. A call made on a
//! worker thread of any runtime panics instead of blocking that worker, so a misplaced call is
//! found by the first test that makes it.

use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use hdfs_native::file::{FileReader, FileWriter};
use hdfs_native::{Client, ClientBuilder, HdfsError, WriteOptions};

use super::hadoop_conf::{HadoopConf, HdfsCluster};
use crate::config::HdfsUri;
use crate::state::storage::{FileInfo, OutputFile, StateStorage};

/// Whole-file attempts of a write before its error is returned.
const WRITE_ATTEMPTS: u32 = 4;
/// The pause before a write's second attempt; it doubles for each further one (1, 2, 4 s).
/// A NameNode takes a DataNode without heartbeats for stale after
/// `dfs.namenode.stale.datanode.interval` and, with `dfs.namenode.avoid.write.stale.datanode`,
/// places no new block on it; a cluster with more DataNodes than replicas most likely picks
/// other ones anyway.
const WRITE_RETRY_PAUSE: Duration = Duration::from_secs(1);
/// Bytes moved per client call when uploading or downloading a local file.
const CHUNK: usize = 4 << 20;
/// The permission of a directory only its owner may read or enter (`rwx------`).
const PRIVATE_DIR: u32 = 0o700;
/// The permission of other directories made (`rwxr-xr-x`, HDFS's default under its umask).
const PUBLIC_DIR: u32 = 0o755;
/// Worker threads of the HDFS runtime: they only shuttle bytes between sockets and buffers.
const IO_THREADS: usize = 2;

/// The process's HDFS runtime, made on first use and never dropped (dropping a runtime from
/// async code panics, and storages are dropped wherever their last owner is).
/// A runtime that could not be made (no threads to be had) is an error of every connect.
fn io_runtime() -> io::Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(IO_THREADS)
                .thread_name("hdfs-io")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| io::Error::other(format!("cannot start the HDFS client's runtime: {e}")))
}

/// One HDFS cluster (a NameNode or a name service) as checkpoint storage. Paths given to it are
/// full `hdfs:` URIs of this cluster; errors name them.
pub struct HdfsStorage {
    client: Client,
    cluster: HdfsCluster,
    /// Where the client's calls run (see the module's doc).
    runtime: &'static tokio::runtime::Runtime,
}

impl std::fmt::Debug for HdfsStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HdfsStorage")
            .field("cluster", &self.cluster)
            .finish()
    }
}

impl HdfsStorage {
    /// A client of `cluster` configured with `conf` (which may ask for Kerberos, name-service
    /// failover and timeouts as Hadoop's own client reads them). Connects lazily.
    pub fn connect(cluster: HdfsCluster, conf: &HadoopConf) -> io::Result<HdfsStorage> {
        let runtime = io_runtime()?;
        let client = ClientBuilder::new()
            .with_url(cluster.uri.clone())
            .with_config(conf.client_settings(&cluster))
            .with_io_runtime(runtime.handle().clone())
            .build()
            .map_err(|e| {
                io::Error::other(format!(
                    "{} (NameNodes {}): cannot create a client: {e}",
                    cluster.uri,
                    cluster.namenodes.join(", ")
                ))
            })?;
        tracing::info!(cluster = %cluster.uri, namenodes = ?cluster.namenodes, "HDFS client created");
        Ok(HdfsStorage {
            client,
            cluster,
            runtime,
        })
    }

    /// The path inside the cluster that the URI `path` names.
    fn inner(path: &str) -> io::Result<String> {
        match HdfsUri::parse(path) {
            Some(Ok(uri)) => Ok(uri.path),
            Some(Err(e)) => Err(io::Error::new(io::ErrorKind::InvalidInput, e)),
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("'{path}' is not an hdfs:// URI"),
            )),
        }
    }

    /// Writes the bytes `source` yields (called again from the start for each attempt) to a
    /// temporary file beside `path`, then renames it over `path`.
    fn write_whole<'a, S>(&self, path: &str, mut source: S) -> io::Result<u64>
    where
        S: FnMut() -> io::Result<Box<dyn Read + 'a>>,
    {
        let target = Self::inner(path)?;
        let mut attempt = 1;
        loop {
            let tmp = temp_beside(&target);
            let reader = source()?;
            let failed = match self
                .runtime
                .block_on(self.write_attempt(&tmp, &target, reader))
            {
                Ok(n) => return Ok(n),
                Err(failed) => failed,
            };
            let namenode_answered = failed.created && {
                // The temporary file is not referenced by anything; drop it, quietly. Whether
                // the NameNode answers also says who broke the attempt.
                match self.runtime.block_on(self.client.delete(&tmp, false)) {
                    Ok(_) => true,
                    Err(e) => not_found(&e),
                }
            };
            let e = failed.error;
            if !retryable(&e, namenode_answered) || attempt == WRITE_ATTEMPTS {
                // A file that could not even be created failed at the NameNode.
                let doing = match &e {
                    HdfsError::IOError(_) if !failed.created => format!(
                        "cannot write: no answer from the NameNode ({})",
                        self.cluster.namenodes.join(", ")
                    ),
                    _ => "cannot write".to_string(),
                };
                return Err(to_io(path, &doing, e));
            }
            let pause = WRITE_RETRY_PAUSE * 2u32.pow(attempt - 1);
            tracing::warn!(
                path,
                attempt,
                pause_ms = pause.as_millis() as u64,
                "HDFS write failed, retrying the whole file: {e}"
            );
            std::thread::sleep(pause);
            attempt += 1;
        }
    }

    /// One attempt of [`write_whole`](Self::write_whole): `tmp` written from `reader`, closed
    /// and renamed to `target`.
    async fn write_attempt<'a>(
        &self,
        tmp: &str,
        target: &str,
        reader: Box<dyn Read + 'a>,
    ) -> Result<u64, FailedAttempt> {
        let options = WriteOptions::default().overwrite(true).create_parent(true);
        let writer = self
            .client
            .create(tmp, options)
            .await
            .map_err(|error| FailedAttempt {
                error,
                created: false,
            })?;
        self.fill(writer, tmp, target, reader)
            .await
            .map_err(|error| FailedAttempt {
                error,
                created: true,
            })
    }

    /// Writes `reader` to the created `writer` of `tmp`, closes it and renames it to `target`.
    async fn fill<'a>(
        &self,
        mut writer: FileWriter,
        tmp: &str,
        target: &str,
        mut reader: Box<dyn Read + 'a>,
    ) -> Result<u64, HdfsError> {
        let mut total = 0u64;
        let mut buf = vec![0u8; CHUNK];
        loop {
            // The reader is a local file or memory: reading it here blocks only the caller's
            // (blocking) thread, which runs this future.
            let n = reader.read(&mut buf)?;
            if n == 0 {
                break;
            }
            writer
                .write_bytes(Bytes::copy_from_slice(&buf[..n]))
                .await?;
            total += n as u64;
        }
        writer.close().await?;
        self.client.rename(tmp, target, true).await?;
        Ok(total)
    }

    async fn status(
        &self,
        path: &str,
    ) -> Result<Option<hdfs_native::client::FileStatus>, HdfsError> {
        match self.client.get_file_info(path).await {
            Ok(s) => Ok(Some(s)),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl StateStorage for HdfsStorage {
    fn write(&self, path: &str, data: &[u8]) -> io::Result<()> {
        self.write_whole(path, || Ok(Box::new(data))).map(|_| ())
    }

    fn upload(&self, from: &Path, path: &str) -> io::Result<u64> {
        self.write_whole(path, || {
            let file = std::fs::File::open(from).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot upload {}: {e}", from.display()))
            })?;
            Ok(Box::new(file))
        })
    }

    fn read(&self, path: &str) -> io::Result<Vec<u8>> {
        let inner = Self::inner(path)?;
        self.runtime
            .block_on(async {
                let reader = self.client.read(&inner).await?;
                let bytes = reader.read_range(0, reader.file_length()).await?;
                Ok(bytes.to_vec())
            })
            .map_err(|e| to_io(path, "cannot read", e))
    }

    fn download(&self, path: &str, to: &Path) -> io::Result<()> {
        let inner = Self::inner(path)?;
        if let Some(parent) = to.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let mut out = std::fs::File::create(to)?;
        self.runtime
            .block_on(async {
                let reader = self.client.read(&inner).await?;
                let length = reader.file_length();
                let mut offset = 0;
                while offset < length {
                    let n = CHUNK.min(length - offset);
                    let bytes = reader.read_range(offset, n).await?;
                    out.write_all(&bytes)?;
                    offset += n;
                }
                Ok(())
            })
            .map_err(|e| to_io(path, "cannot download", e))?;
        out.sync_all()
    }

    fn status(&self, path: &str) -> io::Result<Option<FileInfo>> {
        let inner = Self::inner(path)?;
        self.runtime
            .block_on(self.status(&inner))
            .map(|s| {
                s.map(|s| FileInfo {
                    len: s.length as u64,
                    modified_ms: s.modification_time as i64,
                    is_dir: s.isdir,
                })
            })
            .map_err(|e| to_io(path, "cannot look up", e))
    }

    fn create_private_dir(&self, path: &str) -> io::Result<()> {
        let inner = Self::inner(path)?;
        self.runtime
            .block_on(async {
                self.client.mkdirs(&inner, PRIVATE_DIR, true).await?;
                // mkdirs leaves an existing directory's permission as it was.
                self.client.set_permission(&inner, PRIVATE_DIR).await
            })
            .map_err(|e| to_io(path, "cannot create a private directory", e))
    }

    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        let inner = Self::inner(dir)?;
        let entries = match self
            .runtime
            .block_on(self.client.list_status(&inner, false))
        {
            Ok(entries) => entries,
            Err(e) if not_found(&e) => return Ok(Vec::new()),
            Err(e) => return Err(to_io(dir, "cannot list", e)),
        };
        let mut names: Vec<String> = entries
            .into_iter()
            .filter_map(|s| s.path.rsplit('/').next().map(str::to_string))
            .filter(|n| !n.is_empty())
            .collect();
        names.sort();
        Ok(names)
    }

    fn delete_file(&self, path: &str) -> io::Result<()> {
        let inner = Self::inner(path)?;
        match self.runtime.block_on(self.client.delete(&inner, false)) {
            Ok(_) => Ok(()),
            Err(e) if not_found(&e) => Ok(()),
            Err(e) => Err(to_io(path, "cannot delete", e)),
        }
    }

    fn delete_dir(&self, path: &str) -> io::Result<()> {
        let inner = Self::inner(path)?;
        match self.runtime.block_on(self.client.delete(&inner, true)) {
            Ok(_) => Ok(()),
            Err(e) if not_found(&e) => Ok(()),
            Err(e) => Err(to_io(path, "cannot delete", e)),
        }
    }

    fn open_read(&self, path: &str, offset: u64) -> io::Result<Box<dyn Read + Send>> {
        let inner = Self::inner(path)?;
        let mut reader = self
            .runtime
            .block_on(self.client.read(&inner))
            .map_err(|e| to_io(path, "cannot open", e))?;
        let length = reader.file_length() as u64;
        if offset > length {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{path}: cannot read from byte {offset}: the file has {length} bytes"),
            ));
        }
        reader.set_position(offset as usize);
        Ok(Box::new(HdfsInput {
            reader,
            path: path.to_string(),
            buffer: Bytes::new(),
            runtime: self.runtime,
        }))
    }

    fn create_file(&self, path: &str) -> io::Result<Box<dyn OutputFile>> {
        let inner = Self::inner(path)?;
        let options = WriteOptions::default().overwrite(true).create_parent(false);
        let writer = self
            .runtime
            .block_on(self.client.create(&inner, options))
            .map_err(|e| to_io(path, "cannot create", e))?;
        Ok(Box::new(HdfsOutput {
            writer,
            path: path.to_string(),
            runtime: self.runtime,
        }))
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (source, target) = (Self::inner(from)?, Self::inner(to)?);
        self.runtime
            .block_on(self.client.rename(&source, &target, true))
            .map_err(|e| to_io(from, &format!("cannot rename to {to}"), e))
    }

    fn create_dir(&self, path: &str) -> io::Result<()> {
        let inner = Self::inner(path)?;
        self.runtime
            .block_on(self.client.mkdirs(&inner, PUBLIC_DIR, true))
            .map_err(|e| to_io(path, "cannot create the directory", e))
    }
}

/// A file read as a stream ([`StateStorage::open_read`]): [`CHUNK`]-sized ranges fetched from
/// the DataNodes as the reader asks for them, so a large file is never in memory whole.
struct HdfsInput {
    reader: FileReader,
    /// The URI, for errors.
    path: String,
    /// Fetched and not yet read.
    buffer: Bytes,
    runtime: &'static tokio::runtime::Runtime,
}

impl Read for HdfsInput {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.buffer.is_empty() {
            // `read_bytes` advances the reader's position; empty at the end of the file.
            let reader = &mut self.reader;
            self.buffer = self
                .runtime
                .block_on(reader.read_bytes(CHUNK))
                .map_err(|e| to_io(&self.path, "cannot read", e))?;
        }
        let n = buf.len().min(self.buffer.len());
        buf[..n].copy_from_slice(&self.buffer.split_to(n));
        Ok(n)
    }
}

/// A file being written as a stream ([`StateStorage::create_file`]). Each `write` goes to the
/// client's block pipeline (callers buffer); `sync` is HDFS's `hsync`, `close` completes the
/// file at the NameNode.
struct HdfsOutput {
    writer: FileWriter,
    /// The URI, for errors.
    path: String,
    runtime: &'static tokio::runtime::Runtime,
}

impl Write for HdfsOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let writer = &mut self.writer;
        self.runtime
            .block_on(writer.write_bytes(Bytes::copy_from_slice(buf)))
            .map_err(|e| to_io(&self.path, "cannot write", e))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl OutputFile for HdfsOutput {
    fn sync(&mut self) -> io::Result<()> {
        let writer = &mut self.writer;
        self.runtime
            .block_on(writer.hsync())
            .map_err(|e| to_io(&self.path, "cannot sync", e))
    }
    fn close(mut self: Box<Self>) -> io::Result<()> {
        let writer = &mut self.writer;
        self.runtime
            .block_on(writer.close())
            .map_err(|e| to_io(&self.path, "cannot close", e))
    }
}

/// A hidden name beside `path` for a file being written, unique per attempt. Readers skip
/// dot-files, as they do on the local file system.
fn temp_beside(path: &str) -> String {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    format!("{dir}/.{name}.inprogress-{:016x}", rand::random::<u64>())
}

/// Whether the client reports a missing file or directory.
fn not_found(e: &HdfsError) -> bool {
    match e {
        HdfsError::FileNotFound(_) => true,
        HdfsError::RPCError(class, _) | HdfsError::FatalRPCError(class, _) => {
            class.ends_with("FileNotFoundException")
        }
        HdfsError::IOError(io) => io.kind() == io::ErrorKind::NotFound,
        _ => false,
    }
}

/// A write attempt that failed: why, and whether its temporary file was created (so the
/// NameNode answered at least once).
struct FailedAttempt {
    error: HdfsError,
    created: bool,
}

/// Whether a failed write may succeed when tried again from the start: a broken pipeline may, a
/// refused path or permission may not. A connection error is ambiguous: it may be the
/// NameNode's, which the client has already retried (its failover attempts), or a DataNode's,
/// which a new attempt's new pipeline may avoid; `namenode_answered` (the NameNode answered the
/// cleanup of the failed attempt) tells them apart.
fn retryable(e: &HdfsError, namenode_answered: bool) -> bool {
    match e {
        HdfsError::IOError(io) => {
            namenode_answered
                && !matches!(
                    io.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied
                )
        }
        HdfsError::DataTransferError(_)
        | HdfsError::ChecksumError
        | HdfsError::OperationFailed(_)
        | HdfsError::BlocksNotFound(_)
        | HdfsError::InternalError(_) => true,
        HdfsError::RPCError(class, _) => {
            !(class.ends_with("AccessControlException")
                || class.ends_with("FileNotFoundException")
                || class.ends_with("ParentNotDirectoryException")
                || class.ends_with("DSQuotaExceededException")
                || class.ends_with("NSQuotaExceededException"))
        }
        _ => false,
    }
}

/// An `io::Error` naming the URI, what was being done and the client's cause, with the kind a
/// caller can act on (a missing file is `NotFound`).
fn to_io(path: &str, doing: &str, e: HdfsError) -> io::Error {
    let kind = match &e {
        _ if not_found(&e) => io::ErrorKind::NotFound,
        HdfsError::AlreadyExists(_) => io::ErrorKind::AlreadyExists,
        HdfsError::IOError(io) => io.kind(),
        HdfsError::RPCError(class, _) if class.ends_with("AccessControlException") => {
            io::ErrorKind::PermissionDenied
        }
        HdfsError::InvalidPath(_) | HdfsError::InvalidArgument(_) => io::ErrorKind::InvalidInput,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, format!("{path}: {doing}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_uri_and_keep_the_kind() {
        let e = to_io(
            "hdfs://nn:8020/chk/x",
            "cannot read",
            HdfsError::FileNotFound("/chk/x".into()),
        );
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(
            e.to_string()
                .starts_with("hdfs://nn:8020/chk/x: cannot read: ")
                && e.to_string().contains("/chk/x"),
            "{e}"
        );
        let e = to_io(
            "hdfs://nn/x",
            "cannot write",
            HdfsError::RPCError(
                "org.apache.hadoop.security.AccessControlException".into(),
                "Permission denied: user=a".into(),
            ),
        );
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert!(e.to_string().contains("Permission denied: user=a"), "{e}");
    }

    #[test]
    fn pipeline_failures_are_retried_and_refusals_are_not() {
        for answered in [true, false] {
            assert!(retryable(
                &HdfsError::DataTransferError("pipeline".into()),
                answered
            ));
            assert!(!retryable(
                &HdfsError::RPCError(
                    "org.apache.hadoop.security.AccessControlException".into(),
                    String::new()
                ),
                answered
            ));
            assert!(!retryable(&HdfsError::InvalidPath("x".into()), answered));
        }
        // A refused or dropped connection is a lost DataNode's while the NameNode answers, and
        // a NameNode that is down (already retried by the client) otherwise.
        for kind in [
            io::ErrorKind::ConnectionRefused,
            io::ErrorKind::ConnectionReset,
        ] {
            assert!(retryable(&HdfsError::IOError(kind.into()), true));
            assert!(!retryable(&HdfsError::IOError(kind.into()), false));
        }
        assert!(!retryable(
            &HdfsError::IOError(io::ErrorKind::PermissionDenied.into()),
            true
        ));
    }

    #[test]
    fn temporary_files_are_hidden_beside_their_target() {
        let tmp = temp_beside("/chk/job/shared/a.sst");
        assert!(
            tmp.starts_with("/chk/job/shared/.a.sst.inprogress-"),
            "{tmp}"
        );
        assert_ne!(tmp, temp_beside("/chk/job/shared/a.sst"));
    }

    #[test]
    fn paths_must_be_hdfs_uris() {
        let e = HdfsStorage::inner("/local/x").unwrap_err();
        assert!(e.to_string().contains("'/local/x'"), "{e}");
        assert_eq!(HdfsStorage::inner("hdfs://nn/a/b").unwrap(), "/a/b");
    }
}
