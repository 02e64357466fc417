//! Values that must not show in logs or debug output, and the bearer-token check of the HTTP
//! listeners that are behind one (the query API, `toolcalls receive`).

/// A value that must not show in logs or debug output (a token).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<secret>")
    }
}

/// Surrounding whitespace is not part of a token: a token read from a file (a Kubernetes
/// Secret, `$(cat token)`) often ends with a newline, which no HTTP header value can hold, so
/// kept it would refuse every request.
impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.trim().to_owned()))
    }
}

/// The fewest characters a bearer token may have: a short one is guessed.
pub const MIN_TOKEN_CHARS: usize = 16;

impl Secret {
    /// Whether `headers` carry `Authorization: Bearer <this secret>`, compared in constant time.
    /// The scheme's name is matched in any case (RFC 9110, 11.1), and one or more spaces may
    /// follow it (`1*SP`, RFC 6750, 2.1).
    pub fn is_bearer_in(&self, headers: &axum::http::HeaderMap) -> bool {
        headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("Bearer"))
            .is_some_and(|(_, given)| {
                same_secret(given.trim_start_matches(' ').as_bytes(), self.0.as_bytes())
            })
    }

    /// Refuses a token given with `flag` that a client could guess or never send: empty,
    /// shorter than `MIN_TOKEN_CHARS` (16), or holding whitespace or control characters.
    pub fn check_token(&self, flag: &str) -> Result<(), String> {
        let t = &self.0;
        if t.is_empty() {
            return Err(format!("{flag} is empty; give a long random token (`openssl rand -hex 32`), or leave it unset"));
        }
        if t.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("{flag} holds a space or a control character, which an `Authorization` header cannot carry; give a token without them (`openssl rand -hex 32`)"));
        }
        if !t.is_ascii() {
            return Err(format!("{flag} holds a character beyond ASCII, which clients do not send alike in an `Authorization` header; give an ASCII token (`openssl rand -hex 32`)"));
        }
        if t.chars().count() < MIN_TOKEN_CHARS {
            return Err(format!("{flag} is shorter than {MIN_TOKEN_CHARS} characters, short enough to guess; give a long random token (`openssl rand -hex 32`)"));
        }
        Ok(())
    }
}

/// Compares without stopping at the first difference, so the time taken does not tell how much
/// of a guess was right.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_secret_needs_every_byte() {
        assert!(same_secret(b"s3cret", b"s3cret"));
        assert!(!same_secret(b"s3cret", b"s3creT"));
        assert!(!same_secret(b"s3cret", b"s3cre"));
        assert!(!same_secret(b"", b"x"));
    }

    #[test]
    fn only_the_bearer_scheme_with_the_whole_token_passes() {
        let secret = Secret("t0ken".into());
        let with = |v: &str| {
            let mut h = axum::http::HeaderMap::new();
            h.insert(axum::http::header::AUTHORIZATION, v.parse().unwrap());
            secret.is_bearer_in(&h)
        };
        assert!(with("Bearer t0ken"));
        assert!(with("bearer t0ken") && with("BEARER t0ken"));
        assert!(!with("Bearer t0ke"));
        assert!(with("Bearer  t0ken"), "1*SP");
        assert!(!with("Bearer\tt0ken") && !with("Bearer t0ken t0ken"));
        assert!(!with("Basic t0ken"));
        assert!(!secret.is_bearer_in(&axum::http::HeaderMap::new()));
    }

    #[test]
    fn tokens_are_trimmed_and_short_or_unsendable_ones_refused() {
        let token = |s: &str| s.parse::<Secret>().unwrap();
        let good = "0123456789abcdef0123";
        assert_eq!(token(&format!("{good}\n")).0, good);
        assert!(token(good).check_token("--token").is_ok());
        for (bad, said) in [
            ("", "is empty"),
            (" \n", "is empty"),
            ("short-token", "shorter than 16"),
            ("0123456789 abcdef0123", "a space or a control"),
            ("sëcrëtsëcrëtsëcrët", "beyond ASCII"),
        ] {
            let e = token(bad).check_token("--token").unwrap_err();
            assert!(e.contains(said), "{bad:?}: {e}");
        }
    }
}
