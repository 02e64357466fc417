//! Numbers printed as JavaScript prints them (`Number.prototype.toString`), for the canonical text
//! of the checksum (`canonical.rs`, `canonical_direct.rs`).

use serde_json::Number;

/// Appends `n` as JavaScript prints the number `JSON.parse` would make of the same literal.
///
/// JavaScript has only doubles, so the value is first taken to the nearest `f64` (exact for
/// integers up to 2^53 in magnitude, rounded beyond), then printed like
/// `Number.prototype.toString`: the shortest digits that round-trip, plain notation for
/// magnitudes in `[1e-7, 1e21)`, exponent notation with an explicit sign otherwise (`1e+21`,
/// `1.5e-7`), and `0` for negative zero.
///
/// Non-finite values cannot be held by a `serde_json::Number`; should one appear anyway it prints
/// as `null`, as `JSON.stringify(Infinity)` does.
pub fn write_js_number(n: &Number, out: &mut String) {
    /// Integers up to this magnitude are exact doubles and print as their decimal digits.
    const MAX_EXACT: u64 = 1 << 53;

    if let Some(u) = n.as_u64() {
        if u <= MAX_EXACT {
            write_u64(u, out);
        } else {
            // `as` rounds to nearest, ties to even: the same double `JSON.parse` picks.
            write_f64(u as f64, out);
        }
    } else if let Some(i) = n.as_i64() {
        // Negative here: non-negative integers were handled as u64 above.
        if i.unsigned_abs() <= MAX_EXACT {
            out.push('-');
            write_u64(i.unsigned_abs(), out);
        } else {
            write_f64(i as f64, out);
        }
    } else {
        write_f64(n.as_f64().unwrap_or(f64::NAN), out);
    }
}

/// Appends the decimal digits of `n` without going through `core::fmt`.
fn write_u64(mut n: u64, out: &mut String) {
    if n < 10 {
        // `n` is below 10, so the cast cannot truncate.
        out.push(char::from(b'0' + n as u8));
        return;
    }
    let mut buf = [0u8; 20];
    let mut pos = buf.len();
    while n > 0 {
        pos -= 1;
        // `n % 10` is below 10, so the cast cannot truncate.
        buf[pos] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    out.push_str(std::str::from_utf8(&buf[pos..]).expect("decimal digits are ASCII"));
}

/// Appends a double as `Number.prototype.toString` prints it; non-finite values as `null`.
pub(crate) fn write_f64(f: f64, out: &mut String) {
    /// 2^53: every integral double up to here prints as its plain decimal digits.
    const MAX_EXACT: f64 = 9_007_199_254_740_992.0;

    if !f.is_finite() {
        out.push_str("null");
    } else if f.fract() == 0.0 && f.abs() <= MAX_EXACT {
        // Integral values such as `1.0` or `1500.0` are common and much cheaper than ryu. `-0.0`
        // is not below zero, so it prints as `0`, as in JavaScript.
        if f < 0.0 {
            out.push('-');
        }
        // Integral and at most 2^53, so the conversion is exact.
        write_u64(f.abs() as u64, out);
    } else {
        let mut buf = ryu_js::Buffer::new();
        out.push_str(buf.format_finite(f));
    }
}
