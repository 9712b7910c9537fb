//! Kubernetes resource quantities ("500m", "2Gi", "1e3") parsed into integers.
//!
//! Scheduling arithmetic is done in integers, like kube-scheduler: CPU in
//! millicores and everything else in base units (bytes, counts), rounded up.

use std::fmt;

/// Why a quantity string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {input:?}: {reason}")]
pub struct QuantityError {
    pub input: String,
    pub reason: &'static str,
}

/// A parsed quantity, exact to 10^-9 (nano) units: `value * 10^-9`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity {
    nanos: i128,
}

impl Quantity {
    /// Parses the Kubernetes quantity grammar: a signed decimal number, optionally with
    /// an exponent (`1e3`, `1E-3`), a binary suffix (`Ki`..`Ei`) or a decimal suffix
    /// (`n`, `u`, `m`, `k`, `M`, `G`, `T`, `P`, `E`).
    pub fn parse(input: &str) -> Result<Self, QuantityError> {
        let err = |reason| QuantityError {
            input: input.to_string(),
            reason,
        };
        let s = input.trim();
        if s.is_empty() {
            return Err(err("empty string"));
        }
        let (sign, s) = match s.as_bytes()[0] {
            b'-' => (-1i128, &s[1..]),
            b'+' => (1, &s[1..]),
            _ => (1, s),
        };
        let num_end = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (number, suffix) = s.split_at(num_end);
        if number.is_empty() || number == "." {
            return Err(err("no number"));
        }
        let (int_part, frac_part) = match number.split_once('.') {
            Some((i, f)) => (i, f),
            None => (number, ""),
        };
        if frac_part.contains('.') {
            return Err(err("more than one decimal point"));
        }
        // Mantissa as an integer plus a decimal exponent.
        let digits = format!("{int_part}{frac_part}");
        let digits = digits.trim_start_matches('0');
        if digits.len() > 30 {
            return Err(err("too many digits"));
        }
        let mantissa: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| err("bad digits"))?
        };
        // i64 so that no suffix or exponent arithmetic can overflow: the
        // fraction's length is bounded by the input's, the rest by 30 each way.
        let mut exp10: i64 = -i64::try_from(frac_part.len()).map_err(|_| err("too many digits"))?;
        let mut binary_mult: i128 = 1;
        match suffix {
            "" => {}
            "n" => exp10 -= 9,
            "u" => exp10 -= 6,
            "m" => exp10 -= 3,
            "k" => exp10 += 3,
            "M" => exp10 += 6,
            "G" => exp10 += 9,
            "T" => exp10 += 12,
            "P" => exp10 += 15,
            "E" => exp10 += 18,
            "Ki" => binary_mult = 1 << 10,
            "Mi" => binary_mult = 1 << 20,
            "Gi" => binary_mult = 1 << 30,
            "Ti" => binary_mult = 1 << 40,
            "Pi" => binary_mult = 1 << 50,
            "Ei" => binary_mult = 1 << 60,
            other if other.starts_with(['e', 'E']) => {
                let e: i64 = other[1..].parse().map_err(|_| err("bad exponent"))?;
                if !(-30..=30).contains(&e) {
                    return Err(err("exponent out of range"));
                }
                exp10 += e;
            }
            _ => return Err(err("unknown suffix")),
        }
        // Scale to nano units: value * 10^(exp10 + 9).
        let shift = exp10 + 9;
        let scaled = if shift >= 0 {
            u32::try_from(shift)
                .ok()
                .filter(|s| *s <= 38)
                .and_then(|s| mantissa.checked_mul(10i128.pow(s)))
                .and_then(|v| v.checked_mul(binary_mult))
        } else {
            // Round up (towards +inf in magnitude) like resource.Quantity does
            // for requests. Dividing first and adding the remainder's carry
            // cannot overflow, unlike `(v + d - 1) / d`.
            mantissa.checked_mul(binary_mult).map(|v| {
                match u32::try_from(-shift)
                    .ok()
                    .and_then(|s| 10i128.checked_pow(s))
                {
                    Some(d) => v / d + i128::from(v % d != 0),
                    // A divisor beyond 128 bits: any non-zero value rounds up to 1n.
                    None => i128::from(v != 0),
                }
            })
        };
        let nanos = scaled.ok_or_else(|| err("value too large"))?;
        if nanos > i128::from(i64::MAX) * 1_000_000_000 {
            return Err(err("value too large"));
        }
        Ok(Quantity {
            nanos: sign * nanos,
        })
    }

    /// The value in whole base units, rounded up (bytes, counts, cores).
    pub fn value(self) -> i64 {
        ceil_div(self.nanos, 1_000_000_000)
    }

    /// The value in thousandths, rounded up (millicores), clamped to 64
    /// bits; see [`Quantity::checked_milli_value`].
    pub fn milli_value(self) -> i64 {
        ceil_div(self.nanos, 1_000_000)
    }

    /// The value in thousandths, or `None` when that does not fit 64 bits
    /// (a parsed value always fits in whole units, not always in thousandths).
    pub fn checked_milli_value(self) -> Option<i64> {
        let n =
            self.nanos.div_euclid(1_000_000) + i128::from(self.nanos.rem_euclid(1_000_000) != 0);
        i64::try_from(n).ok()
    }

    /// Whether the quantity is below zero (the API server refuses such
    /// requests; the scheduler does not trust that it did).
    pub fn is_negative(self) -> bool {
        self.nanos < 0
    }

    pub const ZERO: Quantity = Quantity { nanos: 0 };

    /// `units` whole base units.
    pub fn from_value(units: i64) -> Quantity {
        Quantity {
            nanos: i128::from(units) * 1_000_000_000,
        }
    }

    /// Whether the value is a whole number of base units.
    pub fn is_integer(self) -> bool {
        self.nanos % 1_000_000_000 == 0
    }

    /// The value as a float, approximately.
    pub fn approximate_float(self) -> f64 {
        self.nanos as f64 / 1e9
    }

    /// -1, 0 or 1.
    pub fn sign(self) -> i64 {
        self.nanos.signum() as i64
    }

    pub fn checked_add(self, other: Quantity) -> Option<Quantity> {
        self.nanos
            .checked_add(other.nanos)
            .map(|nanos| Quantity { nanos })
    }

    pub fn checked_sub(self, other: Quantity) -> Option<Quantity> {
        self.nanos
            .checked_sub(other.nanos)
            .map(|nanos| Quantity { nanos })
    }
}

fn ceil_div(n: i128, d: i128) -> i64 {
    let q = n.div_euclid(d) + i128::from(n.rem_euclid(d) != 0);
    i64::try_from(q).unwrap_or(if q < 0 { i64::MIN } else { i64::MAX })
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos % 1_000_000_000 == 0 {
            write!(f, "{}", self.nanos / 1_000_000_000)
        } else if self.nanos % 1_000_000 == 0 {
            write!(f, "{}m", self.nanos / 1_000_000)
        } else {
            write!(f, "{}n", self.nanos)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn parses_cpu_forms() {
        assert_eq!(q("500m").milli_value(), 500);
        assert_eq!(q("2").milli_value(), 2000);
        assert_eq!(q("0.5").milli_value(), 500);
        assert_eq!(q("1.5").milli_value(), 1500);
        assert_eq!(q("100u").milli_value(), 1, "sub-milli rounds up");
        assert_eq!(q("0").milli_value(), 0);
    }

    #[test]
    fn parses_memory_forms() {
        assert_eq!(q("1Ki").value(), 1024);
        assert_eq!(q("2Gi").value(), 2 * 1024 * 1024 * 1024);
        assert_eq!(q("1G").value(), 1_000_000_000);
        assert_eq!(q("1e3").value(), 1000);
        assert_eq!(q("1E6").value(), 1_000_000);
        assert_eq!(q("128974848").value(), 128_974_848);
        assert_eq!(q("129e6").value(), 129_000_000);
        assert_eq!(q("123Mi").value(), 123 * 1024 * 1024);
        assert_eq!(q("1.5Gi").value(), 1_610_612_736);
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "abc", "1x", "1..2", "--1", "1Zi", "."] {
            assert!(Quantity::parse(bad).is_err(), "{bad:?} should fail");
        }
    }

    /// Rounding a long fraction up must not overflow 128 bits (it panicked
    /// in debug builds and wrapped in release ones).
    #[test]
    fn rounding_a_long_fraction_never_overflows() {
        let long = format!("0.{}140000000000000000000Ei", "0".repeat(26));
        assert!(Quantity::parse(&long).is_ok());
        let long = format!("0.{}99999999999999999999999999999Ei", "0".repeat(16));
        let _ = Quantity::parse(&long);
    }

    #[test]
    fn negative_values() {
        assert_eq!(q("-1").value(), -1);
        assert_eq!(q("-500m").milli_value(), -500);
    }
}
