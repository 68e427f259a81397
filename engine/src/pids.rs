//! Processes: whether one still runs (for the clean-ups that remove what dead processes left
//! behind), and child processes run with a deadline and their ends told in words.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Whether the process `pid` runs: it exists and is not a zombie. A killed process whose parent
/// has not collected it yet (or whose parent, as some container inits, never does) keeps its
/// `/proc` entry in state `Z`; it runs no more, so what it left is anyone's to remove.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses, which may itself hold ") ".
        Ok(stat) => stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

/// A child's exit, in words: "exit status 3", "killed by signal 6 (SIGABRT)".
pub fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal} ({})", signal_name(signal)),
        _ => status.to_string(),
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        _ => "a signal",
    }
}

/// The last `lines` lines of a child's output, for error messages.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Runs `program args` with a deadline; returns its stdout, or why it failed (its stderr's
/// tail included). The child is killed at the deadline.
pub fn run_child(program: &Path, args: &[String], deadline: Duration) -> Result<Vec<u8>, String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENOEXEC) => {
                "it is not an executable for this platform (exec format error)".to_string()
            }
            _ => format!("it cannot be started: {e}"),
        })?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "it did not answer within {deadline:?} and was stopped"
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("waiting for it failed: {e}")),
        }
    };
    let out = out.join().unwrap_or_default();
    let err = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
    if status.success() {
        Ok(out)
    } else {
        let tail = tail(&err, 5);
        Err(format!(
            "it ended with {}{}",
            describe_exit(status),
            if tail.is_empty() {
                String::new()
            } else {
                format!(": {tail}")
            }
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_runs_and_a_reaped_or_zombie_child_does_not() {
        assert!(alive(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Exited but not yet collected: a zombie.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while alive(pid) && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert!(
            !alive(pid),
            "an exited, uncollected child is a zombie, not alive"
        );
        child.wait().unwrap();
        assert!(!alive(pid));
    }

    #[test]
    fn children_past_their_deadline_are_stopped() {
        let err = run_child(
            Path::new("/bin/sleep"),
            &["5".to_string()],
            Duration::from_millis(100),
        )
        .unwrap_err();
        assert!(err.contains("did not answer"), "{err}");
        let err = run_child(
            Path::new("/bin/sh"),
            &["-c".into(), "echo boom >&2; kill -ABRT $$".into()],
            Duration::from_secs(30),
        )
        .unwrap_err();
        assert!(err.contains("SIGABRT") && err.contains("boom"), "{err}");
    }
}
