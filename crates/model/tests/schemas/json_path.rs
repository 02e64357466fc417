//! Paths into JSON documents, and copies of a document with the value at a path removed or
//! replaced.

use serde_json::Value;

/// Keys whose values are free-form JSON: mutations stop at them instead of descending.
pub(crate) const FREE_FORM: [&str; 6] = [
    "args",
    "result",
    "attributes",
    "hookContext",
    "input",
    "output",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

pub(crate) type JsonPath = Vec<Seg>;

pub(crate) fn show(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) if out.is_empty() => out.push_str(k),
            Seg::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Seg::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Every object member and array element of `value`, not descending into free-form values.
pub(crate) fn paths(value: &Value) -> Vec<JsonPath> {
    fn walk(value: &Value, prefix: &mut JsonPath, out: &mut Vec<JsonPath>) {
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    prefix.push(Seg::Key(key.clone()));
                    out.push(prefix.clone());
                    if !FREE_FORM.contains(&key.as_str()) {
                        walk(child, prefix, out);
                    }
                    prefix.pop();
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    prefix.push(Seg::Index(i));
                    out.push(prefix.clone());
                    walk(child, prefix, out);
                    prefix.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, &mut Vec::new(), &mut out);
    out
}

/// The closed objects of `value` (the root and every object reached without entering free-form
/// values), as paths.
pub(crate) fn object_paths(value: &Value) -> Vec<JsonPath> {
    let mut out = vec![Vec::new()];
    out.extend(paths(value).into_iter().filter(|p| {
        let free = matches!(p.last(), Some(Seg::Key(k)) if FREE_FORM.contains(&k.as_str()));
        !free && at(value, p).is_object()
    }));
    out
}

pub(crate) fn at<'a>(value: &'a Value, path: &[Seg]) -> &'a Value {
    path.iter().fold(value, |v, seg| match seg {
        Seg::Key(k) => &v[k.as_str()],
        Seg::Index(i) => &v[*i],
    })
}

pub(crate) fn at_mut<'a>(value: &'a mut Value, path: &[Seg]) -> &'a mut Value {
    path.iter().fold(value, |v, seg| match seg {
        Seg::Key(k) => v.get_mut(k.as_str()).expect("path exists"),
        Seg::Index(i) => v.get_mut(*i).expect("path exists"),
    })
}

pub(crate) fn removed(value: &Value, path: &[Seg]) -> Value {
    let mut copy = value.clone();
    let (last, parent) = path.split_last().expect("non-empty path");
    match (at_mut(&mut copy, parent), last) {
        (Value::Object(map), Seg::Key(k)) => {
            map.remove(k);
        }
        (Value::Array(items), Seg::Index(i)) => {
            items.remove(*i);
        }
        _ => panic!("bad path {}", show(path)),
    }
    copy
}

pub(crate) fn replaced(value: &Value, path: &[Seg], new: Value) -> Value {
    let mut copy = value.clone();
    *at_mut(&mut copy, path) = new;
    copy
}
