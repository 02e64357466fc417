//! Compact JSON written straight into a buffer, byte for byte as serde_json's `to_vec` writes it,
//! for the encoders of the record and the event: the field names are constants, so only the
//! values go through JSON escaping.

use crate::time::Timestamp;
use serde::Serialize;

/// Compact JSON output, as serde_json's `to_vec` writes it.
pub(crate) struct Writer {
    out: Vec<u8>,
    /// The texts of the last two times written.
    times: TimeTexts,
}

/// The last two times written, with their texts: a record's times repeat (`startedAt` is
/// usually `createdAt`, `completedAt` usually `updatedAt`, written in the order created, updated,
/// started, completed).
#[derive(Default)]
struct TimeTexts {
    slots: [Option<(Timestamp, [u8; 24])>; 2],
    next: usize,
}

impl Writer {
    /// Writes after what `out` holds.
    pub fn new(out: Vec<u8>) -> Self {
        Writer {
            out,
            times: TimeTexts::default(),
        }
    }

    pub fn into_inner(self) -> Vec<u8> {
        self.out
    }

    /// Bytes that are already JSON.
    pub fn raw(&mut self, json: &str) {
        self.out.extend_from_slice(json.as_bytes());
    }

    /// A string that needs no escaping (an enum's name), in quotes.
    #[inline]
    pub fn quoted(&mut self, s: &str) {
        self.out.push(b'"');
        self.out.extend_from_slice(s.as_bytes());
        self.out.push(b'"');
    }

    /// A string, escaped as serde_json escapes it.
    pub fn str(&mut self, s: &str) {
        if crate::canonical::needs_escape(s.as_bytes()) {
            self.value(s);
        } else {
            self.quoted(s);
        }
    }

    /// An integer, as serde_json writes it (two digits at a time).
    pub fn int(&mut self, n: i64) {
        if n < 0 {
            self.out.push(b'-');
        }
        self.uint(n.unsigned_abs());
    }

    /// An unsigned integer, as serde_json writes it.
    pub fn uint(&mut self, n: u64) {
        const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
            2021222324252627282930313233343536373839\
            4041424344454647484950515253545556575859\
            6061626364656667686970717273747576777879\
            8081828384858687888990919293949596979899";
        let mut buf = [0u8; 20];
        let mut i = buf.len();
        let mut v = n;
        while v >= 100 {
            let pair = (v % 100) as usize * 2;
            v /= 100;
            i -= 2;
            buf[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
        }
        if v >= 10 {
            let pair = v as usize * 2;
            i -= 2;
            buf[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
        } else {
            i -= 1;
            buf[i] = b'0' + v as u8;
        }
        self.out.extend_from_slice(&buf[i..]);
    }

    /// A float, as serde_json writes it; the usual confidences without going through serde.
    pub fn float(&mut self, f: f64) {
        if f == 1.0 {
            self.raw("1.0");
        } else if f == 0.0 && f.is_sign_positive() {
            self.raw("0.0");
        } else {
            self.value(&f);
        }
    }

    pub fn bool(&mut self, b: bool) {
        self.raw(if b { "true" } else { "false" });
    }

    pub fn time(&mut self, t: Timestamp) {
        let cached = self.times.slots.iter().flatten().find(|(at, _)| *at == t);
        let text = match cached {
            Some((_, text)) => *text,
            None => {
                let mut buf = [0u8; 24];
                if t.write_rfc3339(&mut buf).is_none() {
                    self.value(&t);
                    return;
                }
                let cache = &mut self.times;
                cache.slots[cache.next] = Some((t, buf));
                cache.next = (cache.next + 1) % cache.slots.len();
                buf
            }
        };
        // Digits and separators only: nothing to escape.
        self.out.push(b'"');
        self.out.extend_from_slice(&text);
        self.out.push(b'"');
    }

    /// Anything else, through serde_json itself.
    pub fn value<T: Serialize + ?Sized>(&mut self, v: &T) {
        serde_json::to_writer(&mut self.out, v).expect("the values written always serialize");
    }

    pub fn object(&mut self) -> Object<'_> {
        self.out.push(b'{');
        Object {
            w: self,
            first: true,
        }
    }
}

/// A key of an object as it is written, separator first: `,"name":`, the comma left out before
/// an object's first key. Made by [`key!`] from a constant name that needs no escaping, so that
/// writing a key is one copy: a key written piece by piece (comma, quote, name, quote, colon)
/// was about 4 % of a record's instructions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Key(pub(crate) &'static str);

/// The [`Key`] of a constant field name.
macro_rules! key {
    ($name:literal) => {
        $crate::jsonwrite::Key(concat!(",\"", $name, "\":"))
    };
}
pub(crate) use key;

/// An object being written: [`Object::key`] adds the separator and the (constant) key.
pub(crate) struct Object<'a> {
    w: &'a mut Writer,
    first: bool,
}

impl Object<'_> {
    #[inline]
    pub fn key(&mut self, key: Key) -> &mut Writer {
        let text = &key.0.as_bytes()[usize::from(self.first)..];
        self.first = false;
        self.w.out.extend_from_slice(text);
        self.w
    }

    /// `key` and its string, when there is one.
    #[inline]
    pub fn str_if_some(&mut self, key: Key, value: Option<&str>) {
        if let Some(s) = value {
            self.key(key).str(s);
        }
    }

    /// `key` and its time, when there is one.
    #[inline]
    pub fn time_if_some(&mut self, key: Key, value: Option<Timestamp>) {
        if let Some(t) = value {
            self.key(key).time(t);
        }
    }

    /// `key` and its value written by serde_json, when there is one.
    #[inline]
    pub fn value_if_some<T: Serialize>(&mut self, key: Key, value: Option<&T>) {
        if let Some(v) = value {
            self.key(key).value(v);
        }
    }

    pub fn end(self) {
        self.w.out.push(b'}');
    }
}
