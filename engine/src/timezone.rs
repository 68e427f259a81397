//! The local time zone, read from the system's zone files, for showing times as the user's
//! clock shows them (the CLI's `list`, the web UI).

/// The local time zone's offset from UTC at `epoch_ms`, in seconds: read from the TZif file
/// named by `TZ` (a zone name under `/usr/share/zoneinfo` or an absolute path) or else
/// `/etc/localtime`. 0 (UTC) when `TZ` is empty or the zone cannot be read.
pub fn local_utc_offset_seconds(epoch_ms: u64) -> i64 {
    let path = match std::env::var("TZ") {
        Ok(tz) => {
            let name = tz.strip_prefix(':').unwrap_or(&tz);
            if name.is_empty() {
                return 0;
            }
            if name.starts_with('/') {
                std::path::PathBuf::from(name)
            } else {
                std::path::Path::new("/usr/share/zoneinfo").join(name)
            }
        }
        Err(_) => std::path::PathBuf::from("/etc/localtime"),
    };
    std::fs::read(path)
        .ok()
        .and_then(|data| tzif_offset(&data, (epoch_ms / 1000) as i64))
        .unwrap_or(0)
}

/// The UTC offset in force at `t` (seconds since the epoch) by a TZif file's transition table
/// (RFC 8536; the 64-bit table of version 2+ files when present). Times after the last
/// transition keep its offset (the footer's rule is not read: distributions ship tables
/// through 2037).
fn tzif_offset(data: &[u8], t: i64) -> Option<i64> {
    fn u32_at(d: &[u8], at: usize) -> Option<usize> {
        Some(u32::from_be_bytes(d.get(at..at + 4)?.try_into().ok()?) as usize)
    }
    // Parses the block at `start` with `size`-byte times; returns the offset and the block's end.
    fn block(d: &[u8], start: usize, size: usize, t: i64) -> Option<(i64, usize)> {
        if d.get(start..start + 4)? != b"TZif" {
            return None;
        }
        let count = |i: usize| u32_at(d, start + 20 + 4 * i);
        let (isut, isstd, leap, times, types, chars) = (
            count(0)?,
            count(1)?,
            count(2)?,
            count(3)?,
            count(4)?,
            count(5)?,
        );
        let times_at = start + 44;
        let index_at = times_at.checked_add(times.checked_mul(size)?)?;
        let types_at = index_at.checked_add(times)?;
        let end = types_at
            .checked_add(types.checked_mul(6)?)?
            .checked_add(chars)?
            .checked_add(leap.checked_mul(size + 4)?)?
            .checked_add(isstd)?
            .checked_add(isut)?;
        let transition = |i: usize| -> Option<i64> {
            let at = times_at + i * size;
            let bytes = d.get(at..at + size)?;
            Some(match size {
                8 => i64::from_be_bytes(bytes.try_into().ok()?),
                _ => i64::from(i32::from_be_bytes(bytes.try_into().ok()?)),
            })
        };
        let mut kind = 0usize;
        for i in 0..times {
            if transition(i)? > t {
                break;
            }
            kind = *d.get(index_at + i)? as usize;
        }
        let at = types_at + 6 * kind;
        let offset = i32::from_be_bytes(d.get(at..at + 4)?.try_into().ok()?);
        Some((i64::from(offset), end))
    }
    let (v1_offset, v1_end) = block(data, 0, 4, t)?;
    if *data.get(4)? >= b'2'
        && let Some((offset, _)) = block(data, v1_end, 8, t)
    {
        return Some(offset);
    }
    Some(v1_offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tzif_offsets_follow_daylight_saving() {
        // Debian's tzdata ships this zone; skip where it does not exist.
        let Ok(data) = std::fs::read("/usr/share/zoneinfo/Europe/Berlin") else {
            return;
        };
        // 15.01.2024 and 15.07.2024, 12:00 UTC.
        assert_eq!(tzif_offset(&data, 1_705_320_000), Some(3600));
        assert_eq!(tzif_offset(&data, 1_721_044_800), Some(7200));
        assert_eq!(tzif_offset(b"not a zone file", 0), None);
        assert_eq!(tzif_offset(&data[..60], 0), None, "truncated");
    }
}
