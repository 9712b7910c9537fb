//! Resource quantities as kube-apiserver decodes them, before validation:
//! any text matching the quantity grammar is accepted, a value beyond what
//! the API allows (2^63-1 in magnitude) is capped at it, and one finer than
//! a nano unit is rounded up to `1n`. The decoded pod is stored with the
//! capped text, as the real server stores its canonical form.
//!
//! The precise arithmetic is the scheduler's parser
//! (`muster_core::model::Quantity`), which refuses what does not fit its
//! exact range; this module only decides, for text the grammar allows and
//! that parser refuses, what the server would have stored instead.

use muster_core::model::Quantity;

/// The largest magnitude a quantity may hold (upstream's cap).
pub const MAX: &str = "9223372036854775807";

/// What the server stores for a quantity's text: `Ok(None)` keeps it as
/// written, `Ok(Some(text))` replaces it, `Err` is text the server cannot
/// decode at all.
pub fn decode(raw: &str) -> Result<Option<String>, ()> {
    if Quantity::parse(raw).is_ok() {
        return Ok(None);
    }
    let g = grammar(raw.trim()).ok_or(())?;
    if g.zero {
        return Ok(Some("0".into()));
    }
    let sign = if g.negative { "-" } else { "" };
    // Order of magnitude of the value in base units, and of its smallest
    // digit: a binary suffix adds at most 2^60 (< 10^19).
    let too_large = Quantity::parse(raw).is_err_and(|e| e.reason == "value too large");
    if g.order >= 19 || (g.order >= 18 && too_large) {
        return Ok(Some(format!("{sign}{MAX}")));
    }
    if g.order < -9 {
        return Ok(Some(format!("{sign}1n")));
    }
    // Within range but with more digits than the parser keeps: refused
    // (a real server rounds it up to nano precision).
    Err(())
}

/// The parts of a quantity's text that decide its magnitude.
struct Parsed {
    negative: bool,
    zero: bool,
    /// Decimal order of magnitude of the leading significant digit.
    order: i64,
}

/// The quantity grammar: `[+-]digits[.digits]suffix`, the suffix a decimal
/// or binary SI suffix or an exponent `e`/`E` with a 32-bit integer.
fn grammar(s: &str) -> Option<Parsed> {
    let (negative, s) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(end);
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if frac.contains('.') || (int.is_empty() && frac.is_empty()) {
        return None;
    }
    let (exp10, binary) = match suffix {
        "" => (0i64, 0i64),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 4),
        "Mi" => (0, 7),
        "Gi" => (0, 10),
        "Ti" => (0, 13),
        "Pi" => (0, 16),
        "Ei" => (0, 19),
        other if other.starts_with(['e', 'E']) => (i64::from(other[1..].parse::<i32>().ok()?), 0),
        _ => return None,
    };
    let int_sig = int.trim_start_matches('0');
    let order = if !int_sig.is_empty() {
        i64::try_from(int_sig.len()).ok()? - 1
    } else {
        match frac.find(|c: char| c != '0') {
            Some(zeros) => -(i64::try_from(zeros).ok()? + 1),
            None => {
                return Some(Parsed {
                    negative,
                    zero: true,
                    order: 0,
                });
            }
        }
    };
    Some(Parsed {
        negative,
        zero: false,
        order: order.checked_add(exp10)?.checked_add(binary)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_values_are_capped() {
        assert_eq!(decode("1e30"), Ok(Some(MAX.into())));
        assert_eq!(decode("-1E2147483647"), Ok(Some(format!("-{MAX}"))));
        assert_eq!(decode("99999999999999999999"), Ok(Some(MAX.into())));
        assert_eq!(decode("100000000000Ei"), Ok(Some(MAX.into())));
        assert_eq!(decode("9223372036854775807"), Ok(None));
        assert_eq!(decode("9223372036854775808"), Ok(Some(MAX.into())));
        assert_eq!(decode("8Ei"), Ok(Some(MAX.into())));
    }

    #[test]
    fn tiny_values_round_up_and_garbage_is_refused() {
        assert_eq!(decode("1e-40"), Ok(Some("1n".into())));
        assert_eq!(decode("0e99999"), Ok(Some("0".into())));
        assert_eq!(decode("500m"), Ok(None));
        assert_eq!(decode("lots"), Err(()));
        assert_eq!(decode("1e99999999999"), Err(()));
        assert_eq!(decode("1.2.3"), Err(()));
        assert_eq!(decode("1Xi"), Err(()));
    }
}
