//! JSON read a level at a time: an object's fields or an array's elements as unparsed text
//! ([`RawValue`]), so that only the parts a reader looks into are parsed, and what it does not
//! read costs no tree. Fields keep their order, and a field given twice is there twice (the last
//! is the one a [`serde_json::Value`] keeps). Text a tree cannot hold (a lone surrogate escape,
//! `1e400`, deep nesting) is no error here.

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;

/// The elements of a JSON array, unread; `None` for any other value.
pub fn array(value: &RawValue) -> Option<Vec<&RawValue>> {
    serde_json::from_str(value.get()).ok()
}

/// The fields of a JSON object in order, values unread; `None` for any other value.
pub fn object(value: &RawValue) -> Option<Vec<(Key<'_>, &RawValue)>> {
    serde_json::from_str::<Fields>(value.get())
        .ok()
        .map(|f| f.0)
}

/// An object key, decoded; a lone surrogate escape is kept as its WTF-8 bytes (no `str`).
pub struct Key<'a>(Cow<'a, [u8]>);

impl Key<'_> {
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    pub fn is(&self, name: &str) -> bool {
        *self.0 == *name.as_bytes()
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Bytes;
        impl<'de> Visitor<'de> for Bytes {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_bytes<E>(self, v: &'de [u8]) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_vec())))
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v.as_bytes())))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.as_bytes().to_vec())))
            }
        }
        d.deserialize_bytes(Bytes)
    }
}

/// An object's fields in order, duplicates kept.
struct Fields<'a>(Vec<(Key<'a>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Pairs;
        impl<'de> Visitor<'de> for Pairs {
            type Value = Fields<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Fields<'de>, M::Error> {
                let mut fields = Vec::new();
                while let Some(pair) = map.next_entry::<Key, &RawValue>()? {
                    fields.push(pair);
                }
                Ok(Fields(fields))
            }
        }
        d.deserialize_map(Pairs)
    }
}

/// The value of the last field named `name`, as a [`serde_json::Value`] object gives it.
pub fn last<'a>(fields: &[(Key, &'a RawValue)], name: &str) -> Option<&'a RawValue> {
    fields
        .iter()
        .rev()
        .find(|(key, _)| key.is(name))
        .map(|(_, v)| *v)
}
