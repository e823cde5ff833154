//! Timestamp formatting for access logs, without a date library: UTC only.

use std::time::{SystemTime, UNIX_EPOCH};

const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/// (year, month 1-12, day, hour, minute, second, millisecond) of `t` in UTC.
fn civil(t: SystemTime) -> (i64, u32, u32, u32, u32, u32, u32) {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400) as u32;
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, rem / 3600, rem / 60 % 60, rem % 60, d.subsec_millis())
}

/// `10/Oct/2000:13:55:36 +0000`, as in the common log format.
pub fn clf_time(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s, _) = civil(t);
    format!("{d:02}/{}/{y}:{h:02}:{mi:02}:{s:02} +0000", MONTHS[(mo - 1) as usize])
}

/// `Tue, 10 Oct 2000 13:55:36 GMT`, the HTTP `Date` format (RFC 9110 §5.6.7).
pub fn http_date(t: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let weekday = DAYS[((secs / 86_400) % 7) as usize];
    let (y, mo, d, h, mi, s, _) = civil(t);
    format!("{weekday}, {d:02} {} {y} {h:02}:{mi:02}:{s:02} GMT", MONTHS[(mo - 1) as usize])
}

/// `2000-10-10`.
pub fn iso_date(t: SystemTime) -> String {
    let (y, mo, d, ..) = civil(t);
    format!("{y}-{mo:02}-{d:02}")
}

/// `2000-10-10T13:55:36.123Z`.
pub fn rfc3339_time(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s, ms) = civil(t);
    format!("{y}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_known_instants() {
        let t = UNIX_EPOCH + Duration::from_millis(971_186_136_123);
        assert_eq!(clf_time(t), "10/Oct/2000:13:55:36 +0000");
        assert_eq!(rfc3339_time(t), "2000-10-10T13:55:36.123Z");
        assert_eq!(http_date(t), "Tue, 10 Oct 2000 13:55:36 GMT");
        let leap = UNIX_EPOCH + Duration::from_secs(1_709_210_096);
        assert_eq!(rfc3339_time(leap), "2024-02-29T12:34:56.000Z");
    }
}
