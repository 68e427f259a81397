//! The option registry: one row per key, from which parsing, validation, rendering and docs derive.
//!
//! A row names the key, the `Config` field it fills, the codec that parses and renders the value
//! (and checks its range), the default as text and a one-line doc. `Config::default()` is built by
//! parsing the default texts, so the table is the single source of every default.

use std::marker::PhantomData;
use std::path::PathBuf;
use std::time::Duration;

use super::units::{format_duration, format_memory_size, parse_duration, parse_memory_size};
use super::{
    CheckpointRetention, CheckpointingMode, Config, ConfigError, RestartStrategyKind, RuntimeMode,
    SchedulerKind, SchedulerMode, ServiceExposedType, StateBackendKind,
};
use crate::threads::SchedulingPolicy;

/// One configuration option: its key, default and documentation.
#[derive(Debug)]
pub struct OptionDef {
    /// The Flink-style dotted key, e.g. `"taskmanager.numberOfTaskSlots"`.
    pub key: &'static str,
    /// The default, written as it would be in `conf/config.yaml` (empty for "unset").
    pub default: &'static str,
    /// One line saying what the option controls.
    pub doc: &'static str,
    /// What kind of value the option takes, e.g. `"duration"`, for documentation.
    pub type_name: &'static str,
    /// Whether the value is a secret: masked by `entries()`, left out of `to_overrides()`.
    pub sensitive: bool,
    set: fn(&mut Config, &str) -> Result<(), Rejection>,
    get: fn(&Config) -> String,
}

impl OptionDef {
    /// Parses `raw` and stores it in `config`; errors name the key, the value and `origin`.
    pub(super) fn apply(
        &self,
        config: &mut Config,
        raw: &str,
        origin: &str,
    ) -> Result<(), ConfigError> {
        (self.set)(config, raw).map_err(|rejection| match rejection {
            Rejection::Invalid(expected) => ConfigError::InvalidValue {
                key: self.key.to_owned(),
                value: raw.to_owned(),
                expected,
                origin: origin.to_owned(),
            },
            Rejection::OutOfRange(allowed) => ConfigError::OutOfRange {
                key: self.key.to_owned(),
                value: raw.to_owned(),
                allowed,
                origin: origin.to_owned(),
            },
        })
    }

    /// The option's current value in `config`, rendered as it would be written in the file.
    pub(super) fn render(&self, config: &Config) -> String {
        (self.get)(config)
    }
}

/// Every option sluice understands, sorted by key.
pub fn known_options() -> &'static [OptionDef] {
    OPTIONS
}

/// Looks up an option by its exact key.
pub(super) fn find(key: &str) -> Option<&'static OptionDef> {
    OPTIONS.iter().find(|def| def.key == key)
}

/// The known key closest to `key`, when it is close enough to be a likely typo.
pub(super) fn suggest(key: &str) -> Option<&'static str> {
    let lower = key.to_lowercase();
    // Tolerate a few typos in long keys, but do not match unrelated short keys.
    let max_distance = (key.chars().count() / 5).clamp(2, 4);
    OPTIONS
        .iter()
        .map(|def| (edit_distance(&lower, &def.key.to_lowercase()), def.key))
        .filter(|(distance, _)| *distance <= max_distance)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, known)| known)
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

/// A rule between two options that each parse fine on their own.
pub(super) struct Rule {
    /// The first key the rule involves.
    pub(super) key: &'static str,
    /// The second key the rule involves.
    pub(super) other_key: &'static str,
    /// `Err(reason)` when `config` breaks the rule.
    pub(super) check: fn(&Config) -> Result<(), String>,
}

/// Cross-option rules, checked after the file and all overrides are applied.
pub(super) static RULES: &[Rule] = &[
    Rule {
        key: "high-availability.type",
        other_key: "high-availability.zookeeper.quorum",
        check: |c| {
            if c.ha.zookeeper && c.ha.quorum.is_none() {
                Err("zookeeper high availability needs the ZooKeeper servers".into())
            } else {
                Ok(())
            }
        },
    },
    Rule {
        key: "high-availability.type",
        other_key: "high-availability.storageDir",
        check: |c| {
            if c.ha.zookeeper && c.ha.storage_dir.is_none() {
                Err("zookeeper high availability needs a storage directory shared by all JobManagers".into())
            } else {
                Ok(())
            }
        },
    },
    Rule {
        key: "taskmanager.memory.network.min",
        other_key: "taskmanager.memory.network.max",
        check: |c| {
            let (min, max) = (c.network.network_min, c.network.network_max);
            if min <= max {
                Ok(())
            } else {
                Err(format!(
                    "the network memory minimum ({}) exceeds the maximum ({})",
                    format_memory_size(min),
                    format_memory_size(max)
                ))
            }
        },
    },
    Rule {
        key: "taskmanager.memory.managed.fraction",
        other_key: "taskmanager.memory.network.fraction",
        check: |c| {
            let n = &c.network;
            let (network, managed) = (n.network_memory(), n.managed_memory());
            if network.saturating_add(managed) < n.process_size {
                Ok(())
            } else {
                Err(format!(
                    "network memory ({}) and managed memory ({}) leave nothing of the process size ({}); \
                     lower taskmanager.memory.managed.* or raise taskmanager.memory.process.size",
                    format_memory_size(network),
                    format_memory_size(managed),
                    format_memory_size(n.process_size)
                ))
            }
        },
    },
    Rule {
        key: "heartbeat.interval",
        other_key: "heartbeat.timeout",
        check: |c| {
            let (interval, timeout) = (c.heartbeat.interval, c.heartbeat.timeout);
            if interval < timeout {
                Ok(())
            } else {
                Err(format!(
                    "the heartbeat interval ({}) must be shorter than the timeout ({}), \
                     or every peer would time out between two heartbeats",
                    format_duration(interval),
                    format_duration(timeout)
                ))
            }
        },
    },
    Rule {
        key: "security.ssl.rest.authentication-enabled",
        other_key: "security.ssl.rest.enabled",
        check: |c| {
            let ssl = &c.security.rest_ssl;
            if ssl.authentication && !ssl.enabled {
                Err("client authentication is part of TLS: set security.ssl.rest.enabled: true too, or the REST API would be served in plain HTTP to anyone".into())
            } else {
                Ok(())
            }
        },
    },
];

/// Why a codec rejected a raw value; the text completes "invalid value ...: " or "out of range: ".
#[derive(Debug, PartialEq)]
pub(super) enum Rejection {
    /// The value does not parse; the text says what is expected.
    Invalid(String),
    /// The value parses but is outside the allowed range; the text states the range.
    OutOfRange(String),
}

/// Parses and renders one kind of value. The parse checks the option's range too.
trait Codec {
    type Value;
    /// A short name for documentation.
    const TYPE_NAME: &'static str;
    fn parse(&self, raw: &str) -> Result<Self::Value, Rejection>;
    fn render(&self, value: &Self::Value) -> String;
}

const fn type_name_of<C: Codec>(_: &C) -> &'static str {
    C::TYPE_NAME
}

/// A non-empty string, such as a host name.
struct Text;

impl Codec for Text {
    type Value = String;
    const TYPE_NAME: &'static str = "string";
    fn parse(&self, raw: &str) -> Result<String, Rejection> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err(Rejection::Invalid("expected a non-empty string".into()));
        }
        Ok(raw.to_owned())
    }
    fn render(&self, value: &String) -> String {
        value.clone()
    }
}

/// `high-availability.cluster-id`: Flink's forms (`default`, `/default`, `/team/cluster_one`)
/// are accepted and kept as written; an id that could leave the HA root (`..`, empty parts) is
/// refused when the configuration is read, not when ZooKeeper is first used.
struct ClusterId;

impl Codec for ClusterId {
    type Value = String;
    const TYPE_NAME: &'static str = "string";
    fn parse(&self, raw: &str) -> Result<String, Rejection> {
        let raw = raw.trim();
        zk_ha::normalize_cluster_id(raw).map_err(|e| match e {
            zk_ha::HaError::Invalid { reason, .. } => Rejection::Invalid(reason),
            other => Rejection::Invalid(other.to_string()),
        })?;
        Ok(raw.to_owned())
    }
    fn render(&self, value: &String) -> String {
        value.clone()
    }
}

/// A string that may be unset; empty (or YAML null) means unset.
struct OptionalText;

impl Codec for OptionalText {
    type Value = Option<String>;
    const TYPE_NAME: &'static str = "string (optional)";
    fn parse(&self, raw: &str) -> Result<Option<String>, Rejection> {
        let raw = raw.trim();
        Ok((!raw.is_empty()).then(|| raw.to_owned()))
    }
    fn render(&self, value: &Option<String>) -> String {
        value.clone().unwrap_or_default()
    }
}

/// `metrics.reporter.prom.factory.class`: Flink's Prometheus reporter factory, or unset.
struct ReporterFactory;

/// The one reporter factory sluice has.
const PROMETHEUS_FACTORY: &str = "org.apache.flink.metrics.prometheus.PrometheusReporterFactory";

impl Codec for ReporterFactory {
    type Value = bool;
    const TYPE_NAME: &'static str = "class name (optional)";
    fn parse(&self, raw: &str) -> Result<bool, Rejection> {
        match raw.trim() {
            "" => Ok(false),
            PROMETHEUS_FACTORY => Ok(true),
            _ => Err(Rejection::Invalid(format!(
                "expected {PROMETHEUS_FACTORY} (the only metric reporter sluice has) or nothing"
            ))),
        }
    }
    fn render(&self, value: &bool) -> String {
        if *value { PROMETHEUS_FACTORY } else { "" }.to_owned()
    }
}

/// A port or an inclusive range of ports, `9250-9260`.
struct Ports;

impl Codec for Ports {
    type Value = super::PortRange;
    const TYPE_NAME: &'static str = "port or port range";
    fn parse(&self, raw: &str) -> Result<super::PortRange, Rejection> {
        super::PortRange::parse(raw).map_err(Rejection::Invalid)
    }
    fn render(&self, value: &super::PortRange) -> String {
        value.to_string()
    }
}

/// A file path that may be unset; empty (or YAML null) means unset. A plain path or a `file:`
/// URI, parsed by [`super::local_path`] as every path is.
struct OptionalPath;

impl Codec for OptionalPath {
    type Value = Option<PathBuf>;
    const TYPE_NAME: &'static str = "path or file:// URI (optional)";
    fn parse(&self, raw: &str) -> Result<Option<PathBuf>, Rejection> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Ok(None);
        }
        super::local_path(raw).map(Some).map_err(Rejection::Invalid)
    }
    fn render(&self, value: &Option<PathBuf>) -> String {
        value
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }
}

/// A directory of durable storage that may be unset; empty (or YAML null) means unset. A plain
/// path, a `file:` URI or an `hdfs:` URI, parsed by [`super::storage_path`].
struct OptionalStoragePath;

impl Codec for OptionalStoragePath {
    type Value = Option<String>;
    const TYPE_NAME: &'static str = "path, file:// or hdfs:// URI (optional)";
    fn parse(&self, raw: &str) -> Result<Option<String>, Rejection> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Ok(None);
        }
        super::storage_path(raw)
            .map(Some)
            .map_err(Rejection::Invalid)
    }
    fn render(&self, value: &Option<String>) -> String {
        value.clone().unwrap_or_default()
    }
}

/// A semicolon-separated list (Flink's separator for `yarn.provided.lib.dirs`) of storage
/// directories, each as [`super::storage_path`] reads it; empty means none.
struct StoragePathList;

impl Codec for StoragePathList {
    type Value = Vec<String>;
    const TYPE_NAME: &'static str = "semicolon-separated paths, file:// or hdfs:// URIs (optional)";
    fn parse(&self, raw: &str) -> Result<Vec<String>, Rejection> {
        raw.split(';')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| super::storage_path(p).map_err(Rejection::Invalid))
            .collect()
    }
    fn render(&self, value: &Vec<String>) -> String {
        value.join(";")
    }
}

/// A comma-separated list of absolute, normalized directories (plain paths or `file:` URIs);
/// empty means none.
struct DirList;

impl Codec for DirList {
    type Value = Vec<PathBuf>;
    const TYPE_NAME: &'static str = "list of absolute paths (optional)";
    fn parse(&self, raw: &str) -> Result<Vec<PathBuf>, Rejection> {
        raw.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                let path = super::local_path(p).map_err(Rejection::Invalid)?;
                super::check_client_path(&path, "the directory", &[])
                    .map_err(Rejection::Invalid)?;
                Ok(path)
            })
            .collect()
    }
    fn render(&self, value: &Vec<PathBuf>) -> String {
        let parts: Vec<String> = value.iter().map(|p| p.display().to_string()).collect();
        parts.join(",")
    }
}

/// An integer in `min..=max`, stored as `T`.
struct Int<T> {
    min: i64,
    max: i64,
    _type: PhantomData<T>,
}

impl<T> Int<T> {
    const fn range(min: i64, max: i64) -> Self {
        Int {
            min,
            max,
            _type: PhantomData,
        }
    }
}

impl<T: TryFrom<i64> + std::fmt::Display> Codec for Int<T> {
    type Value = T;
    const TYPE_NAME: &'static str = "integer";
    fn parse(&self, raw: &str) -> Result<T, Rejection> {
        let expected = if self.min >= 1 {
            "expected a positive integer"
        } else {
            "expected a non-negative integer"
        };
        let n: i64 = raw
            .trim()
            .parse()
            .map_err(|_| Rejection::Invalid(expected.into()))?;
        if n < self.min || n > self.max {
            return Err(Rejection::OutOfRange(format!(
                "must be between {} and {}",
                self.min, self.max
            )));
        }
        T::try_from(n).map_err(|_| Rejection::Invalid(expected.into()))
    }
    fn render(&self, value: &T) -> String {
        value.to_string()
    }
}

/// `auto`, or a UDP payload size in `1200..=65000`.
struct Mtu;

impl Codec for Mtu {
    type Value = super::MtuLimit;
    const TYPE_NAME: &'static str = "auto or integer";
    fn parse(&self, raw: &str) -> Result<super::MtuLimit, Rejection> {
        if raw.trim().eq_ignore_ascii_case("auto") {
            return Ok(super::MtuLimit::Auto);
        }
        Int::<u16>::range(1200, 65000)
            .parse(raw)
            .map(super::MtuLimit::Max)
            .map_err(|e| match e {
                Rejection::Invalid(_) => {
                    Rejection::Invalid("expected auto or a size in bytes such as 9000".into())
                }
                out_of_range => out_of_range,
            })
    }
    fn render(&self, value: &super::MtuLimit) -> String {
        match value {
            super::MtuLimit::Auto => "auto".into(),
            super::MtuLimit::Max(n) => n.to_string(),
        }
    }
}

/// A fraction strictly between 0 and 1.
struct Fraction;

impl Codec for Fraction {
    type Value = f64;
    const TYPE_NAME: &'static str = "float";
    fn parse(&self, raw: &str) -> Result<f64, Rejection> {
        let x: f64 = raw
            .trim()
            .parse()
            .map_err(|_| Rejection::Invalid("expected a number such as 0.1".into()))?;
        if x > 0.0 && x < 1.0 {
            Ok(x)
        } else {
            Err(Rejection::OutOfRange(
                "must be greater than 0 and less than 1".into(),
            ))
        }
    }
    fn render(&self, value: &f64) -> String {
        // Rust prints the shortest text that parses back to the same f64.
        value.to_string()
    }
}

/// A Flink duration; `positive` rejects zero.
struct Dur {
    positive: bool,
}

impl Codec for Dur {
    type Value = Duration;
    const TYPE_NAME: &'static str = "duration";
    fn parse(&self, raw: &str) -> Result<Duration, Rejection> {
        let d = parse_duration(raw).map_err(Rejection::Invalid)?;
        if self.positive && d.is_zero() {
            return Err(Rejection::OutOfRange("must be longer than zero".into()));
        }
        Ok(d)
    }
    fn render(&self, value: &Duration) -> String {
        format_duration(*value)
    }
}

/// A duration whose plain numbers are seconds (Flink's `Long` seconds keys), never zero.
struct Secs;

impl Codec for Secs {
    type Value = Duration;
    const TYPE_NAME: &'static str = "duration";
    fn parse(&self, raw: &str) -> Result<Duration, Rejection> {
        let trimmed = raw.trim();
        let d = if !trimmed.is_empty() && trimmed.bytes().all(|b| b.is_ascii_digit()) {
            trimmed
                .parse::<u64>()
                .map(Duration::from_secs)
                .map_err(|_| Rejection::Invalid("too many seconds".into()))?
        } else {
            parse_duration(raw).map_err(Rejection::Invalid)?
        };
        if d.is_zero() {
            return Err(Rejection::OutOfRange("must be longer than zero".into()));
        }
        Ok(d)
    }
    fn render(&self, value: &Duration) -> String {
        format_duration(*value)
    }
}

/// The largest memory size any option accepts: 16 TiB. No machine sluice runs on has more
/// memory than that, so a larger value is a typo (`1000000tb`) that would otherwise pass start-up
/// and fail later, or make a budget computed from it meaningless.
pub const MAX_MEMORY_SIZE: u64 = 16 << 40;

/// A Flink memory size of at least `min` bytes and at most [`MAX_MEMORY_SIZE`]; `power_of_two`
/// for page-like sizes.
struct Mem {
    min: u64,
    power_of_two: bool,
}

impl Codec for Mem {
    type Value = u64;
    const TYPE_NAME: &'static str = "memory size";
    fn parse(&self, raw: &str) -> Result<u64, Rejection> {
        let bytes = parse_memory_size(raw).map_err(Rejection::Invalid)?;
        if bytes < self.min || (self.power_of_two && !bytes.is_power_of_two()) {
            let power = if self.power_of_two {
                "a power of two "
            } else {
                ""
            };
            return Err(Rejection::OutOfRange(format!(
                "must be {power}of at least {}",
                format_memory_size(self.min)
            )));
        }
        if bytes > MAX_MEMORY_SIZE {
            return Err(Rejection::OutOfRange(format!(
                "must be at most {}",
                format_memory_size(MAX_MEMORY_SIZE)
            )));
        }
        Ok(bytes)
    }
    fn render(&self, value: &u64) -> String {
        format_memory_size(*value)
    }
}

/// Flink's upper bound on max parallelism (the number of key groups), 2^15: also the most
/// parallelism a job or `parallelism.default` may ask for, since no operator can have more
/// subtasks than key groups.
pub const MAX_PARALLELISM: u32 = 1 << 15;

/// `pipeline.max-parallelism`: -1 for "derive per operator", else 1..=32768.
struct MaxParallelism;

impl Codec for MaxParallelism {
    type Value = Option<u32>;
    const TYPE_NAME: &'static str = "integer";
    fn parse(&self, raw: &str) -> Result<Option<u32>, Rejection> {
        let n: i64 = raw
            .trim()
            .parse()
            .map_err(|_| Rejection::Invalid("expected an integer (-1 for automatic)".into()))?;
        match n {
            -1 => Ok(None),
            1..=0x8000 => Ok(u32::try_from(n).ok()),
            _ => Err(Rejection::OutOfRange(format!(
                "must be -1 (automatic) or between 1 and {MAX_PARALLELISM}"
            ))),
        }
    }
    fn render(&self, value: &Option<u32>) -> String {
        value.map_or_else(|| "-1".to_owned(), |n| n.to_string())
    }
}

/// An enum option whose values are written in lower case.
pub(super) trait ConfigEnum: Copy + PartialEq + 'static {
    /// Every value with its textual name.
    const CHOICES: &'static [(&'static str, Self)];
}

impl ConfigEnum for SchedulingPolicy {
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("batch", SchedulingPolicy::Batch),
        ("normal", SchedulingPolicy::Normal),
    ];
}

impl ConfigEnum for SchedulerKind {
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("default", SchedulerKind::Default),
        ("adaptive", SchedulerKind::Adaptive),
    ];
}

impl ConfigEnum for SchedulerMode {
    const CHOICES: &'static [(&'static str, Self)] = &[("reactive", SchedulerMode::Reactive)];
}

impl ConfigEnum for RestartStrategyKind {
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("none", RestartStrategyKind::None),
        ("off", RestartStrategyKind::None),
        ("disable", RestartStrategyKind::None),
        ("fixed-delay", RestartStrategyKind::FixedDelay),
        ("fixeddelay", RestartStrategyKind::FixedDelay),
        ("failure-rate", RestartStrategyKind::FailureRate),
        ("failurerate", RestartStrategyKind::FailureRate),
        ("exponential-delay", RestartStrategyKind::ExponentialDelay),
        ("exponentialdelay", RestartStrategyKind::ExponentialDelay),
    ];
}

impl ConfigEnum for StateBackendKind {
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("hashmap", StateBackendKind::HashMap),
        ("rocksdb", StateBackendKind::RocksDb),
    ];
}

impl ConfigEnum for RuntimeMode {
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("STREAMING", RuntimeMode::Streaming),
        ("BATCH", RuntimeMode::Batch),
        ("AUTOMATIC", RuntimeMode::Automatic),
    ];
}

impl ConfigEnum for CheckpointingMode {
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("EXACTLY_ONCE", CheckpointingMode::ExactlyOnce),
        ("AT_LEAST_ONCE", CheckpointingMode::AtLeastOnce),
    ];
}

impl ConfigEnum for CheckpointRetention {
    const CHOICES: &'static [(&'static str, Self)] = &[
        (
            "NO_EXTERNALIZED_CHECKPOINTS",
            CheckpointRetention::DeleteOnCancellation,
        ),
        (
            "DELETE_ON_CANCELLATION",
            CheckpointRetention::DeleteOnCancellation,
        ),
        (
            "RETAIN_ON_CANCELLATION",
            CheckpointRetention::RetainOnCancellation,
        ),
    ];
}

impl ConfigEnum for ServiceExposedType {
    const CHOICES: &'static [(&'static str, Self)] = &[
        ("ClusterIP", ServiceExposedType::ClusterIp),
        ("NodePort", ServiceExposedType::NodePort),
        ("LoadBalancer", ServiceExposedType::LoadBalancer),
    ];
}

/// `high-availability.type`: NONE or zookeeper.
struct HaType;

impl Codec for HaType {
    type Value = bool;
    const TYPE_NAME: &'static str = "enum";
    fn parse(&self, raw: &str) -> Result<bool, Rejection> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "none" | "" => Ok(false),
            "zookeeper" => Ok(true),
            _ => Err(Rejection::Invalid(
                "expected \"NONE\" or \"zookeeper\"".into(),
            )),
        }
    }
    fn render(&self, value: &bool) -> String {
        if *value { "zookeeper" } else { "NONE" }.into()
    }
}

/// `true` or `false`.
struct Bool;

impl Codec for Bool {
    type Value = bool;
    const TYPE_NAME: &'static str = "boolean";
    fn parse(&self, raw: &str) -> Result<bool, Rejection> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(Rejection::Invalid("expected true or false".into())),
        }
    }
    fn render(&self, value: &bool) -> String {
        value.to_string()
    }
}

/// A duration that may be unset; empty means unset, zero is refused.
struct OptDur;

impl Codec for OptDur {
    type Value = Option<Duration>;
    const TYPE_NAME: &'static str = "duration (optional)";
    fn parse(&self, raw: &str) -> Result<Option<Duration>, Rejection> {
        if raw.trim().is_empty() {
            return Ok(None);
        }
        POSITIVE_DURATION.parse(raw).map(Some)
    }
    fn render(&self, value: &Option<Duration>) -> String {
        value.map(format_duration).unwrap_or_default()
    }
}

/// A duration where a negative value means forever (`None`), as Flink's adaptive scheduler
/// reads its resource wait timeout.
struct WaitDur;

impl Codec for WaitDur {
    type Value = Option<Duration>;
    const TYPE_NAME: &'static str = "duration (negative: forever)";
    fn parse(&self, raw: &str) -> Result<Option<Duration>, Rejection> {
        if raw.trim().starts_with('-') {
            return Ok(None);
        }
        ANY_DURATION.parse(raw).map(Some)
    }
    fn render(&self, value: &Option<Duration>) -> String {
        value.map_or_else(|| "-1".into(), format_duration)
    }
}

/// A memory size of at most the given bytes (Flink caps `state.storage.fs.memory-threshold` at
/// 1 MiB: inline state travels in RPC messages and the metadata file).
struct MemAtMost(u64);

impl Codec for MemAtMost {
    type Value = u64;
    const TYPE_NAME: &'static str = "memory size";
    fn parse(&self, raw: &str) -> Result<u64, Rejection> {
        let bytes = ANY_SIZE.parse(raw)?;
        if bytes > self.0 {
            return Err(Rejection::OutOfRange(format!(
                "must be at most {}",
                format_memory_size(self.0)
            )));
        }
        Ok(bytes)
    }
    fn render(&self, value: &u64) -> String {
        format_memory_size(*value)
    }
}

/// A memory size that may be unset; empty means unset.
struct OptMem;

impl Codec for OptMem {
    type Value = Option<u64>;
    const TYPE_NAME: &'static str = "memory size (optional)";
    fn parse(&self, raw: &str) -> Result<Option<u64>, Rejection> {
        if raw.trim().is_empty() {
            return Ok(None);
        }
        ANY_SIZE.parse(raw).map(Some)
    }
    fn render(&self, value: &Option<u64>) -> String {
        value.map(format_memory_size).unwrap_or_default()
    }
}

/// An optional enum: empty means unset.
struct OptChoice<E>(PhantomData<E>);

impl<E: ConfigEnum> Codec for OptChoice<E> {
    type Value = Option<E>;
    const TYPE_NAME: &'static str = "enum (optional)";
    fn parse(&self, raw: &str) -> Result<Option<E>, Rejection> {
        if raw.trim().is_empty() {
            return Ok(None);
        }
        Choice::<E>(PhantomData).parse(raw).map(Some)
    }
    fn render(&self, value: &Option<E>) -> String {
        value
            .map(|v| Choice::<E>(PhantomData).render(&v))
            .unwrap_or_default()
    }
}

/// A float in `[min, max]`.
struct FloatRange(f64, f64);

impl Codec for FloatRange {
    type Value = f64;
    const TYPE_NAME: &'static str = "float";
    fn parse(&self, raw: &str) -> Result<f64, Rejection> {
        let v: f64 = raw
            .trim()
            .parse()
            .map_err(|_| Rejection::Invalid("expected a number".into()))?;
        if !v.is_finite() || v < self.0 || v > self.1 {
            return Err(Rejection::OutOfRange(format!(
                "must be between {} and {}",
                self.0, self.1
            )));
        }
        Ok(v)
    }
    fn render(&self, value: &f64) -> String {
        value.to_string()
    }
}

/// One of the names in `E::CHOICES`, matched case-insensitively.
struct Choice<E>(PhantomData<E>);

impl<E: ConfigEnum> Codec for Choice<E> {
    type Value = E;
    const TYPE_NAME: &'static str = "enum";
    fn parse(&self, raw: &str) -> Result<E, Rejection> {
        let raw = raw.trim();
        E::CHOICES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(raw))
            .map(|(_, value)| *value)
            .ok_or_else(|| {
                let names: Vec<String> =
                    E::CHOICES.iter().map(|(n, _)| format!("\"{n}\"")).collect();
                Rejection::Invalid(format!("expected one of {}", names.join(", ")))
            })
    }
    fn render(&self, value: &E) -> String {
        E::CHOICES
            .iter()
            .find(|(_, v)| v == value)
            .map(|(name, _)| (*name).to_owned())
            .unwrap_or_default()
    }
}

const PORT: Int<u16> = Int::range(0, u16::MAX as i64);
const AT_LEAST_ONE: Int<u32> = Int::range(1, u32::MAX as i64);
/// The most slots one TaskManager may offer: Flink's largest parallelism. No job can use more
/// slots than its parallelism, and the JobManager refuses a registration above it.
pub const MAX_TASK_SLOTS: u32 = 32768;
const ANY_COUNT: Int<u32> = Int::range(0, u32::MAX as i64);
const POSITIVE_DURATION: Dur = Dur { positive: true };
const SECONDS: Secs = Secs;
const ANY_DURATION: Dur = Dur { positive: false };
const ANY_SIZE: Mem = Mem {
    min: 0,
    power_of_two: false,
};

/// Builds `OPTIONS` from rows `"key" => field.path: CODEC, default "text", doc "line";`.
/// A row may end with `, sensitive` before the `;`.
macro_rules! options {
    ($( $key:literal => $($field:ident).+ : $codec:expr,
        default $default:literal, doc $doc:literal $(, $sensitive:ident)? ; )*) => {
        static OPTIONS: &[OptionDef] = &[$(
            OptionDef {
                key: $key,
                default: $default,
                doc: $doc,
                type_name: type_name_of(&$codec),
                sensitive: options!(@sensitive $($sensitive)?),
                set: |config, raw| {
                    config.$($field).+ = Codec::parse(&$codec, raw)?;
                    Ok(())
                },
                get: |config| Codec::render(&$codec, &config.$($field).+),
            },
        )*];
    };
    (@sensitive sensitive) => { true };
    (@sensitive) => { false };
}

// Sorted by key; a unit test keeps it that way so `entries()` needs no sort and lookups read well.
options! {
    "blob.service.cleanup.interval" => taskmanager.artifact_cleanup_interval: SECONDS,
        default "1 h",
        doc "How long a TaskManager keeps a fetched job artifact that no job of it runs (a plain number is seconds, as in Flink).";
    "execution.buffer-timeout" => network.buffer_timeout: ANY_DURATION,
        default "100 ms",
        doc "How long an output buffer may wait to fill before it is flushed (0 flushes every record).";
    "execution.checkpointing.dir" => checkpointing.dir: OptionalStoragePath,
        default "",
        doc "Directory (shared by all processes) where checkpoints are written; required with an interval. A plain path, a file:// URI or an hdfs:// URI (HDFS as HADOOP_CONF_DIR configures it).";
    "execution.checkpointing.externalized-checkpoint-retention" => checkpointing.retention: Choice::<CheckpointRetention>(PhantomData),
        default "NO_EXTERNALIZED_CHECKPOINTS",
        doc "NO_EXTERNALIZED_CHECKPOINTS / DELETE_ON_CANCELLATION delete checkpoints when a job finishes or is cancelled; RETAIN_ON_CANCELLATION keeps them on cancel.";
    "execution.checkpointing.incremental" => checkpointing.incremental: Bool,
        default "false",
        doc "RocksDB checkpoints upload only the files that are new since the last completed one.";
    "execution.checkpointing.interval" => checkpointing.interval: OptDur,
        default "",
        doc "Time between periodic checkpoints; unset: no checkpoints.";
    "execution.checkpointing.max-concurrent-checkpoints" => checkpointing.max_concurrent: AT_LEAST_ONE,
        default "1",
        doc "Checkpoints that may be in progress at the same time.";
    "execution.checkpointing.min-pause" => checkpointing.min_pause: ANY_DURATION,
        default "0 ms",
        doc "Least time between the end of one checkpoint and the start of the next.";
    "execution.checkpointing.mode" => checkpointing.mode: Choice::<CheckpointingMode>(PhantomData),
        default "EXACTLY_ONCE",
        doc "EXACTLY_ONCE aligns barriers at tasks with several inputs; AT_LEAST_ONCE does not.";
    "execution.checkpointing.num-retained" => checkpointing.num_retained: AT_LEAST_ONE,
        default "1",
        doc "Completed checkpoints kept; older ones are deleted.";
    "execution.checkpointing.savepoint-dir" => checkpointing.savepoint_dir: OptionalStoragePath,
        default "",
        doc "Default target directory of savepoints: a plain path, a file:// URI or an hdfs:// URI.";
    "execution.checkpointing.timeout" => checkpointing.timeout: POSITIVE_DURATION,
        default "10 min",
        doc "A checkpoint not complete after this long is given up.";
    "execution.checkpointing.tolerable-failed-checkpoints" => checkpointing.tolerable_failures: ANY_COUNT,
        default "0",
        doc "Consecutive failed checkpoints tolerated before the job fails over.";
    "execution.runtime-mode" => runtime_mode: Choice::<RuntimeMode>(PhantomData),
        default "STREAMING",
        doc "How jobs execute unless their program chooses: STREAMING (pipelined exchanges, checkpoints), BATCH (stage by stage over exchanges written to local disk, final results only, failed parts rerun from finished stages) or AUTOMATIC (BATCH when every source is bounded).";
    "execution.savepoint.ignore-unclaimed-state" => checkpointing.ignore_unclaimed_state: Bool,
        default "false",
        doc "Whether a job restored from a savepoint or checkpoint skips the state of operators it no longer has, instead of refusing the restore (Flink's --allowNonRestoredState).";
    "heartbeat.interval" => heartbeat.interval: POSITIVE_DURATION,
        default "10 s",
        doc "How often the JobManager and TaskManagers send each other heartbeats.";
    "heartbeat.rpc-failure-threshold" => heartbeat.rpc_failure_threshold: Int::<i32>::range(-1, i32::MAX as i64),
        default "2",
        doc "Heartbeats in a row a peer may leave unanswered before it counts as unreachable (-1 disables; then only heartbeat.timeout applies).";
    "heartbeat.timeout" => heartbeat.timeout: POSITIVE_DURATION,
        default "50 s",
        doc "How long without a heartbeat before a peer is considered dead.";
    "high-availability.cluster-id" => ha.cluster_id: ClusterId,
        default "default",
        doc "Names this cluster's HA data in ZooKeeper and the storage directory (one per cluster sharing a quorum).";
    "high-availability.storageDir" => ha.storage_dir: OptionalStoragePath,
        default "",
        doc "Directory (shared by all JobManagers: a shared mount or an hdfs:// URI) for job graphs, results and job artifacts; required with zookeeper HA.";
    "high-availability.type" => ha.zookeeper: HaType,
        default "NONE",
        doc "NONE, or zookeeper: JobManagers elect a leader and a standby takes over the jobs.";
    "high-availability.zookeeper.client.connection-timeout" => ha.connection_timeout: POSITIVE_DURATION,
        default "6 s",
        doc "How long a ZooKeeper connection attempt may take.";
    "high-availability.zookeeper.client.session-timeout" => ha.session_timeout: POSITIVE_DURATION,
        default "6 s",
        doc "ZooKeeper session timeout: a dead leader's leadership ends after it (no GC pauses to ride out, so shorter than Flink's 60 s).";
    "high-availability.zookeeper.path.root" => ha.root: Text,
        default "/sluice",
        doc "Root node of sluice's data in ZooKeeper.";
    "high-availability.zookeeper.quorum" => ha.quorum: OptionalText,
        default "",
        doc "ZooKeeper servers, host:port,host:port; required with zookeeper HA.";
    "jobmanager.adaptive-scheduler.min-parallelism-increase" => adaptive.min_parallelism_increase: Int::<u32>::range(1, 32768),
        default "1",
        doc "Adaptive scheduler: the smallest raise of a vertex's parallelism that new slots must allow before a running job rescales.";
    "jobmanager.adaptive-scheduler.resource-stabilization-timeout" => adaptive.stabilization_timeout: ANY_DURATION,
        default "10 s",
        doc "Adaptive scheduler: how long the slots a job could have must stay unchanged before it starts with fewer than it wants.";
    "jobmanager.adaptive-scheduler.resource-wait-timeout" => adaptive.resource_wait_timeout: WaitDur,
        default "5 min",
        doc "Adaptive scheduler: how long a job waits for the slots it wants before it runs with fewer, or fails without the slots it needs (negative: forever).";
    "jobmanager.adaptive-scheduler.scaling-interval.max" => adaptive.scaling_interval_max: OptDur,
        default "",
        doc "Adaptive scheduler: after this long, new slots that raise a job's parallelism by less than the minimum increase rescale it anyway (unset: never).";
    "jobmanager.adaptive-scheduler.scaling-interval.min" => adaptive.scaling_interval_min: ANY_DURATION,
        default "30 s",
        doc "Adaptive scheduler: the least time between a job's (re)start and its next scale-up.";
    "jobmanager.bind-host" => jobmanager.bind_host: Text,
        default "localhost",
        doc "Local address the JobManager's RPC endpoint binds to (0.0.0.0 for all interfaces).";
    "jobmanager.max-pending-jobs" => jobmanager.max_pending_jobs: Int::<usize>::range(1, 1_000_000),
        default "100",
        doc "Most submitted jobs that may wait for slots (CREATED) at once; a submission beyond it is refused until one starts or ends.";
    "jobmanager.memory.process.size" => yarn.jobmanager_memory: Mem { min: 1, power_of_two: false },
        default "512mb",
        doc "Memory of the JobManager's YARN container (the ApplicationMaster).";
    "jobmanager.rpc.address" => jobmanager.rpc_address: Text,
        default "localhost",
        doc "Address other processes use to reach the JobManager's RPC endpoint.";
    "jobmanager.rpc.max-connections" => jobmanager.rpc_max_connections: AT_LEAST_ONE,
        default "1024",
        doc "Most control connections the JobManager's RPC port holds at once (TaskManagers, and peers still proving the cluster secret); more are closed as soon as they are accepted.";
    "jobmanager.rpc.port" => jobmanager.rpc_port: PORT,
        default "6123",
        doc "Port of the JobManager's RPC endpoint.";
    "jobmanager.scheduler" => scheduler: Choice::<SchedulerKind>(PhantomData),
        default "default",
        doc "Scheduler for new jobs: \"default\" or \"adaptive\" (rescales to the slots available).";
    "jobstore.expiration-time" => jobstore.expiration_time: POSITIVE_DURATION,
        default "1 h",
        doc "How long a finished job stays visible in the REST API.";
    "jobstore.max-capacity" => jobstore.max_capacity: Int::<usize>::range(0, i64::MAX),
        default "1000",
        doc "How many finished jobs the JobManager keeps for the REST API.";
    "kubernetes.cluster-id" => kubernetes.cluster_id: OptionalText,
        default "",
        doc "Names the cluster on Kubernetes: its JobManager Deployment, REST Service and every pod (unset: sluice kubernetes-session makes one up).";
    "kubernetes.config.file" => kubernetes.config_file: OptionalPath,
        default "",
        doc "The kubeconfig the client and the JobManager use (unset: $KUBECONFIG, else ~/.kube/config, else the pod's in-cluster service account).";
    "kubernetes.container.image" => kubernetes.image: Text,
        default "sluice:latest",
        doc "Image of the JobManager and TaskManager pods.";
    "kubernetes.jobmanager.service-account" => kubernetes.jobmanager_service_account: Text,
        default "default",
        doc "Service account of the JobManager pod; it must be allowed to create, watch and delete pods.";
    "kubernetes.namespace" => kubernetes.namespace: Text,
        default "default",
        doc "Namespace the cluster's Deployment, Service and pods live in.";
    "kubernetes.rest-service.exposed.type" => kubernetes.rest_service_exposed_type: Choice::<ServiceExposedType>(PhantomData),
        default "ClusterIP",
        doc "Type of the JobManager's REST Service: ClusterIP (clients reach the JobManager pod's address), NodePort or LoadBalancer.";
    "kubernetes.taskmanager.cpu" => kubernetes.taskmanager_cpu: FloatRange(0.001, 1_000_000.0),
        default "1",
        doc "CPU each TaskManager pod requests.";
    "log.file.max-count" => log.file_max_count: Int::<u32>::range(1, 1000),
        default "10",
        doc "Rolled-over log files a daemon keeps (sluice.log.1 is the newest); older ones are deleted.";
    "log.file.max-size" => log.file_max_size: Mem { min: 1024, power_of_two: false },
        default "100mb",
        doc "Size at which a daemon's log file (the file its output was redirected to) is rolled over.";
    "metrics.reporter.prom.factory.class" => metrics.prometheus: ReporterFactory,
        default "",
        doc "Set to org.apache.flink.metrics.prometheus.PrometheusReporterFactory to serve every process's metrics to Prometheus (GET /metrics); unset: no reporter.";
    "metrics.reporter.prom.port" => metrics.prometheus_port: Ports,
        default "9249",
        doc "Port of the Prometheus reporter, or a range such as 9250-9260: each process takes the first free one (several TaskManagers on a host).";
    "parallelism.default" => parallelism_default: Int::<u32>::range(1, MAX_PARALLELISM as i64),
        default "1",
        doc "Parallelism of operators and jobs that do not set one.";
    "pipeline.auto-watermark-interval" => auto_watermark_interval: ANY_DURATION,
        default "200 ms",
        doc "How often timestamp assigners emit watermarks (periodic watermark generation; 0 turns periodic emission off).";
    "pipeline.max-parallelism" => max_parallelism: MaxParallelism,
        default "-1",
        doc "Upper bound for rescaling keyed state (key groups); -1 derives it per operator.";
    "resourcemanager.start-worker.max-failure-rate" => kubernetes.max_failure_rate: FloatRange(0.0, 1_000_000.0),
        default "10",
        doc "TaskManager pods (Kubernetes) that may fail to start or crash within one minute before the JobManager gives up.";
    "resourcemanager.taskmanager-timeout" => yarn.taskmanager_timeout: POSITIVE_DURATION,
        default "30 s",
        doc "A TaskManager container (YARN) or pod (Kubernetes) whose slots have all been free this long is given back.";
    "rest.address" => rest.address: Text,
        default "localhost",
        doc "Address clients use to reach the REST API and web UI.";
    "rest.bind-address" => rest.bind_address: Text,
        default "localhost",
        doc "Local address the REST server binds to (0.0.0.0 for all interfaces).";
    "rest.port" => rest.port: PORT,
        default "8081",
        doc "Port of the REST API and web UI.";
    "rest.server.header-read-timeout" => rest.header_read_timeout: POSITIVE_DURATION,
        default "10 s",
        doc "How long a REST client may take to send a request line and headers, counted from the connection's start or its previous answer (also how long an idle keep-alive connection stays open).";
    "rest.server.idle-timeout" => rest.idle_timeout: POSITIVE_DURATION,
        default "1 min",
        doc "A REST connection on which no byte moves in either direction for this long is closed (a stalled request body, a client that stopped reading).";
    "rest.server.max-connections" => rest.max_connections: AT_LEAST_ONE,
        default "1024",
        doc "Most connections the REST port holds at once; more are answered 503 and closed.";
    "rest.server.max-content-length" => rest.max_content_length: Mem { min: 1024, power_of_two: false },
        default "100mb",
        doc "Largest request body the REST server accepts (a job artifact upload included); larger ones are answered 413.";
    "restart-strategy.exponential-delay.attempts-before-reset-backoff" => restart.exponential_attempts_before_reset: AT_LEAST_ONE,
        default "2147483647",
        doc "Restarts exponential-delay allows before the backoff resets (never, by default).";
    "restart-strategy.exponential-delay.backoff-multiplier" => restart.exponential_multiplier: FloatRange(1.0, 1000.0),
        default "1.5",
        doc "Factor the backoff grows by after each failure (exponential-delay).";
    "restart-strategy.exponential-delay.initial-backoff" => restart.exponential_initial_backoff: ANY_DURATION,
        default "1 s",
        doc "Backoff before the first restart (exponential-delay).";
    "restart-strategy.exponential-delay.jitter-factor" => restart.exponential_jitter: FloatRange(0.0, 1.0),
        default "0.1",
        doc "Random share (+/-) applied to each backoff so restarts do not synchronize (exponential-delay).";
    "restart-strategy.exponential-delay.max-backoff" => restart.exponential_max_backoff: ANY_DURATION,
        default "1 min",
        doc "Upper bound of the backoff (exponential-delay).";
    "restart-strategy.exponential-delay.reset-backoff-threshold" => restart.exponential_reset_threshold: POSITIVE_DURATION,
        default "1 h",
        doc "A job running this long without failure starts again at the initial backoff (exponential-delay).";
    "restart-strategy.failure-rate.delay" => restart.failure_rate_delay: ANY_DURATION,
        default "1 s",
        doc "Delay between a failure and the restart (failure-rate).";
    "restart-strategy.failure-rate.failure-rate-interval" => restart.failure_rate_interval: POSITIVE_DURATION,
        default "1 min",
        doc "Window in which failures are counted (failure-rate).";
    "restart-strategy.failure-rate.max-failures-per-interval" => restart.failure_rate_max_failures: AT_LEAST_ONE,
        default "1",
        doc "Failures within the interval after which the job fails for good (failure-rate).";
    "restart-strategy.fixed-delay.attempts" => restart.fixed_delay_attempts: AT_LEAST_ONE,
        default "1",
        doc "Restarts before the job fails for good (fixed-delay).";
    "restart-strategy.fixed-delay.delay" => restart.fixed_delay_delay: ANY_DURATION,
        default "1 s",
        doc "Delay between a failure and the restart (fixed-delay).";
    "restart-strategy.type" => restart.kind: OptChoice::<RestartStrategyKind>(PhantomData),
        default "",
        doc "none, fixed-delay, failure-rate or exponential-delay; unset: none without checkpointing, as in Flink.";
    "scheduler-mode" => adaptive.mode: OptChoice::<SchedulerMode>(PhantomData),
        default "",
        doc "reactive: the adaptive scheduler runs every job on every slot it can get (each vertex up to its maximum parallelism) and waits for slots without a timeout; unset: as jobmanager.scheduler says.";
    "security.cluster.secret" => security.cluster_secret: OptionalText,
        default "",
        doc "Shared secret that authenticates every process of the cluster to the others.",
        sensitive;
    "security.cluster.secret-file" => security.cluster_secret_file: OptionalPath,
        default "",
        doc "File holding the cluster secret, used when security.cluster.secret is not set.";
    "security.handshake.max-concurrent" => security.handshake_max_concurrent: AT_LEAST_ONE,
        default "64",
        doc "Connections per port (the JobManager's RPC port, each TaskManager's data port) that may be in their TLS handshake and proof of the cluster secret at once; later ones wait their turn.";
    "security.handshake.timeout" => security.handshake_timeout: POSITIVE_DURATION,
        default "10 s",
        doc "How long a peer may take for the TLS handshake and the proof of the cluster secret before its connection is closed.";
    "security.io.allowed-dirs" => security.io_allowed_dirs: DirList,
        default "",
        doc "Comma-separated directories inside which REST clients may name savepoint targets, restore paths and job inputs and outputs; empty: any absolute path (set it on a shared network).";
    "security.ssl.rest.authentication-enabled" => security.rest_ssl.authentication: Bool,
        default "false",
        doc "Mutual TLS on the REST API: the server accepts only clients with a certificate signed by a CA of security.ssl.rest.truststore, and the CLI presents security.ssl.rest.cert and security.ssl.rest.key as its own.";
    "security.ssl.rest.cert" => security.rest_ssl.cert: OptionalPath,
        default "",
        doc "PEM file with the certificate chain (own certificate first) the REST server presents; on a client with authentication enabled, the client's own.";
    "security.ssl.rest.enabled" => security.rest_ssl.enabled: Bool,
        default "false",
        doc "Whether the REST API and web UI are served over HTTPS, and REST clients (the CLI) connect with https.";
    "security.ssl.rest.key" => security.rest_ssl.key: OptionalPath,
        default "",
        doc "PEM file with the private key (PKCS#8, PKCS#1 or SEC1, unencrypted) of security.ssl.rest.cert.";
    "security.ssl.rest.truststore" => security.rest_ssl.truststore: OptionalPath,
        default "",
        doc "PEM file with the CA certificates trusted: a client checks the server's certificate against them, the server (with authentication) the clients'; unset on a client: the public web CAs.";
    "security.ssl.verify-hostname" => security.rest_ssl.verify_hostname: Bool,
        default "true",
        doc "Whether a REST client checks that the server's certificate names the host it connects to.";
    "slot.request.timeout" => slot_request_timeout: POSITIVE_DURATION,
        default "5 min",
        doc "How long a job waits for a slot before its request fails.";
    "state.backend.rocksdb.localdir" => state.rocksdb_localdir: OptionalPath,
        default "",
        doc "Local directory of the TaskManagers' RocksDB instances; unset: the system's temporary directory.";
    "state.backend.rocksdb.memory.fixed-per-slot" => state.rocksdb_fixed_per_slot: OptMem,
        default "",
        doc "Memory shared by the RocksDB instances of one slot, instead of managed memory; unset: managed memory decides.";
    "state.backend.rocksdb.memory.managed" => state.rocksdb_memory_managed: Bool,
        default "true",
        doc "Whether the RocksDB instances of a slot share the slot's managed memory (block cache, memtables, write-back cache).";
    "state.backend.rocksdb.memory.write-buffer-ratio" => state.rocksdb_write_buffer_ratio: Fraction,
        default "0.5",
        doc "Share of a slot's RocksDB memory for writes (memtables and the write-back cache); the rest is the block cache.";
    "state.backend.type" => state.backend: Choice::<StateBackendKind>(PhantomData),
        default "hashmap",
        doc "Keyed state backend: hashmap (in memory) or rocksdb (on local disk).";
    "state.storage.fs.memory-threshold" => state.memory_threshold: MemAtMost(1 << 20),
        default "20kb",
        doc "Operator state of one operator in one subtask up to this size travels inline in the checkpoint's metadata; larger state is written to a file in the checkpoint's directory (at most 1mb).";
    "taskmanager.bind-host" => taskmanager.bind_host: Text,
        default "localhost",
        doc "Local address the TaskManager's endpoints bind to (0.0.0.0 for all interfaces).";
    "taskmanager.data.port" => taskmanager.data_port: PORT,
        default "0",
        doc "Port of the TaskManager's data exchange endpoint (0 picks a free port).";
    "taskmanager.host" => taskmanager.host: Text,
        default "localhost",
        doc "Address the JobManager and other TaskManagers use to reach this TaskManager.";
    "taskmanager.memory.managed.fraction" => network.managed_fraction: FloatRange(0.0, 0.99),
        default "0.4",
        doc "Share of the process memory managed for state backends (RocksDB) and batch aggregations (a slot's share is what a BATCH keyed aggregation holds before it spills to disk), when no size is set.";
    "taskmanager.memory.managed.size" => network.managed_size: OptMem,
        default "",
        doc "Managed memory of a TaskManager as a size; unset: the fraction of the process size.";
    "taskmanager.memory.network.fraction" => network.network_fraction: Fraction,
        default "0.1",
        doc "Share of the process memory used for network buffers, before min/max clamping.";
    "taskmanager.memory.network.max" => network.network_max: ANY_SIZE,
        default "1gb",
        doc "Upper bound of the network buffer memory.";
    "taskmanager.memory.network.min" => network.network_min: ANY_SIZE,
        default "64mb",
        doc "Lower bound of the network buffer memory.";
    "taskmanager.memory.process.size" => network.process_size: Mem { min: 1, power_of_two: false },
        default "1728mb",
        doc "Total memory of a TaskManager process: the container size on YARN and Kubernetes; a job worker that takes the TaskManager and its workers past it is stopped.";
    "taskmanager.memory.segment-size" => network.segment_size: Mem { min: 4096, power_of_two: true },
        default "32kb",
        doc "Size of one network buffer (memory segment). Larger segments mean fewer buffers per record to hand between threads (64kb: 1.2x the shuffle benchmark's throughput, bench/README.md) but half as many buffers from the same network memory.";
    "taskmanager.network.blocking-shuffle.compression.enabled" => network.blocking_compression: Bool,
        default "true",
        doc "Whether the blocking partitions of batch jobs are LZ4-compressed on disk.";
    "taskmanager.network.memory.buffers-per-channel" => network.buffers_per_channel: ANY_COUNT,
        default "2",
        doc "Exclusive buffers per input channel, the credit a receiver grants up front.";
    "taskmanager.network.memory.floating-buffers-per-gate" => network.floating_buffers_per_gate: ANY_COUNT,
        default "8",
        doc "Buffers per input gate shared among its remote channels; also a result partition's pool beyond its buffers-per-channel per subpartition.";
    "taskmanager.network.memory.max-buffers-per-channel" => network.max_buffers_per_channel: AT_LEAST_ONE,
        default "10",
        doc "Most buffers one subpartition may queue, so that one slow consumer cannot take its partition's whole pool.";
    "taskmanager.network.quic.max-mtu" => network.quic_max_mtu: Mtu,
        default "auto",
        doc "Largest UDP payload QUIC data connections grow to by MTU discovery. auto: per peer, the MTU the kernel reports for the route to it (64 KiB over loopback between TaskManagers of one host, 9000 on jumbo frames, 1452 on Ethernet); a number from 1200 to 65000 bounds every connection.";
    "taskmanager.network.quic.num-threads" => network.quic_num_threads: Int::<i32>::range(-1, 1024),
        default "-1",
        doc "Threads of the data plane's own runtime (QUIC I/O and encryption, serving and reading channels); -1 or 0 means one per task slot, like Flink's netty threads.";
    "taskmanager.network.sort-shuffle.min-buffers" => network.sort_shuffle_buffers: AT_LEAST_ONE,
        default "512",
        doc "A blocking partition keeps this many segments' worth of (compressed) output in memory, sorted by consumer, before it writes them to its file as one region.";
    "taskmanager.numberOfTaskSlots" => taskmanager.number_of_task_slots: Int::<u32>::range(1, MAX_TASK_SLOTS as i64),
        default "1",
        doc "Number of slots a TaskManager offers, each running one parallel pipeline.";
    "taskmanager.registration.timeout" => taskmanager.registration_timeout: POSITIVE_DURATION,
        default "5 min",
        doc "How long a TaskManager may stay unregistered, at start or after it lost its JobManager, before it exits (so that no orphan outlives its cluster).";
    "taskmanager.resource-id" => taskmanager.resource_id: OptionalText,
        default "",
        doc "Stable identity of the TaskManager; a random one is generated when unset.";
    "taskmanager.threads.scheduling-policy" => taskmanager.scheduling_policy: Choice::<SchedulingPolicy>(PhantomData),
        default "batch",
        doc "How Linux schedules task and data-plane threads: batch (SCHED_BATCH: a woken thread does not preempt a running one; fewer context switches when threads outnumber cores) or normal.";
    "web.cancel.enable" => rest.cancel_enabled: Bool,
        default "true",
        doc "Whether REST clients may cancel jobs and stop them or take savepoints (false: the JobManager only reports).";
    "web.submit.enable" => rest.submit_enabled: Bool,
        default "true",
        doc "Whether REST clients may submit jobs (false: jobs come only from the operator, e.g. a YARN application).";
    "web.submit.max-args-size" => rest.max_args_size: Mem { min: 0, power_of_two: false },
        default "64kb",
        doc "Most bytes a submitted job's program arguments may take together; the JobManager keeps them for as long as it keeps the job.";
    "web.upload.dir" => rest.upload_dir: OptionalPath,
        default "",
        doc "Where the JobManager keeps uploaded job artifacts (empty: with ZooKeeper HA <storageDir>/<cluster-id>/jars, else a directory of its own in the system's temporary directory).";
    "yarn.application-attempts" => yarn.application_attempts: AT_LEAST_ONE,
        default "1",
        doc "How many ApplicationMaster attempts YARN makes for a sluice application.";
    "yarn.application.name" => yarn.application_name: Text,
        default "sluice session",
        doc "Name of the sluice application in YARN.";
    "yarn.application.queue" => yarn.queue: Text,
        default "default",
        doc "YARN queue sluice applications are submitted to.";
    "yarn.containers.vcores" => yarn.vcores: AT_LEAST_ONE,
        default "1",
        doc "Virtual cores of each TaskManager container.";
    "yarn.maximum-failed-containers" => yarn.maximum_failed_containers: ANY_COUNT,
        default "10",
        doc "TaskManager containers that may end unasked (crash, fail to start) before the application fails.";
    "yarn.provided.lib.dirs" => yarn.provided_lib_dirs: StoragePathList,
        default "",
        doc "Semicolon-separated directories (hdfs:// or local) one of which may already hold the sluice binary; it is then shipped to the containers from there instead of uploaded for each application.";
    "yarn.resourcemanager.scheduler.address" => yarn.scheduler_address: OptionalText,
        default "",
        doc "YARN scheduler address (host:port) the ApplicationMaster registers with; unset: from $HADOOP_CONF_DIR/yarn-site.xml, else the web address's host with port 8030.";
    "yarn.resourcemanager.webapp.address" => yarn.webapp_address: OptionalText,
        default "",
        doc "YARN ResourceManager web address (host:port) for submitting and killing; unset: from $HADOOP_CONF_DIR/yarn-site.xml.";
    "yarn.staging-directory" => yarn.staging_directory: OptionalStoragePath,
        default "",
        doc "Where the client uploads the binary and configuration every container of an application gets, in .sluice/<application id>/ (deleted when the application ends); unset: the user's HDFS home /user/<user> when fs.defaultFS is HDFS, else $TMPDIR/sluice-yarn-<user>.";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_sorted_and_unique() {
        for pair in OPTIONS.windows(2) {
            assert!(
                pair[0].key < pair[1].key,
                "{} before {}",
                pair[0].key,
                pair[1].key
            );
        }
    }

    #[test]
    fn every_default_parses_and_renders_canonically() {
        let config = Config::default();
        for def in OPTIONS {
            let mut fresh = Config::default();
            def.apply(&mut fresh, def.default, "test").expect(def.key);
            assert_eq!(def.render(&config), def.default, "{}", def.key);
        }
    }

    #[test]
    fn every_option_has_a_one_line_doc() {
        for def in OPTIONS {
            assert!(
                !def.doc.is_empty() && !def.doc.contains('\n'),
                "{}",
                def.key
            );
            assert!(def.doc.ends_with('.'), "{}", def.key);
        }
    }

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("", ""), 0);
        assert_eq!(edit_distance("abc", ""), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("rest.prot", "rest.port"), 2);
    }

    #[test]
    fn suggestions_catch_typos_but_not_unrelated_keys() {
        assert_eq!(
            suggest("taskmanager.numberOfTaskSlot"),
            Some("taskmanager.numberOfTaskSlots")
        );
        assert_eq!(
            suggest("taskmanager.numberoftaskslots"),
            Some("taskmanager.numberOfTaskSlots")
        );
        assert_eq!(suggest("rest.prot"), Some("rest.port"));
        assert_eq!(suggest("metrics.reporters"), None);
        assert_eq!(suggest("foo"), None);
    }

    #[test]
    fn integers_are_range_checked() {
        assert_eq!(AT_LEAST_ONE.parse("3"), Ok(3));
        assert!(matches!(
            AT_LEAST_ONE.parse("0"),
            Err(Rejection::OutOfRange(_))
        ));
        assert!(matches!(
            AT_LEAST_ONE.parse("-4"),
            Err(Rejection::OutOfRange(_))
        ));
        assert_eq!(
            AT_LEAST_ONE.parse("two"),
            Err(Rejection::Invalid("expected a positive integer".into()))
        );
        assert!(matches!(
            AT_LEAST_ONE.parse("1.5"),
            Err(Rejection::Invalid(_))
        ));
        assert_eq!(PORT.parse("65535"), Ok(65535));
        assert!(matches!(PORT.parse("65536"), Err(Rejection::OutOfRange(_))));
    }

    #[test]
    fn max_parallelism_accepts_minus_one_and_flinks_range() {
        assert_eq!(MaxParallelism.parse("-1"), Ok(None));
        assert_eq!(MaxParallelism.parse("128"), Ok(Some(128)));
        assert_eq!(MaxParallelism.parse("32768"), Ok(Some(32768)));
        for bad in ["0", "-2", "32769"] {
            assert!(
                matches!(MaxParallelism.parse(bad), Err(Rejection::OutOfRange(_))),
                "{bad}"
            );
        }
        assert_eq!(MaxParallelism.render(&None), "-1");
    }

    #[test]
    fn fractions_must_be_strictly_between_zero_and_one() {
        assert_eq!(Fraction.parse("0.25"), Ok(0.25));
        for bad in ["0", "1", "1.5", "-0.1", "NaN", "inf"] {
            assert!(
                matches!(Fraction.parse(bad), Err(Rejection::OutOfRange(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            Fraction.parse("tenth"),
            Err(Rejection::Invalid(_))
        ));
    }

    #[test]
    fn segment_size_must_be_a_power_of_two_of_at_least_4kb() {
        let segment = Mem {
            min: 4096,
            power_of_two: true,
        };
        assert_eq!(segment.parse("64kb"), Ok(64 << 10));
        for bad in ["2kb", "48kb", "0"] {
            assert!(
                matches!(segment.parse(bad), Err(Rejection::OutOfRange(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn enums_parse_case_insensitively_and_list_choices() {
        let codec = Choice::<SchedulerKind>(PhantomData);
        assert_eq!(codec.parse("Adaptive"), Ok(SchedulerKind::Adaptive));
        assert_eq!(codec.render(&SchedulerKind::Adaptive), "adaptive");
        assert_eq!(
            codec.parse("reactive"),
            Err(Rejection::Invalid(
                r#"expected one of "default", "adaptive""#.into()
            ))
        );
    }

    #[test]
    fn the_datagram_bound_is_auto_or_a_size_in_range() {
        use super::super::MtuLimit;
        assert_eq!(Mtu.parse(" AUTO "), Ok(MtuLimit::Auto));
        assert_eq!(Mtu.parse("9000"), Ok(MtuLimit::Max(9000)));
        assert_eq!(Mtu.render(&MtuLimit::Auto), "auto");
        assert_eq!(Mtu.render(&MtuLimit::Max(1452)), "1452");
        assert_eq!(
            Mtu.parse("1000"),
            Err(Rejection::OutOfRange(
                "must be between 1200 and 65000".into()
            ))
        );
        assert_eq!(
            Mtu.parse("jumbo"),
            Err(Rejection::Invalid(
                "expected auto or a size in bytes such as 9000".into()
            ))
        );
    }
}
