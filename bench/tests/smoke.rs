//! A smoke run of the harness (`sluice-bench --quick`), only when `SLUICE_BENCH_SMOKE=1`: it
//! starts real clusters and takes the machine for a while, which CI need not spend. It checks
//! that the harness runs and prints its tables, never how fast anything was.

use std::process::Command;

#[test]
fn quick_run_prints_the_tables() {
    if std::env::var("SLUICE_BENCH_SMOKE").as_deref() != Ok("1") {
        println!("skipped: set SLUICE_BENCH_SMOKE=1 to run `sluice-bench --quick`");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_sluice-bench"))
        .arg("--quick")
        .output()
        .expect("run sluice-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "sluice-bench --quick failed:\n{stderr}"
    );
    for expected in [
        "| TCP loopback, 1 MiB writes |",
        "| quinn bulk, tuned |",
        "| shuffle key_by p=2",
        "| stream-sum p=2",
        "Slow sink",
        "JobManager traffic",
    ] {
        assert!(stdout.contains(expected), "no {expected:?} in:\n{stdout}");
    }
}

/// `sluice-bench flink --quick`, only when `SLUICE_BENCH_FLINK=1`: it needs Maven, a JDK 17 and
/// Flink's jars (downloaded on the first build), and a few minutes. Checks that both engines ran
/// every job and the tables were printed.
#[test]
fn flink_quick_run_prints_the_tables() {
    if std::env::var("SLUICE_BENCH_FLINK").as_deref() != Ok("1") {
        println!("skipped: set SLUICE_BENCH_FLINK=1 to run `sluice-bench flink --quick`");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_sluice-bench"))
        .args(["flink", "--quick"])
        .output()
        .expect("run sluice-bench flink");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "sluice-bench flink --quick failed:\n{stderr}"
    );
    for expected in [
        "| stream-sum, heap | sluice |",
        "| stream-sum, heap | Flink 2.3.0 |",
        "| wordcount (batch), 2 files | Flink 2.3.0 |",
        "| stream-sum, RocksDB",
        "sluice / Flink",
    ] {
        assert!(stdout.contains(expected), "no {expected:?} in:\n{stdout}");
    }
}

/// `sluice-bench latency --quick` (about a minute), only when `SLUICE_BENCH_FLINK=1`, as above:
/// both engines at both rates and buffer timeouts, every record accounted for (the harness
/// fails otherwise), and the table printed.
#[test]
fn latency_quick_run_prints_the_table() {
    if std::env::var("SLUICE_BENCH_FLINK").as_deref() != Ok("1") {
        println!("skipped: set SLUICE_BENCH_FLINK=1 to run `sluice-bench latency --quick`");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_sluice-bench"))
        .args(["latency", "--quick"])
        .output()
        .expect("run sluice-bench latency");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "sluice-bench latency --quick failed:\n{stderr}"
    );
    for expected in [
        "| sluice | 10000 | 100 ms |",
        "| Flink 2.3.0 | 10000 | 0 ms |",
        "| sluice | 1000000 | 0 ms |",
        "| Flink 2.3.0 | 1000000 | 100 ms |",
    ] {
        assert!(stdout.contains(expected), "no {expected:?} in:\n{stdout}");
    }
}

/// `sluice-bench flink-cluster --quick` (about a minute), only when `SLUICE_BENCH_FLINK=1`: a
/// sluice and a Flink standalone cluster of three processes each run the shuffle.
#[test]
fn flink_cluster_quick_run_prints_the_table() {
    if std::env::var("SLUICE_BENCH_FLINK").as_deref() != Ok("1") {
        println!("skipped: set SLUICE_BENCH_FLINK=1 to run `sluice-bench flink-cluster --quick`");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_sluice-bench"))
        .args(["flink-cluster", "--quick"])
        .output()
        .expect("run sluice-bench flink-cluster");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "sluice-bench flink-cluster --quick failed:\n{stderr}"
    );
    for expected in ["| sluice |", "| Flink 2.3.0 |", "sluice / Flink"] {
        assert!(stdout.contains(expected), "no {expected:?} in:\n{stdout}");
    }
}

/// `sluice-bench kafka --quick` (about a minute), only when `SLUICE_BENCH_KAFKA=1`: it starts a
/// Kafka broker (scripts/kafka.sh) and needs Maven and a JDK 17 for the broker's jars and tools.
/// Checks that the tools, both delivery guarantees and both latency runs produced their rows
/// (the harness fails when a latency record is missing or duplicated).
#[test]
fn kafka_quick_run_prints_the_tables() {
    if std::env::var("SLUICE_BENCH_KAFKA").as_deref() != Ok("1") {
        println!("skipped: set SLUICE_BENCH_KAFKA=1 to run `sluice-bench kafka --quick`");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_sluice-bench"))
        .args(["kafka", "--quick"])
        .output()
        .expect("run sluice-bench kafka");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "sluice-bench kafka --quick failed:\n{stderr}"
    );
    for expected in [
        "| producer-perf-test, 100 B records |",
        "| consumer-perf-test, 100 B records |",
        "| at least once |",
        "| exactly once |",
        "| 1 s |",
        "| 10 s |",
    ] {
        assert!(stdout.contains(expected), "no {expected:?} in:\n{stdout}");
    }
}
