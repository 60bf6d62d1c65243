//! A small least-recently-used map (the prefiller's peer-layout cache holds at most 1,024 entries).

use std::collections::VecDeque;

#[derive(Debug, Clone)]
pub(crate) struct Lru<K, V> {
    cap: usize,
    /// Most recently used last.
    items: VecDeque<(K, V)>,
}

impl<K: PartialEq, V> Lru<K, V> {
    pub(crate) fn new(cap: usize) -> Self {
        Lru { cap, items: VecDeque::new() }
    }
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }
    pub(crate) fn clear(&mut self) {
        self.items.clear();
    }
    /// Looks up and marks as most recently used.
    pub(crate) fn get(&mut self, k: &K) -> Option<&V> {
        let i = self.items.iter().position(|(x, _)| x == k)?;
        let item = self.items.remove(i)?;
        self.items.push_back(item);
        self.items.back().map(|(_, v)| v)
    }
    /// Inserts (or replaces) as most recently used, evicting the least recently used past capacity.
    pub(crate) fn put(&mut self, k: K, v: V) {
        if let Some(i) = self.items.iter().position(|(x, _)| *x == k) {
            self.items.remove(i);
        }
        self.items.push_back((k, v));
        while self.items.len() > self.cap {
            self.items.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn evicts_least_recently_used() {
        let mut l = Lru::new(2);
        l.put(1, "a");
        l.put(2, "b");
        assert_eq!(l.get(&1), Some(&"a"));
        l.put(3, "c");
        assert_eq!(l.get(&2), None);
        assert_eq!(l.get(&1), Some(&"a"));
        assert_eq!(l.len(), 2);
    }
}
