//! A log file rotated by size: when the next write would take it past `max_size`, `sluice.log`
//! becomes `sluice.log.1` (`.1` becomes `.2`, ..., and the file past `max_count` is deleted)
//! and a fresh file is opened. Flink's log4j configuration rolls the same way; sluice's daemons
//! write their log to the file their stderr was redirected to by `scripts/daemon.sh`, so
//! without this it grows for as long as the daemon runs.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// A log file that rotates itself.
#[derive(Debug)]
pub struct RotatingFile {
    path: PathBuf,
    max_size: u64,
    max_count: u32,
    file: File,
    size: u64,
    redirect_stderr: bool,
}

impl RotatingFile {
    /// Opens (appends to) `path`. With `redirect_stderr`, each new file also becomes the
    /// process's stderr, so panics and other direct writes follow the log into it.
    pub fn open(
        path: &Path,
        max_size: u64,
        max_count: u32,
        redirect_stderr: bool,
    ) -> io::Result<RotatingFile> {
        let file = Self::append(path)?;
        let size = file.metadata()?.len();
        Ok(RotatingFile {
            path: path.to_path_buf(),
            max_size: max_size.max(1),
            max_count: max_count.max(1),
            file,
            size,
            redirect_stderr,
        })
    }

    fn append(path: &Path) -> io::Result<File> {
        OpenOptions::new().create(true).append(true).open(path)
    }

    fn numbered(&self, n: u32) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    fn rotate(&mut self) -> io::Result<()> {
        let _ = std::fs::remove_file(self.numbered(self.max_count));
        for n in (1..self.max_count).rev() {
            let from = self.numbered(n);
            if from.exists() {
                std::fs::rename(&from, self.numbered(n + 1))?;
            }
        }
        std::fs::rename(&self.path, self.numbered(1))?;
        self.file = Self::append(&self.path)?;
        self.size = 0;
        if self.redirect_stderr {
            // SAFETY: dup2 on two valid descriptors; fd 2 now names the new file too.
            unsafe { libc::dup2(self.file.as_raw_fd(), 2) };
        }
        Ok(())
    }
}

impl Write for RotatingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.size > 0 && self.size + buf.len() as u64 > self.max_size {
            // A failed rotation (a read-only directory) must not lose the log: keep writing.
            let _ = self.rotate();
        }
        let n = self.file.write(buf)?;
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_rolls_by_size_and_keeps_max_count_old_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sluice.log");
        std::fs::write(&path, b"from an earlier run\n").unwrap();
        let mut log = RotatingFile::open(&path, 100, 3, false).unwrap();
        let line = |i: usize| format!("line {i:04} {}\n", "x".repeat(20));
        for i in 0..40 {
            log.write_all(line(i).as_bytes()).unwrap();
        }
        log.flush().unwrap();
        let mut files: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(
            files,
            ["sluice.log", "sluice.log.1", "sluice.log.2", "sluice.log.3"]
        );
        for f in &files {
            let len = std::fs::metadata(dir.path().join(f)).unwrap().len();
            assert!(len <= 100, "{f} has {len} bytes");
        }
        // The newest lines are in the live file, the ones before them in .1, in order.
        let live = std::fs::read_to_string(&path).unwrap();
        assert!(live.ends_with(&line(39)), "{live}");
        let previous = std::fs::read_to_string(dir.path().join("sluice.log.1")).unwrap();
        let first_live: usize = live[5..9].parse().unwrap();
        assert!(previous.ends_with(&line(first_live - 1)), "{previous}");
    }
}
