//! `sluice list`'s output in Flink's words: pure formatting of the jobs the REST API reports.

use crate::rest::client::JobSummary;

const RULE: &str = "--------------------------------------------------------------";

/// `sluice list` output exactly as Flink's `flink list` prints it: running/restarting jobs,
/// then scheduled (CREATED, INITIALIZING) jobs, and with `all` also terminated jobs; each line
/// `dd.MM.yyyy HH:mm:ss : <jid> : <name> (<STATE>)`, sorted by start time. Times are shown at
/// `utc_offset_seconds` from UTC: 0 for UTC, or
/// [`local_utc_offset_seconds`](crate::timezone::local_utc_offset_seconds) for the local zone as
/// Flink (the JVM's zone) does.
pub fn format_list(jobs: &[JobSummary], all: bool, utc_offset_seconds: i64) -> String {
    let mut running = Vec::new();
    let mut scheduled = Vec::new();
    let mut terminated = Vec::new();
    for job in jobs {
        match job.state.as_str() {
            "CREATED" | "INITIALIZING" => scheduled.push(job),
            "FINISHED" | "CANCELED" | "FAILED" => terminated.push(job),
            _ => running.push(job),
        }
    }
    let mut out = String::new();
    let mut section = |jobs: &mut Vec<&JobSummary>, heading: &str, none: Option<&str>| {
        if jobs.is_empty() {
            if let Some(none) = none {
                out.push_str(none);
                out.push('\n');
            }
            return;
        }
        // Flink groups by state name, then sorts stably by start time.
        jobs.sort_by(|a, b| {
            (a.start_time, a.state.to_ascii_lowercase())
                .cmp(&(b.start_time, b.state.to_ascii_lowercase()))
        });
        out.push_str(heading);
        out.push('\n');
        for job in jobs.iter() {
            out.push_str(&format!(
                "{} : {} : {} ({})\n",
                format_time(job.start_time, utc_offset_seconds),
                job.jid,
                job.name,
                job.state
            ));
        }
        out.push_str(RULE);
        out.push('\n');
    };
    section(
        &mut running,
        "------------------ Running/Restarting Jobs -------------------",
        Some("No running jobs."),
    );
    section(
        &mut scheduled,
        "----------------------- Scheduled Jobs -----------------------",
        Some("No scheduled jobs."),
    );
    if all {
        section(
            &mut terminated,
            "---------------------- Terminated Jobs -----------------------",
            None,
        );
    }
    out
}

/// `dd.MM.yyyy HH:mm:ss` of a time in ms since the epoch, shifted by `offset` seconds.
pub fn format_time(epoch_ms: u64, offset: i64) -> String {
    let secs = (epoch_ms / 1000) as i64 + offset;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{day:02}.{month:02}.{year:04} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::ids::JobId;

    fn job(id: u128, name: &str, state: &str, start: u64) -> JobSummary {
        JobSummary {
            jid: JobId(id),
            name: name.into(),
            state: state.into(),
            start_time: start,
        }
    }

    #[test]
    fn times_format_as_flink_does() {
        assert_eq!(format_time(0, 0), "01.01.1970 00:00:00");
        // 2024-02-29T23:59:58.999Z, a leap day.
        assert_eq!(format_time(1_709_251_198_999, 0), "29.02.2024 23:59:58");
        assert_eq!(format_time(1_709_251_198_999, 3600), "01.03.2024 00:59:58");
        assert_eq!(format_time(951_782_400_000, 0), "29.02.2000 00:00:00");
    }

    #[test]
    fn empty_list_says_no_jobs() {
        assert_eq!(
            format_list(&[], false, 0),
            "No running jobs.\nNo scheduled jobs.\n"
        );
        assert_eq!(
            format_list(&[], true, 0),
            "No running jobs.\nNo scheduled jobs.\n"
        );
    }

    #[test]
    fn list_matches_flink_output() {
        let jobs = vec![
            job(2, "Stream Sum", "RUNNING", 1_700_000_060_000),
            job(1, "WordCount", "RESTARTING", 1_700_000_000_000),
            job(3, "Waiting", "CREATED", 1_700_000_120_000),
            job(4, "Old", "FINISHED", 1_600_000_000_000),
            job(5, "Gone", "CANCELED", 1_600_000_001_000),
        ];
        let expected_running = "\
------------------ Running/Restarting Jobs -------------------
14.11.2023 22:13:20 : 00000000000000000000000000000001 : WordCount (RESTARTING)
14.11.2023 22:14:20 : 00000000000000000000000000000002 : Stream Sum (RUNNING)
--------------------------------------------------------------
----------------------- Scheduled Jobs -----------------------
14.11.2023 22:15:20 : 00000000000000000000000000000003 : Waiting (CREATED)
--------------------------------------------------------------
";
        assert_eq!(format_list(&jobs, false, 0), expected_running);
        let expected_all = format!(
            "{expected_running}\
---------------------- Terminated Jobs -----------------------
13.09.2020 12:26:40 : 00000000000000000000000000000004 : Old (FINISHED)
13.09.2020 12:26:41 : 00000000000000000000000000000005 : Gone (CANCELED)
--------------------------------------------------------------
"
        );
        assert_eq!(format_list(&jobs, true, 0), expected_all);
    }
}
