//! The format's primitives: varints (zigzag for signed), length-prefixed bytes and strings.

use std::fmt;

/// Why a changelog value could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodecError {
    /// The field being read.
    pub field: &'static str,
    /// Byte offset in the value.
    pub at: usize,
    pub problem: &'static str,
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at byte {} (field `{}`)",
            self.problem, self.at, self.field
        )
    }
}

impl std::error::Error for CodecError {}

/// Appends fields to a value.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub fn with_capacity(n: usize) -> Self {
        Writer {
            buf: Vec::with_capacity(n),
        }
    }

    pub fn finish(self) -> Vec<u8> {
        self.buf
    }

    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub fn u64(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    pub fn i64(&mut self, v: i64) {
        self.u64(((v << 1) ^ (v >> 63)) as u64);
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    pub fn raw(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
}

/// Reads fields of a value in the order they were written.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, at: 0 }
    }

    pub fn error(&self, field: &'static str, problem: &'static str) -> CodecError {
        CodecError {
            field,
            at: self.at,
            problem,
        }
    }

    /// Fails unless every byte was read.
    pub fn end(&self) -> Result<(), CodecError> {
        if self.at == self.buf.len() {
            Ok(())
        } else {
            Err(self.error("end", "bytes after the last field"))
        }
    }

    pub fn u8(&mut self, field: &'static str) -> Result<u8, CodecError> {
        let b = *self
            .buf
            .get(self.at)
            .ok_or_else(|| self.error(field, "value ends early"))?;
        self.at += 1;
        Ok(b)
    }

    pub fn u64(&mut self, field: &'static str) -> Result<u64, CodecError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8(field)?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(self.error(field, "varint overflows 64 bits"));
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.error(field, "varint longer than 10 bytes"))
    }

    pub fn u32(&mut self, field: &'static str) -> Result<u32, CodecError> {
        u32::try_from(self.u64(field)?).map_err(|_| self.error(field, "number too large"))
    }

    pub fn i64(&mut self, field: &'static str) -> Result<i64, CodecError> {
        let v = self.u64(field)?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    pub fn bytes(&mut self, field: &'static str) -> Result<&'a [u8], CodecError> {
        let len = self.u64(field)?;
        let len = usize::try_from(len).map_err(|_| self.error(field, "length too large"))?;
        self.raw(field, len)
    }

    pub fn raw(&mut self, field: &'static str, len: usize) -> Result<&'a [u8], CodecError> {
        let end = self
            .at
            .checked_add(len)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| self.error(field, "value ends early"))?;
        let b = &self.buf[self.at..end];
        self.at = end;
        Ok(b)
    }

    pub fn str(&mut self, field: &'static str) -> Result<&'a str, CodecError> {
        let at = self.at;
        let b = self.bytes(field)?;
        std::str::from_utf8(b).map_err(|_| CodecError {
            field,
            at,
            problem: "text is not UTF-8",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip() {
        let unsigned = [
            0,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ];
        let signed = [0, -1, 1, i64::MIN, i64::MAX, 1_763_800_000_000, -63];
        let mut w = Writer::default();
        for v in unsigned {
            w.u64(v);
        }
        for v in signed {
            w.i64(v);
        }
        let buf = w.finish();
        let mut r = Reader::new(&buf);
        for v in unsigned {
            assert_eq!(r.u64("u").unwrap(), v);
        }
        for v in signed {
            assert_eq!(r.i64("i").unwrap(), v);
        }
        r.end().unwrap();
    }

    #[test]
    fn small_numbers_take_one_byte() {
        let mut w = Writer::default();
        w.u64(127);
        w.i64(-64);
        w.i64(63);
        assert_eq!(w.finish().len(), 3);
    }

    #[test]
    fn strings_round_trip() {
        let mut w = Writer::default();
        w.str("");
        w.str("toolu_01ü");
        w.bytes(&[0, 255]);
        let buf = w.finish();
        let mut r = Reader::new(&buf);
        assert_eq!(r.str("a").unwrap(), "");
        assert_eq!(r.str("b").unwrap(), "toolu_01ü");
        assert_eq!(r.bytes("c").unwrap(), &[0, 255]);
        r.end().unwrap();
    }

    #[test]
    fn malformed_values_name_the_field() {
        // Ends inside a varint.
        let e = Reader::new(&[0x80]).u64("seq").unwrap_err();
        assert_eq!((e.field, e.problem), ("seq", "value ends early"));
        // Eleven continuation bytes.
        let e = Reader::new(&[0xff; 11]).u64("seq").unwrap_err();
        assert_eq!(e.problem, "varint overflows 64 bits");
        // u64::MAX is the largest accepted.
        let mut max = vec![0xff; 9];
        max.push(0x01);
        assert_eq!(Reader::new(&max).u64("x").unwrap(), u64::MAX);
        max[9] = 0x02;
        assert!(Reader::new(&max).u64("x").is_err());
        // A length past the end.
        let e = Reader::new(&[5, b'a']).str("tool").unwrap_err();
        assert_eq!((e.field, e.at), ("tool", 1));
        // A huge length does not overflow.
        let mut huge = Writer::default();
        huge.u64(u64::MAX);
        assert!(Reader::new(&huge.finish()).bytes("args").is_err());
        // Not UTF-8.
        let e = Reader::new(&[2, 0xc3, 0x28]).str("tool").unwrap_err();
        assert_eq!(e.problem, "text is not UTF-8");
        // Trailing bytes.
        let mut r = Reader::new(&[1, 2]);
        r.u8("a").unwrap();
        assert_eq!(r.end().unwrap_err().problem, "bytes after the last field");
        // u32 range.
        let mut w = Writer::default();
        w.u64(u64::from(u32::MAX) + 1);
        assert_eq!(
            Reader::new(&w.finish()).u32("events").unwrap_err().problem,
            "number too large"
        );
    }
}
