//! Wire datetimes: the models keep time as `now_ms`; on the wire it is a civil datetime counted from
//! [`WIRE_EPOCH`] (2026-01-01T00:00:00, UTC, no zone written), as MAAS's naive datetimes are.

/// Unix seconds of 2026-01-01T00:00:00Z, the wire's `now_ms = 0`.
pub const WIRE_EPOCH: u64 = 1_767_225_600;

const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];

struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u64,
    minute: u64,
    second: u64,
    millis: u64,
    /// Index into [`WEEKDAYS`] (0 = Thursday, the weekday of 1970-01-01).
    weekday: usize,
}

fn civil(epoch_unix_ms: u64, now_ms: u64) -> Civil {
    let unix_ms = epoch_unix_ms + now_ms;
    let seconds = unix_ms / 1000;
    let days = seconds / 86_400;
    let of_day = seconds % 86_400;
    // Howard Hinnant's days-to-civil, for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    Civil {
        year,
        month,
        day,
        hour: of_day / 3600,
        minute: of_day % 3600 / 60,
        second: of_day % 60,
        millis: unix_ms % 1000,
        weekday: (days % 7) as usize,
    }
}

/// `2026-01-01T00:00:05.123`: Django's JSON encoding of a naive datetime, cut to milliseconds (gomaasclient's
/// `MAASTime` accepts it). Used for `last_sync` / `next_sync`.
pub fn iso_datetime(now_ms: u64) -> String {
    iso_datetime_at(WIRE_EPOCH * 1000, now_ms)
}

/// [`iso_datetime`] on a time line whose `now_ms = 0` is `epoch_unix_ms` (`fleetsim serve`: the moment it started).
pub fn iso_datetime_at(epoch_unix_ms: u64, now_ms: u64) -> String {
    let c = civil(epoch_unix_ms, now_ms);
    format!("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}", c.year, c.month, c.day, c.hour, c.minute, c.second, c.millis)
}

/// `Thu, 01 Jan. 2026 00:00:05`: the events API's `created` (`"%a, %d %b. %Y %H:%M:%S"`, no zone).
pub fn maas_event_created(now_ms: u64) -> String {
    maas_event_created_at(WIRE_EPOCH * 1000, now_ms)
}

/// [`maas_event_created`] on a time line whose `now_ms = 0` is `epoch_unix_ms`.
pub fn maas_event_created_at(epoch_unix_ms: u64, now_ms: u64) -> String {
    let c = civil(epoch_unix_ms, now_ms);
    format!(
        "{}, {:02} {}. {} {:02}:{:02}:{:02}",
        WEEKDAYS[c.weekday],
        c.day,
        MONTHS[(c.month - 1) as usize],
        c.year,
        c.hour,
        c.minute,
        c.second
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_epoch_and_a_later_instant_render_as_python_does() {
        assert_eq!(iso_datetime(0), "2026-01-01T00:00:00.000");
        assert_eq!(maas_event_created(5_000), "Thu, 01 Jan. 2026 00:00:05");
        // datetime.utcfromtimestamp(1767225600 + 86400 * 400 + 3723.5) == 2027-02-05T01:02:03.500
        let later_ms = (86_400 * 400 + 3723) * 1000 + 500;
        assert_eq!(iso_datetime(later_ms), "2027-02-05T01:02:03.500");
        assert_eq!(maas_event_created(later_ms), "Fri, 05 Feb. 2027 01:02:03");
    }
}
