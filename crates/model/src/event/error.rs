//! Why a message is not a valid v1 event.

/// Why a message is not a valid v1 event.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    #[error("message is empty; send one JSON event object per message")]
    Empty,
    #[error("message is not valid UTF-8; events are UTF-8 JSON")]
    InvalidUtf8,
    #[error("message is not JSON: {0}")]
    NotJson(String),
    #[error(
        "message nests too deeply (`args` and `result` may nest {} levels, the rest of a message 127); flatten it",
        crate::json::MAX_DEPTH
    )]
    TooDeep,
    #[error(
        "message is larger than {limit} bytes ({size} bytes); raise the limit or trim the result"
    )]
    TooLarge { size: usize, limit: usize },
    #[error("invalid field: {0}")]
    InvalidField(String),
    #[error("unsupported version `v: {0}`; this processor reads v: 1 — upgrade the processor or downgrade the producer")]
    UnsupportedVersion(String),
    #[error("unknown kind `{0}`; expected one of announce, completion, execution_start, execution_end, turn_end, turn_aborted, approval, hook_decision")]
    UnknownKind(String),
    #[error("missing required field `{field}` on a `{kind}` event")]
    MissingField {
        kind: &'static str,
        field: &'static str,
    },
    #[error("field `{field}` does not belong on a `{kind}` event")]
    FieldNotAllowed {
        kind: &'static str,
        field: &'static str,
    },
    #[error("field `{field}` must not be empty")]
    EmptyField { field: &'static str },
    #[error("{0}")]
    Invalid(String),
}

impl DecodeError {
    /// Every [`DecodeError::reason`].
    pub const REASONS: [&'static str; 12] = [
        "empty",
        "invalid_utf8",
        "not_json",
        "too_deep",
        "too_large",
        "invalid_field",
        "unsupported_version",
        "unknown_kind",
        "missing_field",
        "field_not_allowed",
        "empty_field",
        "invalid",
    ];

    /// A short label for metrics and the dead-letter `reason` header (a bounded set).
    pub fn reason(&self) -> &'static str {
        match self {
            DecodeError::Empty => "empty",
            DecodeError::InvalidUtf8 => "invalid_utf8",
            DecodeError::NotJson(_) => "not_json",
            DecodeError::TooDeep => "too_deep",
            DecodeError::TooLarge { .. } => "too_large",
            DecodeError::InvalidField(_) => "invalid_field",
            DecodeError::UnsupportedVersion(_) => "unsupported_version",
            DecodeError::UnknownKind(_) => "unknown_kind",
            DecodeError::MissingField { .. } => "missing_field",
            DecodeError::FieldNotAllowed { .. } => "field_not_allowed",
            DecodeError::EmptyField { .. } => "empty_field",
            DecodeError::Invalid(_) => "invalid",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DecodeError;

    #[test]
    fn every_reason_is_listed() {
        let field = "f";
        let all = [
            DecodeError::Empty,
            DecodeError::InvalidUtf8,
            DecodeError::NotJson(String::new()),
            DecodeError::TooDeep,
            DecodeError::TooLarge { size: 2, limit: 1 },
            DecodeError::InvalidField(String::new()),
            DecodeError::UnsupportedVersion(String::new()),
            DecodeError::UnknownKind(String::new()),
            DecodeError::MissingField {
                field,
                kind: "announce",
            },
            DecodeError::FieldNotAllowed {
                field,
                kind: "announce",
            },
            DecodeError::EmptyField { field },
            DecodeError::Invalid(String::new()),
        ];
        let reasons: Vec<&str> = all.iter().map(DecodeError::reason).collect();
        assert_eq!(reasons, DecodeError::REASONS);
    }
}
