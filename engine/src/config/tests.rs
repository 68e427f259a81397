//! Tests of loading whole configurations: file, overrides, errors and the shipped config.yaml.

use std::collections::BTreeSet;
use std::time::Duration;

use super::*;

const SHIPPED: &str = include_str!("../../../conf/config.yaml");

fn yaml(text: &str) -> Result<Config, ConfigError> {
    Config::from_yaml_str(text, "conf/config.yaml", &[])
}

fn overrides(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn shipped_config_yaml_is_exactly_the_defaults() {
    let config =
        Config::from_yaml_str(SHIPPED, "conf/config.yaml", &[]).expect("shipped config loads");
    assert_eq!(config, Config::default());
}

#[test]
fn shipped_config_yaml_lists_every_key_and_only_known_keys() {
    let in_file: BTreeSet<String> = yaml::flatten(SHIPPED, "conf/config.yaml")
        .expect("shipped config parses")
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    let in_registry: BTreeSet<String> = known_options().iter().map(|d| d.key.to_owned()).collect();
    assert_eq!(in_file, in_registry);
}

#[test]
fn shipped_config_yaml_documents_each_key_with_its_registry_doc_line() {
    let lines: Vec<&str> = SHIPPED.lines().collect();
    for def in known_options() {
        let at = lines
            .iter()
            .position(|l| l.starts_with(&format!("{}:", def.key)))
            .unwrap_or_else(|| panic!("{} is not written as a flat key", def.key));
        assert!(at > 0, "{} has no comment", def.key);
        assert_eq!(
            lines[at - 1],
            format!("# {}", def.doc),
            "comment above {}",
            def.key
        );
    }
}

#[test]
fn defaults_match_the_documented_values() {
    let c = Config::default();
    assert_eq!(c.jobmanager.rpc_address, "localhost");
    assert_eq!(c.jobmanager.rpc_port, 6123);
    assert_eq!(c.jobmanager.bind_host, "localhost");
    assert_eq!(c.rest.address, "localhost");
    assert_eq!(c.rest.port, 8081);
    assert_eq!(c.rest.bind_address, "localhost");
    assert_eq!(c.taskmanager.number_of_task_slots, 1);
    assert_eq!(c.taskmanager.host, "localhost");
    assert_eq!(c.taskmanager.bind_host, "localhost");
    assert_eq!(c.taskmanager.data_port, 0);
    assert_eq!(c.taskmanager.resource_id, None);
    assert_eq!(
        c.taskmanager.scheduling_policy,
        crate::threads::SchedulingPolicy::Batch
    );
    assert_eq!(c.network.segment_size, 32 * 1024);
    assert_eq!(c.network.process_size, 1728 * 1024 * 1024);
    assert_eq!(c.network.network_fraction, 0.1);
    assert_eq!(c.network.network_min, 64 * 1024 * 1024);
    assert_eq!(c.network.network_max, 1024 * 1024 * 1024);
    assert_eq!(c.network.buffers_per_channel, 2);
    assert_eq!(c.network.floating_buffers_per_gate, 8);
    assert_eq!(c.network.max_buffers_per_channel, 10);
    assert_eq!(c.network.buffer_timeout, Duration::from_millis(100));
    assert_eq!(c.parallelism_default, 1);
    assert_eq!(c.max_parallelism, None);
    assert_eq!(c.heartbeat.interval, Duration::from_secs(10));
    assert_eq!(c.heartbeat.timeout, Duration::from_secs(50));
    assert_eq!(c.slot_request_timeout, Duration::from_secs(300));
    assert_eq!(c.scheduler, SchedulerKind::Default);
    assert_eq!(c.jobstore.max_capacity, 1000);
    assert_eq!(c.jobstore.expiration_time, Duration::from_secs(3600));
    assert_eq!(c.security.cluster_secret, None);
    assert_eq!(c.security.cluster_secret_file, None);
    assert_eq!(c.security.handshake_timeout, Duration::from_secs(10));
    assert_eq!(c.security.handshake_max_concurrent, 64);
    assert_eq!(c.jobmanager.rpc_max_connections, 1024);
    assert_eq!(c.rest.header_read_timeout, Duration::from_secs(10));
    assert_eq!(c.rest.idle_timeout, Duration::from_secs(60));
    assert_eq!(c.rest.max_connections, 1024);
}

#[test]
fn nested_flat_and_mixed_yaml_are_equivalent() {
    let nested = yaml(
        "taskmanager:\n  numberOfTaskSlots: 4\n  memory:\n    segment-size: 64kb\n    network:\n      fraction: 0.2\nheartbeat:\n  interval: 5 s\n",
    )
    .unwrap();
    let flat = yaml(
        "taskmanager.numberOfTaskSlots: 4\ntaskmanager.memory.segment-size: 64kb\ntaskmanager.memory.network.fraction: 0.2\nheartbeat.interval: 5 s\n",
    )
    .unwrap();
    let mixed = yaml(
        "taskmanager:\n  numberOfTaskSlots: 4\n  memory.segment-size: 64kb\ntaskmanager.memory.network:\n  fraction: 0.2\nheartbeat.interval: \"5 s\"\n",
    )
    .unwrap();
    assert_eq!(nested, flat);
    assert_eq!(mixed, flat);
    assert_eq!(flat.taskmanager.number_of_task_slots, 4);
    assert_eq!(flat.network.segment_size, 64 * 1024);
    assert_eq!(flat.network.network_fraction, 0.2);
    assert_eq!(flat.heartbeat.interval, Duration::from_secs(5));
}

#[test]
fn every_value_kind_is_read_from_yaml() {
    let c = yaml(
        "jobmanager.rpc.address: jm.example.com\n\
         rest.port: 9000\n\
         taskmanager.resource-id: tm-7\n\
         taskmanager.memory.process.size: 4g\n\
         execution.buffer-timeout: 0\n\
         pipeline.max-parallelism: 128\n\
         jobmanager.scheduler: adaptive\n\
         jobstore.max-capacity: 5\n\
         slot.request.timeout: 30000\n\
         security.cluster.secret-file: /etc/sluice/secret\n",
    )
    .unwrap();
    assert_eq!(c.jobmanager.rpc_address, "jm.example.com");
    assert_eq!(c.rest.port, 9000);
    assert_eq!(c.taskmanager.resource_id.as_deref(), Some("tm-7"));
    assert_eq!(c.network.process_size, 4 << 30);
    assert_eq!(c.network.buffer_timeout, Duration::ZERO);
    assert_eq!(c.max_parallelism, Some(128));
    assert_eq!(c.scheduler, SchedulerKind::Adaptive);
    assert_eq!(c.jobstore.max_capacity, 5);
    assert_eq!(c.slot_request_timeout, Duration::from_secs(30));
    assert_eq!(
        c.security.cluster_secret_file.as_deref(),
        Some(std::path::Path::new("/etc/sluice/secret"))
    );
}

#[test]
fn overrides_win_over_the_file_and_later_overrides_win() {
    let c = Config::from_yaml_str(
        "taskmanager.numberOfTaskSlots: 2\nrest.port: 9000\n",
        "conf/config.yaml",
        &overrides(&[
            "taskmanager.numberOfTaskSlots=8",
            "rest.port=1",
            "rest.port=2",
        ]),
    )
    .unwrap();
    assert_eq!(c.taskmanager.number_of_task_slots, 8);
    assert_eq!(c.rest.port, 2);
}

#[test]
fn override_values_parse_like_yaml_scalars() {
    let c = Config::load(
        None,
        &overrides(&[
            "heartbeat.timeout=2 min",
            "taskmanager.memory.network.max=512 mb",
            "taskmanager.memory.network.fraction=0.25",
            "jobmanager.rpc.address=a=b",
            "taskmanager.resource-id=",
        ]),
    )
    .unwrap();
    assert_eq!(c.heartbeat.timeout, Duration::from_secs(120));
    assert_eq!(c.network.network_max, 512 << 20);
    assert_eq!(c.network.network_fraction, 0.25);
    // Only the first '=' separates key from value.
    assert_eq!(c.jobmanager.rpc_address, "a=b");
    assert_eq!(c.taskmanager.resource_id, None);
}

#[test]
fn unknown_keys_are_rejected_with_a_suggestion() {
    let err = yaml("taskmanager:\n  numberOfTaskSlot: 2\n").unwrap_err();
    let ConfigError::UnknownKey {
        key,
        suggestion,
        origin,
    } = &err
    else {
        panic!("expected an unknown key error, got {err}");
    };
    assert_eq!(key, "taskmanager.numberOfTaskSlot");
    assert_eq!(suggestion.as_deref(), Some("taskmanager.numberOfTaskSlots"));
    assert_eq!(origin, "conf/config.yaml");
    assert_eq!(
        err.to_string(),
        "conf/config.yaml: unknown configuration key \"taskmanager.numberOfTaskSlot\"; \
         did you mean `taskmanager.numberOfTaskSlots`?"
    );
}

#[test]
fn unrelated_unknown_keys_get_no_suggestion() {
    let err = yaml("metrics.reporters: prom\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "conf/config.yaml: unknown configuration key \"metrics.reporters\""
    );
    let err = Config::load(None, &overrides(&["rest.prot=1"])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "-D: unknown configuration key \"rest.prot\"; did you mean `rest.port`?"
    );
}

#[test]
fn bad_values_name_key_value_and_file() {
    let err = yaml("taskmanager.numberOfTaskSlots: abc\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "conf/config.yaml: invalid value \"abc\" for key \"taskmanager.numberOfTaskSlots\": \
         expected a positive integer"
    );
    let err = yaml("heartbeat.interval: 10 parsecs\n").unwrap_err();
    assert!(
        matches!(&err, ConfigError::InvalidValue { key, value, .. }
        if key == "heartbeat.interval" && value == "10 parsecs"),
        "{err}"
    );
    assert!(err.to_string().contains("\"parsecs\""), "{err}");
    let err = yaml("jobmanager.scheduler: reactive\n").unwrap_err();
    assert!(
        err.to_string()
            .contains(r#"expected one of "default", "adaptive""#),
        "{err}"
    );
    let err = yaml("taskmanager.threads.scheduling-policy: fifo\n").unwrap_err();
    assert!(
        err.to_string()
            .contains(r#"expected one of "batch", "normal""#),
        "{err}"
    );
    let c = yaml("taskmanager.threads.scheduling-policy: NORMAL\n").unwrap();
    assert_eq!(
        c.taskmanager.scheduling_policy,
        crate::threads::SchedulingPolicy::Normal
    );
    let err = yaml("rest.address:\n").unwrap_err();
    assert!(
        matches!(&err, ConfigError::InvalidValue { key, .. } if key == "rest.address"),
        "{err}"
    );
    let err =
        Config::load(None, &overrides(&["taskmanager.memory.segment-size=lots"])).unwrap_err();
    assert!(
        err.to_string().starts_with("-D: invalid value \"lots\""),
        "{err}"
    );
}

#[test]
fn out_of_range_values_name_key_and_range() {
    let err = yaml("taskmanager.numberOfTaskSlots: 0\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "conf/config.yaml: value \"0\" for key \"taskmanager.numberOfTaskSlots\" is out of range: \
         must be between 1 and 32768"
    );
    for (text, key) in [
        ("parallelism.default: 0", "parallelism.default"),
        ("rest.port: 70000", "rest.port"),
        (
            "pipeline.max-parallelism: 40000",
            "pipeline.max-parallelism",
        ),
        ("pipeline.max-parallelism: 0", "pipeline.max-parallelism"),
        (
            "taskmanager.memory.network.fraction: 1.0",
            "taskmanager.memory.network.fraction",
        ),
        (
            "taskmanager.memory.segment-size: 3kb",
            "taskmanager.memory.segment-size",
        ),
        ("heartbeat.timeout: 0 s", "heartbeat.timeout"),
    ] {
        let err = yaml(text).unwrap_err();
        assert!(
            matches!(&err, ConfigError::OutOfRange { key: k, .. } if k == key),
            "{text}: {err}"
        );
    }
}

#[test]
fn heartbeat_interval_must_be_shorter_than_timeout() {
    let err = Config::from_yaml_str(
        "heartbeat.interval: 45 s\n",
        "conf/config.yaml",
        &overrides(&["heartbeat.timeout=30 s"]),
    )
    .unwrap_err();
    assert!(
        matches!(&err, ConfigError::Conflict { key, other_key, .. }
        if key == "heartbeat.interval" && other_key == "heartbeat.timeout"),
        "{err}"
    );
    let text = err.to_string();
    assert!(text.starts_with("conf/config.yaml and -D:"), "{text}");
    assert!(text.contains("45 s") && text.contains("30 s"), "{text}");
    assert!(
        yaml("heartbeat.interval: 50 s\n").is_err(),
        "equal is not shorter"
    );
    assert!(yaml("heartbeat.interval: 49 s\n").is_ok());
}

#[test]
fn network_min_must_not_exceed_max() {
    let err = yaml("taskmanager.memory.network.min: 2gb\n").unwrap_err();
    assert!(
        matches!(&err, ConfigError::Conflict { key, .. }
        if key == "taskmanager.memory.network.min"),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("conf/config.yaml and defaults:"),
        "{err}"
    );
    assert!(yaml("taskmanager.memory.network.min: 1gb\n").is_ok());
}

#[test]
fn managed_memory_is_a_size_or_a_fraction_and_must_fit_the_process() {
    let c = Config::default();
    assert_eq!(c.network.managed_memory(), (1728u64 << 20) * 4 / 10);
    // The RocksDB instances of a slot share the slot's part of it ...
    assert_eq!(
        c.state.rocksdb_memory_per_slot(&c.network, 4),
        Some(c.network.managed_memory() / 4)
    );
    // ... unless a fixed size per slot is set, or they are not managed.
    let fixed = yaml("state.backend.rocksdb.memory.fixed-per-slot: 100mb\n").unwrap();
    assert_eq!(
        fixed.state.rocksdb_memory_per_slot(&fixed.network, 4),
        Some(100 << 20)
    );
    let unmanaged = yaml("state.backend.rocksdb.memory.managed: false\n").unwrap();
    assert_eq!(
        unmanaged
            .state
            .rocksdb_memory_per_slot(&unmanaged.network, 4),
        None
    );
    let sized = yaml("taskmanager.memory.managed.size: 1gb\n").unwrap();
    assert_eq!(
        sized.network.managed_memory(),
        1 << 30,
        "a size wins over the fraction"
    );
    // Network and managed memory must leave room in the process.
    let err = yaml("taskmanager.memory.managed.size: 2gb\n").unwrap_err();
    assert!(
        matches!(&err, ConfigError::Conflict { key, .. } if key == "taskmanager.memory.managed.fraction"),
        "{err}"
    );
    assert!(
        err.to_string().contains("taskmanager.memory.process.size"),
        "{err}"
    );
    let err = yaml("taskmanager.memory.managed.fraction: 1.5\n").unwrap_err();
    assert!(matches!(err, ConfigError::OutOfRange { .. }), "{err}");
}

#[test]
fn network_memory_is_the_fraction_clamped_like_flink() {
    let mut n = Config::default().network;
    // 0.1 × 1728mb = 172.8mb, inside [64mb, 1gb].
    assert_eq!(n.network_memory(), (1728u64 << 20) / 10);
    n.process_size = 100 << 20;
    assert_eq!(n.network_memory(), 64 << 20, "raised to the minimum");
    n.process_size = 100 << 30;
    assert_eq!(n.network_memory(), 1 << 30, "capped at the maximum");
    n.network_min = 2 << 30;
    assert_eq!(n.network_memory(), 1 << 30, "no panic when min > max");
}

#[test]
fn yaml_syntax_errors_name_the_file_and_line() {
    let err = Config::from_yaml_str(
        "rest.port: 1\nrest: [\n",
        "/opt/sluice/conf/config.yaml",
        &[],
    )
    .unwrap_err();
    assert!(
        matches!(err, ConfigError::Syntax { line: Some(_), .. }),
        "{err}"
    );
    assert!(
        err.to_string().starts_with("/opt/sluice/conf/config.yaml:"),
        "{err}"
    );
}

#[test]
fn malformed_overrides_are_rejected() {
    let err = Config::load(None, &overrides(&["parallelism.default"])).unwrap_err();
    assert!(matches!(&err, ConfigError::MalformedOverride { arg } if arg == "parallelism.default"));
    assert_eq!(
        err.to_string(),
        "malformed -D override \"parallelism.default\": expected key=value"
    );
}

#[test]
fn load_without_conf_dir_gives_defaults_plus_overrides() {
    assert_eq!(Config::load(None, &[]).unwrap(), Config::default());
    let c = Config::load(None, &overrides(&["parallelism.default=3"])).unwrap();
    assert_eq!(c.parallelism_default, 3);
}

#[test]
fn load_reads_config_yaml_from_the_conf_dir() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.yaml"), "rest.port: 9999\n").unwrap();
    let c = Config::load(Some(dir.path()), &overrides(&["parallelism.default=2"])).unwrap();
    assert_eq!(c.rest.port, 9999);
    assert_eq!(c.parallelism_default, 2);

    std::fs::write(dir.path().join("config.yaml"), "rest.port: x\n").unwrap();
    let err = Config::load(Some(dir.path()), &[]).unwrap_err();
    let path = dir.path().join("config.yaml").display().to_string();
    assert!(err.to_string().starts_with(&path), "{err}");
}

#[test]
fn a_conf_dir_without_config_yaml_is_an_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let err = Config::load(Some(dir.path()), &[]).unwrap_err();
    let ConfigError::MissingFile { path } = &err else {
        panic!("expected a missing file error, got {err}");
    };
    assert_eq!(path, &dir.path().join("config.yaml"));
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

#[test]
fn an_unreadable_config_yaml_is_an_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the file should be cannot be read as text.
    std::fs::create_dir(dir.path().join("config.yaml")).unwrap();
    let err = Config::load(Some(dir.path()), &[]).unwrap_err();
    assert!(matches!(err, ConfigError::Unreadable { .. }), "{err}");
    assert!(err.to_string().contains("config.yaml"), "{err}");
}

#[test]
fn entries_list_every_key_sorted_in_flink_rendering() {
    let entries = Config::default().entries();
    let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(keys, sorted);
    assert_eq!(keys.len(), known_options().len());
    let get = |key: &str| {
        entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("heartbeat.interval"), Some("10 s"));
    assert_eq!(get("execution.buffer-timeout"), Some("100 ms"));
    assert_eq!(get("slot.request.timeout"), Some("5 min"));
    assert_eq!(get("taskmanager.memory.segment-size"), Some("32kb"));
    assert_eq!(get("taskmanager.memory.process.size"), Some("1728mb"));
    assert_eq!(get("pipeline.max-parallelism"), Some("-1"));
    assert_eq!(get("jobmanager.scheduler"), Some("default"));
    assert_eq!(get("security.cluster.secret"), Some(""));
}

#[test]
fn secrets_are_masked_in_entries_debug_and_overrides() {
    let mut c = Config::default();
    c.set("security.cluster.secret", "hunter2").unwrap();
    assert_eq!(c.security.cluster_secret.as_deref(), Some("hunter2"));
    let entries = c.entries();
    assert!(entries.contains(&("security.cluster.secret".to_owned(), "******".to_owned())));
    assert!(!format!("{c:?}").contains("hunter2"));
    assert!(!c.to_overrides().iter().any(|o| o.contains("hunter2")));
}

#[test]
fn to_overrides_lists_only_changed_keys_and_round_trips() {
    assert!(Config::default().to_overrides().is_empty());
    let mut c = Config::default();
    c.set("taskmanager.numberOfTaskSlots", "4").unwrap();
    c.set("heartbeat.timeout", "2 min").unwrap();
    c.set("taskmanager.memory.network.fraction", "0.3").unwrap();
    c.set("pipeline.max-parallelism", "256").unwrap();
    c.set("security.cluster.secret-file", "/run/secret")
        .unwrap();
    let args = c.to_overrides();
    assert_eq!(
        args,
        [
            "heartbeat.timeout=2 min",
            "pipeline.max-parallelism=256",
            "security.cluster.secret-file=/run/secret",
            "taskmanager.memory.network.fraction=0.3",
            "taskmanager.numberOfTaskSlots=4",
        ]
    );
    assert_eq!(Config::load(None, &args).unwrap(), c);
}

#[test]
fn set_parses_like_overrides_and_leaves_config_unchanged_on_error() {
    let mut c = Config::default();
    c.set("parallelism.default", "6").unwrap();
    assert_eq!(c.parallelism_default, 6);
    let before = c.clone();
    let err = c.set("parallelism.default", "0").unwrap_err();
    assert!(matches!(err, ConfigError::OutOfRange { .. }), "{err}");
    let err = c.set("heartbeat.interval", "1 h").unwrap_err();
    assert!(matches!(err, ConfigError::Conflict { .. }), "{err}");
    let err = c.set("paralelism.default", "2").unwrap_err();
    assert!(
        err.to_string()
            .contains("did you mean `parallelism.default`?"),
        "{err}"
    );
    assert_eq!(c, before);
}

#[test]
fn validate_catches_fields_edited_by_hand() {
    let mut c = Config::default();
    assert!(c.validate().is_ok());
    c.heartbeat.interval = Duration::from_secs(100);
    assert!(matches!(c.validate(), Err(ConfigError::Conflict { .. })));
}

proptest::proptest! {
    #[test]
    fn entries_round_trip_through_overrides(
        slots in 1u32..1000,
        port in proptest::prelude::any::<u16>(),
        timeout_ms in 20_001u64..10_000_000,
        kb in 1u64..100_000,
    ) {
        let mut c = Config::default();
        c.taskmanager.number_of_task_slots = slots;
        c.rest.port = port;
        c.heartbeat.timeout = Duration::from_millis(timeout_ms);
        // Room for the 64mb minimum of network memory and 40% managed memory.
        c.network.process_size = (128 << 20) + kb * 1024;
        // Stay above the 64mb default minimum.
        c.network.network_max = (64 << 20) + kb * 2048;
        let args: Vec<String> = c.entries().into_iter().map(|(k, v)| format!("{k}={v}")).collect();
        proptest::prop_assert_eq!(Config::load(None, &args).unwrap(), c);
    }
}

#[test]
fn ha_cluster_id_takes_flinks_forms() {
    // Flink's own default is `/default` and its HA documentation uses `/cluster_one`.
    for id in [
        "default",
        "/default",
        "/cluster_one",
        "/team/cluster_one",
        "a.b_c-d",
    ] {
        let c = Config::load(
            None,
            &overrides(&[&format!("high-availability.cluster-id={id}")]),
        )
        .unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(c.ha.cluster_id, id);
    }
    for id in ["/", "..", "/../x", "a//b", "a/./b", "/with space"] {
        let err = Config::load(
            None,
            &overrides(&[&format!("high-availability.cluster-id={id}")]),
        )
        .unwrap_err();
        assert!(
            matches!(&err, ConfigError::InvalidValue { key, .. } if key == "high-availability.cluster-id"),
            "{id}: {err}"
        );
    }
}

#[test]
fn task_slots_have_an_upper_bound() {
    let max = crate::config::MAX_TASK_SLOTS;
    let c = Config::load(
        None,
        &overrides(&[&format!("taskmanager.numberOfTaskSlots={max}")]),
    )
    .unwrap();
    assert_eq!(c.taskmanager.number_of_task_slots, max);
    let err = Config::load(
        None,
        &overrides(&[&format!("taskmanager.numberOfTaskSlots={}", max + 1)]),
    )
    .unwrap_err();
    assert!(
        matches!(&err, ConfigError::OutOfRange { key, .. } if key == "taskmanager.numberOfTaskSlots"),
        "{err}"
    );
}

#[test]
fn path_keys_take_file_uris_and_refuse_other_schemes_naming_the_key() {
    let mut config = Config::default();
    config
        .set("execution.checkpointing.dir", "file:///tmp/sluice-chk")
        .unwrap();
    config
        .set(
            "execution.checkpointing.savepoint-dir",
            "file:/tmp/sluice-sp",
        )
        .unwrap();
    assert_eq!(config.checkpointing.dir.as_deref(), Some("/tmp/sluice-chk"));
    assert_eq!(
        config.checkpointing.savepoint_dir.as_deref(),
        Some("/tmp/sluice-sp")
    );
    // Durable storage may also be on HDFS; its URI is kept for the file-system layer.
    config
        .set("execution.checkpointing.dir", "hdfs://nn:8020/chk")
        .unwrap();
    assert_eq!(
        config.checkpointing.dir.as_deref(),
        Some("hdfs://nn:8020/chk")
    );
    let e = config
        .set("execution.checkpointing.savepoint-dir", "s3://bucket/sp")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("execution.checkpointing.savepoint-dir") && e.contains("scheme 's3'"),
        "{e}"
    );
    config
        .set("high-availability.storageDir", "hdfs://nn:8020/ha")
        .unwrap();
    assert_eq!(config.ha.storage_dir.as_deref(), Some("hdfs://nn:8020/ha"));
    let e = config
        .set("high-availability.storageDir", "s3://bucket/ha")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("high-availability.storageDir") && e.contains("scheme 's3'"),
        "{e}"
    );
}

/// The values an operator probed the cluster with: each is refused at start-up with a message
/// naming the key, the value and the limit.
#[test]
fn absurd_sizes_are_refused_naming_key_value_and_limit() {
    for (key, value, limit) in [
        ("taskmanager.numberOfTaskSlots", "100000000", "32768"),
        ("parallelism.default", "100000", "32768"),
        ("taskmanager.memory.process.size", "1000000tb", "16tb"),
        ("jobmanager.memory.process.size", "17tb", "16tb"),
        ("taskmanager.memory.network.max", "1000000tb", "16tb"),
        ("web.submit.max-args-size", "100tb", "16tb"),
        ("jobmanager.max-pending-jobs", "0", "1000000"),
    ] {
        let err = Config::load(None, &overrides(&[&format!("{key}={value}")])).unwrap_err();
        assert!(
            matches!(&err, ConfigError::OutOfRange { key: k, .. } if k == key),
            "{key}: {err}"
        );
        let text = err.to_string();
        assert!(
            text.contains(key) && text.contains(value) && text.contains(limit),
            "{key}={value} should name the limit {limit}: {text}"
        );
    }
    // The bounds themselves are accepted.
    let c = Config::load(
        None,
        &overrides(&[
            "parallelism.default=32768",
            "taskmanager.memory.process.size=16tb",
        ]),
    )
    .unwrap();
    assert_eq!(c.parallelism_default, crate::config::MAX_PARALLELISM);
    assert_eq!(c.network.process_size, crate::config::MAX_MEMORY_SIZE);
}

#[test]
fn rest_tls_keys_parse_and_authentication_needs_tls() {
    let ssl = Config::default().security.rest_ssl;
    assert!(!ssl.enabled && !ssl.authentication && ssl.verify_hostname);
    assert_eq!((ssl.cert, ssl.key, ssl.truststore), (None, None, None));
    assert_eq!(Config::default().security.rest_ssl.scheme(), "http");
    let c = yaml(
        "security.ssl.rest.enabled: true\nsecurity.ssl.rest.authentication-enabled: true\nsecurity.ssl.rest.cert: /etc/sluice/rest.pem\nsecurity.ssl.rest.key: file:///etc/sluice/rest.key\nsecurity.ssl.verify-hostname: false\n",
    )
    .unwrap();
    let ssl = &c.security.rest_ssl;
    assert_eq!(ssl.scheme(), "https");
    assert!(ssl.authentication && !ssl.verify_hostname);
    assert_eq!(
        ssl.key.as_deref(),
        Some(std::path::Path::new("/etc/sluice/rest.key"))
    );
    // Client authentication without TLS would leave the API open: refused, naming both keys.
    let err = yaml("security.ssl.rest.authentication-enabled: true\n")
        .unwrap_err()
        .to_string();
    for key in [
        "security.ssl.rest.authentication-enabled",
        "security.ssl.rest.enabled",
    ] {
        assert!(err.contains(key), "{key} missing from: {err}");
    }
    let err = yaml("security.ssl.rest.enabled: yes\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("security.ssl.rest.enabled"), "{err}");
}
