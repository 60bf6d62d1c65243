//! [`StrList`]: a `list[str]` held as one string buffer and the end offset of each element (the reply's
//! `ok_reqs` / `err_reqs`, in the typed messages and in [`Value::StrList`](super::Value::StrList)). A FINISH
//! reply is little else than request ids: holding each id in its own `String` made decoding one heap
//! allocation (and one free) per id, which cost more than msgspec's whole decode. Here a list is two
//! allocations whatever its length, its elements are `&str` slices of the buffer, and decoding checks UTF-8
//! once over the whole buffer.

use std::fmt;
use std::ops::Index;

use crate::msgpack::Writer;

/// A list of strings in one buffer: `text` is the elements concatenated, `ends[i]` the end of element `i`.
/// Elements are `&str` ([`StrList::iter`], [`StrList::get`], `list[i]`); build one from any iterator or `Vec` of
/// strings (`collect()`, `From`). Equality and hashing are element-wise (two lists are equal when their
/// elements are).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct StrList {
    text: String,
    ends: Vec<u32>,
}

impl StrList {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Builds a list from a buffer and element ends the decoder has checked (`ends` ascending, each a char
    /// boundary of `text`, the last one `text.len()`).
    pub(crate) fn from_parts(text: String, ends: Vec<u32>) -> Self {
        debug_assert!(ends.last().map_or(text.is_empty(), |&e| e as usize == text.len()));
        StrList { text, ends }
    }

    /// Builds a list from the raw bytes of its elements, concatenated, and their ends (ascending, the last one
    /// `text.len()`), as a decoder gathers them: `None` unless the buffer is UTF-8 and every end is a char
    /// boundary (so each element is UTF-8 on its own: one check for the whole list).
    #[inline]
    pub(crate) fn from_utf8_parts(text: Vec<u8>, ends: Vec<u32>) -> Option<Self> {
        let s = String::from_utf8(text).ok()?;
        if ends.iter().all(|&e| s.is_char_boundary(e as usize)) {
            Some(Self::from_parts(s, ends))
        } else {
            None
        }
    }

    /// Writes the list as a MessagePack array of str.
    pub(crate) fn write(&self, w: &mut Writer) {
        w.array_len(self.len());
        // Byte slices of the buffer at element ends: no char-boundary check per element (the list holds UTF-8
        // elements by construction).
        let text = self.text.as_bytes();
        let mut start = 0;
        for &end in &self.ends {
            w.str_bytes(&text[start..end as usize]);
            start = end as usize;
        }
    }

    /// Appends an element.
    ///
    /// # Panics
    /// If the buffer would exceed 4 GiB (a frame is at most 64 MiB).
    pub(crate) fn push(&mut self, s: &str) {
        self.text.push_str(s);
        self.ends.push(u32::try_from(self.text.len()).expect("a StrList holds at most 4 GiB"));
    }

    /// The number of strings.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether it holds no string.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    fn start(&self, i: usize) -> usize {
        if i == 0 {
            0
        } else {
            self.ends[i - 1] as usize
        }
    }

    /// The `i`-th string, if there is one.
    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)? as usize;
        Some(&self.text[self.start(i)..end])
    }

    #[cfg(test)]
    pub(crate) fn first(&self) -> Option<&str> {
        self.get(0)
    }

    #[cfg(test)]
    pub(crate) fn last(&self) -> Option<&str> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    /// The strings, in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter { list: self, front: 0, back: self.ends.len() }
    }

    #[cfg(test)]
    pub(crate) fn contains(&self, s: &str) -> bool {
        self.iter().any(|x| x == s)
    }

    /// The elements as owned strings.
    pub fn to_vec(&self) -> Vec<String> {
        self.iter().map(str::to_owned).collect()
    }

    /// The elements concatenated (what the list holds, in one buffer).
    pub(crate) fn concatenated(&self) -> &str {
        &self.text
    }

    /// Element `i` replaced by `s`.
    ///
    /// # Panics
    /// If `i` is out of bounds.
    pub fn set(&mut self, i: usize, s: &str) {
        let mut v: Vec<&str> = self.iter().collect();
        v[i] = s;
        let new: StrList = v.into_iter().collect();
        *self = new;
    }
}

impl Index<usize> for StrList {
    type Output = str;
    fn index(&self, i: usize) -> &str {
        match self.get(i) {
            Some(s) => s,
            None => panic!("index {i} out of bounds of a StrList of {} elements", self.len()),
        }
    }
}

/// The elements of a [`StrList`], as `&str`.
#[derive(Clone)]
pub struct Iter<'a> {
    list: &'a StrList,
    front: usize,
    back: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a str;
    #[inline]
    fn next(&mut self) -> Option<&'a str> {
        if self.front == self.back {
            return None;
        }
        let end = self.list.ends[self.front] as usize;
        let s = &self.list.text[self.list.start(self.front)..end];
        self.front += 1;
        Some(s)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front == self.back {
            return None;
        }
        self.back -= 1;
        self.list.get(self.back)
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a StrList {
    type Item = &'a str;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl IntoIterator for StrList {
    type Item = String;
    type IntoIter = std::vec::IntoIter<String>;
    fn into_iter(self) -> Self::IntoIter {
        self.to_vec().into_iter()
    }
}

impl<S: AsRef<str>> FromIterator<S> for StrList {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut l = StrList::new();
        l.extend(iter);
        l
    }
}

impl<S: AsRef<str>> Extend<S> for StrList {
    fn extend<I: IntoIterator<Item = S>>(&mut self, iter: I) {
        for s in iter {
            self.push(s.as_ref());
        }
    }
}

impl<S: AsRef<str>> From<Vec<S>> for StrList {
    fn from(v: Vec<S>) -> Self {
        v.into_iter().collect()
    }
}

impl<S: AsRef<str>> From<&[S]> for StrList {
    fn from(v: &[S]) -> Self {
        v.iter().collect()
    }
}

impl<S: AsRef<str>, const N: usize> From<[S; N]> for StrList {
    fn from(v: [S; N]) -> Self {
        v.into_iter().collect()
    }
}

impl From<StrList> for Vec<String> {
    fn from(l: StrList) -> Self {
        l.to_vec()
    }
}

impl<S: AsRef<str>> PartialEq<[S]> for StrList {
    fn eq(&self, other: &[S]) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a == b.as_ref())
    }
}

impl<S: AsRef<str>> PartialEq<Vec<S>> for StrList {
    fn eq(&self, other: &Vec<S>) -> bool {
        *self == other[..]
    }
}

impl fmt::Debug for StrList {
    /// As a list of strings (`["a", "b"]`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl serde::Serialize for StrList {
    /// As a sequence of strings.
    fn serialize<Z: serde::Serializer>(&self, s: Z) -> Result<Z::Ok, Z::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> serde::Deserialize<'de> for StrList {
    /// From a sequence of strings.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<String>::deserialize(d).map(StrList::from)
    }
}

#[cfg(test)]
mod tests {
    use super::StrList;

    #[test]
    fn elements_are_slices_of_one_buffer() {
        let mut l: StrList = ["a", "", "ünï"].into();
        assert_eq!(l.len(), 3);
        assert_eq!(l.iter().collect::<Vec<_>>(), ["a", "", "ünï"]);
        assert_eq!(l.iter().rev().collect::<Vec<_>>(), ["ünï", "", "a"]);
        assert_eq!((&l[0], l.get(1), l.last(), l.get(3)), ("a", Some(""), Some("ünï"), None));
        assert!(l.contains("") && !l.contains("b"));
        assert_eq!(format!("{l:?}"), r#"["a", "", "ünï"]"#);
        assert_eq!(serde_json::to_string(&l).unwrap(), r#"["a","","ünï"]"#);
        assert_eq!(serde_json::from_str::<StrList>(r#"["a","","ünï"]"#).unwrap(), l);
        l.set(1, "b");
        assert_eq!(l, vec!["a", "b", "ünï"]);
        assert_ne!(l, StrList::from(["ab", "", "ünï"]));
        assert!(StrList::new().is_empty() && StrList::new().first().is_none());
    }
}
