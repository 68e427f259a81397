//! The staging directory: where the client puts the files every container of an application
//! gets (the `sluice` binary, `config.yaml`, `.cluster-secret`) and from where YARN's
//! NodeManagers localize them. On a multi-host cluster it is on HDFS, the one file system every
//! node shares; `<yarn.staging-directory>/.sluice/<application id>/`, as Flink's
//! `<home>/.flink/<application id>/`.
//!
//! The client uploads the files once; the ApplicationMaster receives their resource
//! descriptions (URL, size, modification time) in its environment and hands the same ones to
//! every TaskManager container, so nothing is uploaded twice and no container reads a file of
//! the client's host. The directory is removed when the application ends: by the AM when it
//! unregisters (or is killed in its last attempt), by the client after `--kill` and after a
//! failed submission.
//!
//! The storage calls block: callers on an async runtime run them with
//! [`tokio::task::spawn_blocking`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use yarn_am::{LocalResource, LocalResourceType, Visibility};

use super::cluster::user;
use super::{BINARY, SHIPPED_FILES, YarnError, from_hex_json, to_hex_json};
use crate::config::{Config, HdfsUri};
use crate::state::StateStorage;
use crate::state::fs::FileSystems;
use crate::state::storage::join;

/// The directory below the staging directory that holds one directory per application.
const APPLICATIONS_DIR: &str = ".sluice";

/// The staging directory of `application_id`: `<root>/.sluice/<application id>`, where root is
/// `yarn.staging-directory`, else the user's HDFS home when `fs.defaultFS` is HDFS, else
/// `$TMPDIR/sluice-yarn-<user>`. An `hdfs:///` root gets `fs.defaultFS`'s authority, so a
/// NodeManager with a configuration of its own reads the same cluster.
pub fn application_dir(
    fs: &FileSystems,
    config: &Config,
    application_id: &str,
) -> Result<String, YarnError> {
    let root = match &config.yarn.staging_directory {
        Some(dir) => fs.qualify(dir).map_err(|cause| YarnError::Io {
            what: "yarn.staging-directory is unusable:",
            path: dir.clone(),
            cause,
        })?,
        None => match fs.default_hdfs().map_err(YarnError::Container)? {
            Some(cluster) => format!("{cluster}/user/{}", user()),
            None => std::env::temp_dir()
                .join(format!("sluice-yarn-{}", user()))
                .display()
                .to_string(),
        },
    };
    Ok(join(
        root.trim_end_matches('/'),
        &format!("{APPLICATIONS_DIR}/{application_id}"),
    ))
}

/// Whether `dir` is the staging directory of `application_id` (its last segment is the id):
/// the AM removes a directory named in its environment only if it is its own.
pub fn belongs_to(dir: &str, application_id: &str) -> bool {
    dir.trim_end_matches('/').rsplit('/').next() == Some(application_id)
}

/// The executable an application's containers run.
#[derive(Debug, Clone)]
pub enum Binary {
    /// The `sluice` binary at this path, or the one in a `yarn.provided.lib.dirs` directory.
    Sluice(PathBuf),
    /// A job artifact (a sluice with the job's programs bundled): always this file.
    JobArtifact(PathBuf),
}

/// Writes the files every container gets into the staging directory `dir` (created readable
/// by its owner only, as it holds the cluster's secret): `binary` uploaded unless it is the
/// `sluice` binary and a `yarn.provided.lib.dirs` directory already holds one, the
/// configuration text and the secret. Returns them as YARN local resources by their link
/// names.
pub fn upload(
    fs: &FileSystems,
    config: &Config,
    dir: &str,
    binary: &Binary,
    config_yaml: &str,
    secret: &str,
) -> Result<BTreeMap<String, LocalResource>, YarnError> {
    let io = |what: &'static str, path: &str| {
        let path = path.to_string();
        move |cause| YarnError::Io { what, path, cause }
    };
    fs.create_private_dir(dir)
        .map_err(io("cannot create the staging directory", dir))?;
    let provided = match binary {
        Binary::Sluice(_) => provided_binary(fs, &config.yarn.provided_lib_dirs)?,
        Binary::JobArtifact(_) => None,
    };
    let binary_path = match (provided, binary) {
        (Some(path), _) => {
            tracing::info!(%path, "shipping the sluice binary from yarn.provided.lib.dirs");
            path
        }
        (None, Binary::Sluice(local)) => {
            let path = join(dir, BINARY);
            fs.upload(local, &path)
                .map_err(io("cannot upload the sluice binary to", &path))?;
            path
        }
        (None, Binary::JobArtifact(local)) => {
            let path = join(dir, BINARY);
            fs.upload(local, &path)
                .map_err(io("cannot upload the job artifact to", &path))?;
            path
        }
    };
    let mut paths = BTreeMap::from([(BINARY.to_string(), binary_path)]);
    for (name, text) in [
        ("config.yaml", config_yaml),
        (crate::security::SECRET_FILE_NAME, secret),
    ] {
        let path = join(dir, name);
        fs.write(&path, text.as_bytes())
            .map_err(io("cannot write", &path))?;
        paths.insert(name.to_string(), path);
    }
    debug_assert!(SHIPPED_FILES.iter().all(|f| paths.contains_key(*f)));
    paths
        .into_iter()
        .map(|(name, path)| Ok((name, resource(fs, &path)?)))
        .collect()
}

/// The first `sluice` file among `dirs`, qualified as [`application_dir`] qualifies.
fn provided_binary(fs: &FileSystems, dirs: &[String]) -> Result<Option<String>, YarnError> {
    for dir in dirs {
        let path = fs
            .qualify(&join(dir.trim_end_matches('/'), BINARY))
            .map_err(|cause| YarnError::Io {
                what: "yarn.provided.lib.dirs is unusable:",
                path: dir.clone(),
                cause,
            })?;
        let found = fs.status(&path).map_err(|cause| YarnError::Io {
            what: "cannot look up",
            path: path.clone(),
            cause,
        })?;
        if found.is_some_and(|f| !f.is_dir) {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

/// A YARN local resource for the file at `path`, with the size and modification time the
/// NodeManager checks before it localizes the file.
fn resource(fs: &FileSystems, path: &str) -> Result<LocalResource, YarnError> {
    let missing = || std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
    let info = fs
        .status(path)
        .and_then(|s| s.ok_or_else(missing))
        .map_err(|cause| YarnError::Io {
            what: "cannot ship",
            path: path.to_string(),
            cause,
        })?;
    let url = if HdfsUri::parse(path).is_some() {
        path.to_string()
    } else {
        let abs = std::path::absolute(path).map_err(|cause| YarnError::Io {
            what: "cannot ship",
            path: path.to_string(),
            cause,
        })?;
        format!("file://{}", abs.display())
    };
    Ok(LocalResource {
        url,
        size: info.len as i64,
        timestamp: info.modified_ms,
        kind: LocalResourceType::File,
        visibility: Visibility::Application,
    })
}

/// Removes a staging directory; a missing one is no error.
pub fn remove(fs: &FileSystems, dir: &str) -> Result<(), YarnError> {
    fs.delete_dir(dir).map_err(|cause| YarnError::Io {
        what: "cannot remove the staging directory",
        path: dir.to_string(),
        cause,
    })
}

/// One shipped file as the AM's environment carries it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Shipped {
    name: String,
    url: String,
    size: i64,
    timestamp: i64,
}

/// The value of [`super::RESOURCES_ENV`]: the resources as hex-encoded JSON.
pub fn resources_to_env(resources: &BTreeMap<String, LocalResource>) -> String {
    let list: Vec<Shipped> = resources
        .iter()
        .map(|(name, r)| Shipped {
            name: name.clone(),
            url: r.url.clone(),
            size: r.size,
            timestamp: r.timestamp,
        })
        .collect();
    to_hex_json(&list)
}

/// Parses [`super::RESOURCES_ENV`]; every file of [`SHIPPED_FILES`] must be named.
pub fn resources_from_env(value: &str) -> Result<BTreeMap<String, LocalResource>, String> {
    let list: Vec<Shipped> = from_hex_json(super::RESOURCES_ENV, value)?;
    let resources: BTreeMap<String, LocalResource> = list
        .into_iter()
        .map(|s| {
            let resource = LocalResource {
                url: s.url,
                size: s.size,
                timestamp: s.timestamp,
                kind: LocalResourceType::File,
                visibility: Visibility::Application,
            };
            (s.name, resource)
        })
        .collect();
    match SHIPPED_FILES.iter().find(|f| !resources.contains_key(**f)) {
        Some(missing) => Err(format!("{} names no {missing}", super::RESOURCES_ENV)),
        None => Ok(resources),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::fs::HadoopConf;
    use std::path::Path;

    fn hdfs_default(nn: &str) -> FileSystems {
        let mut conf = HadoopConf::default();
        conf.add_site(&format!(
            "<configuration><property><name>fs.defaultFS</name><value>{nn}</value></property></configuration>"
        ))
        .unwrap();
        FileSystems::with_hadoop_conf(conf)
    }

    #[test]
    fn the_staging_directory_is_the_key_else_the_hdfs_home_else_the_local_temp_dir() {
        let app = "application_1_0002";
        let hdfs = hdfs_default("hdfs://nn:9000");
        let mut config = Config::default();
        assert_eq!(
            application_dir(&hdfs, &config, app).unwrap(),
            format!("hdfs://nn:9000/user/{}/.sluice/{app}", user())
        );
        let local = FileSystems::with_hadoop_conf(HadoopConf::default());
        let tmp = std::env::temp_dir().join(format!("sluice-yarn-{}", user()));
        assert_eq!(
            application_dir(&local, &config, app).unwrap(),
            format!("{}/.sluice/{app}", tmp.display())
        );
        config
            .set("yarn.staging-directory", "hdfs:///staging/")
            .unwrap();
        assert_eq!(
            application_dir(&hdfs, &config, app).unwrap(),
            format!("hdfs://nn:9000/staging/.sluice/{app}")
        );
        // Without fs.defaultFS an authority-less URI names no cluster: said with the key.
        let e = application_dir(&local, &config, app).unwrap_err();
        assert!(
            e.to_string().contains("yarn.staging-directory")
                && e.to_string().contains("fs.defaultFS"),
            "{e}"
        );
        config
            .set("yarn.staging-directory", "file:///srv/shared")
            .unwrap();
        assert_eq!(
            application_dir(&hdfs, &config, app).unwrap(),
            format!("/srv/shared/.sluice/{app}")
        );
        assert!(belongs_to(&format!("/srv/shared/.sluice/{app}"), app));
        assert!(!belongs_to("/srv/shared/.sluice", app));
        assert!(!belongs_to(&format!("/x/{app}-other"), app));
    }

    #[test]
    fn uploaded_files_become_resources_with_their_size_and_mtime_and_provided_binaries_are_reused()
    {
        let tmp = tempfile::tempdir().unwrap();
        let fs = FileSystems::with_hadoop_conf(HadoopConf::default());
        let binary = tmp.path().join("build-output");
        std::fs::write(&binary, b"#!binary").unwrap();
        let dir = format!("{}/stage/.sluice/app_1", tmp.path().display());
        let mut config = Config::default();
        let sluice = Binary::Sluice(binary.clone());
        let resources = upload(&fs, &config, &dir, &sluice, "a: 1\n", "5ec2e7").unwrap();
        assert_eq!(
            resources.keys().map(String::as_str).collect::<Vec<_>>(),
            [".cluster-secret", "config.yaml", "sluice"]
        );
        for (name, r) in &resources {
            let path = format!("{dir}/{name}");
            let meta = std::fs::metadata(&path).unwrap();
            let mtime = meta
                .modified()
                .unwrap()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64;
            assert_eq!(r.url, format!("file://{path}"));
            assert_eq!((r.size, r.timestamp), (meta.len() as i64, mtime), "{name}");
        }
        assert_eq!(
            std::fs::read(format!("{dir}/.cluster-secret")).unwrap(),
            b"5ec2e7"
        );
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "the staging directory is private");
        }
        // The AM gets exactly these in its environment.
        let env = resources_to_env(&resources);
        assert_eq!(resources_from_env(&env).unwrap(), resources);
        assert!(resources_from_env(&to_hex_json(&Vec::<Shipped>::new())).is_err());

        // A provided lib dir holding a sluice binary: shipped from there, not uploaded.
        let lib = tmp.path().join("lib");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(lib.join("sluice"), b"#!provided binary").unwrap();
        config
            .set(
                "yarn.provided.lib.dirs",
                &format!("{}/empty; {}", tmp.path().display(), lib.display()),
            )
            .unwrap();
        let dir2 = format!("{}/stage/.sluice/app_2", tmp.path().display());
        let resources = upload(&fs, &config, &dir2, &sluice, "a: 1\n", "5ec2e7").unwrap();
        assert_eq!(
            resources["sluice"].url,
            format!("file://{}/sluice", lib.display())
        );
        assert_eq!(resources["sluice"].size, 17);
        assert!(!Path::new(&format!("{dir2}/sluice")).exists());
        // A job artifact is the application's code: shipped itself, never a provided binary.
        let artifact = tmp.path().join("my-job");
        std::fs::write(&artifact, b"\x7fELF a job").unwrap();
        let dir3 = format!("{}/stage/.sluice/app_3", tmp.path().display());
        let job = Binary::JobArtifact(artifact);
        let resources = upload(&fs, &config, &dir3, &job, "a: 1\n", "5ec2e7").unwrap();
        assert_eq!(resources["sluice"].url, format!("file://{dir3}/sluice"));
        assert_eq!(
            std::fs::read(format!("{dir3}/sluice")).unwrap(),
            b"\x7fELF a job"
        );

        remove(&fs, &dir).unwrap();
        assert!(!Path::new(&dir).exists());
        remove(&fs, &dir).unwrap();
    }
}
