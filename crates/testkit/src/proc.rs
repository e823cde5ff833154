//! What a process costs, read from `/proc` (Linux): CPU time used and resident memory, so a test can
//! bound what an attack makes the gateway spend.

use std::time::Duration;

/// Clock ticks per second of `/proc/PID/stat` times (`USER_HZ`, 100 on every Linux ABI).
const USER_HZ: u64 = 100;

/// CPU and memory of one process at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStats {
    /// User plus system CPU time used since the process started.
    pub cpu: Duration,
    /// Resident memory now, in bytes (`VmRSS`).
    pub rss: u64,
    /// The largest resident memory so far, in bytes (`VmHWM`).
    pub peak_rss: u64,
}

impl ProcStats {
    /// Reads the stats of process `pid`; `None` if it is gone or `/proc` is unreadable.
    pub fn of(pid: u32) -> Option<ProcStats> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name may hold spaces and parentheses: the fields start after the last ')'.
        let fields: Vec<&str> = stat.get(stat.rfind(')')? + 1..)?.split_whitespace().collect();
        // Fields 14 and 15 of the stat line (utime, stime); the slice starts at field 3.
        let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let kib = |key: &str| -> Option<u64> {
            let line = status.lines().find(|l| l.starts_with(key))?;
            line[key.len()..].trim().trim_end_matches("kB").trim().parse::<u64>().ok().map(|k| k * 1024)
        };
        Some(ProcStats {
            cpu: Duration::from_millis(ticks * 1000 / USER_HZ),
            rss: kib("VmRSS:")?,
            peak_rss: kib("VmHWM:")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_and_the_numbers_are_consistent() {
        let s = ProcStats::of(std::process::id()).expect("read /proc/self");
        assert!(s.rss > 0 && s.peak_rss >= s.rss, "{s:?}");
    }
}
