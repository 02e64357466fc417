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

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_owned()))
    }
}

impl Secret {
    /// Whether `headers` carry `Authorization: Bearer <this secret>`, compared in constant time.
    pub fn is_bearer_in(&self, headers: &axum::http::HeaderMap) -> bool {
        headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|given| same_secret(given.as_bytes(), self.0.as_bytes()))
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
        assert!(!with("Bearer t0ke"));
        assert!(!with("Basic t0ken"));
        assert!(!secret.is_bearer_in(&axum::http::HeaderMap::new()));
    }
}
