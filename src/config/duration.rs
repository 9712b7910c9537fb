//! Go-style durations (`15s`, `1m30s`, `1.5h`, `250ms`) as used by
//! `KubeSchedulerConfiguration` fields such as `leaderElection.leaseDuration`.

use std::time::Duration;

/// Parses a Go `time.Duration` string. Negative durations are rejected: no
/// scheduler setting can use one.
pub fn parse_go_duration(input: &str) -> Result<Duration, String> {
    let s = input.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if s.starts_with('-') {
        return Err(format!("duration {input:?} is negative"));
    }
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("duration {input:?} is missing a unit (e.g. \"s\", \"ms\")"))?;
        let (num, tail) = rest.split_at(num_len);
        let value: f64 = num
            .parse()
            .map_err(|_| format!("duration {input:?}: bad number {num:?}"))?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let seconds_per_unit = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(format!("duration {input:?}: unknown unit {unit:?}")),
        };
        total += value * seconds_per_unit;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).map_err(|e| format!("duration {input:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_forms() {
        assert_eq!(parse_go_duration("15s").unwrap(), Duration::from_secs(15));
        assert_eq!(parse_go_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(
            parse_go_duration("250ms").unwrap(),
            Duration::from_millis(250)
        );
        assert_eq!(
            parse_go_duration("1.5h").unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
    }

    #[test]
    fn rejects_bad_forms() {
        for bad in ["", "15", "-1s", "1x", "s", "1..5s"] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?}");
        }
    }
}
