//! Numbers in decimal, written without the formatting machinery: the keys of the state are
//! written per call and per checkpoint entry, where `format!` cost more than what it wrote.

/// The longest `u64` in decimal.
pub(crate) const U64_DIGITS: usize = 20;

/// `n` in decimal, written into the end of `buf`.
pub(crate) fn digits(mut n: u64, buf: &mut [u8; U64_DIGITS]) -> &str {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    std::str::from_utf8(&buf[at..]).expect("ASCII digits")
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn reads_as_displayed(n: u64) {
            let mut buf = [0; U64_DIGITS];
            proptest::prop_assert_eq!(digits(n, &mut buf), n.to_string());
        }
    }

    #[test]
    fn the_edges() {
        for n in [0, 9, 10, u64::MAX] {
            let mut buf = [0; U64_DIGITS];
            assert_eq!(digits(n, &mut buf), n.to_string());
        }
    }
}
