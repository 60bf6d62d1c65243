//! The bookkeeping of a ROUTER-to-DEALER relay, as a sans-IO table: one *leg* per decoder connection (the
//! ROUTER it arrived on and the routing id the ROUTER gave it), holding whatever the caller forwards that
//! connection's messages through (the conformance tap keeps a DEALER to the real prefiller there).
//!
//! The caller owns the sockets and the clock: it hands each message's leg to [`Legs::route`] with the time and
//! a way to open a leg, a reply's to [`Legs::touch`], and calls [`Legs::expire`] when [`Legs::poll_timeout`]
//! is due. The table keeps at most its `max_legs`: a new leg beyond that closes the least recently used one
//! (returned to the caller, which closes its socket), and a leg that carried nothing either way for `idle` is
//! closed by [`Legs::expire`]. A leg whose opening failed is not kept and closes nothing. The fuzz target
//! `tap_relay` drives it, behind the ROUTER's framing, against a model.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// A leg's key: the index of the relay's ROUTER the connection arrived on, and its routing id there.
pub type LegKey = (usize, Vec<u8>);

/// The relay's legs, each with the caller's value `T` and its last use.
pub struct Legs<T> {
    legs: HashMap<LegKey, Leg<T>>,
    /// Last use → key, oldest first: the eviction and expiry order. A use is `(time, serial)`, so that uses at
    /// the same instant keep the order they happened in.
    by_use: BTreeMap<(Instant, u64), LegKey>,
    serial: u64,
    max_legs: usize,
    idle: Duration,
}

struct Leg<T> {
    value: T,
    used: (Instant, u64),
}

/// What [`Legs::route`] did for a message.
pub struct Routed<'a, T> {
    /// The leg to forward the message through.
    pub leg: &'a mut T,
    /// Whether the leg was opened for this message.
    pub opened: bool,
    /// The least recently used leg, closed to make room for this one (the caller closes its value).
    pub evicted: Option<(LegKey, T)>,
}

impl<T> Legs<T> {
    /// An empty table that keeps at most `max_legs` legs (at least one) and closes a leg idle for `idle`.
    pub fn new(max_legs: usize, idle: Duration) -> Legs<T> {
        Legs { legs: HashMap::new(), by_use: BTreeMap::new(), serial: 0, max_legs: max_legs.max(1), idle }
    }

    /// Legs open now.
    pub fn len(&self) -> usize {
        self.legs.len()
    }

    /// Whether no leg is open.
    pub fn is_empty(&self) -> bool {
        self.legs.is_empty()
    }

    /// The legs, in no particular order (the caller polls their sockets).
    pub fn iter(&self) -> impl Iterator<Item = (&LegKey, &T)> {
        self.legs.iter().map(|(k, l)| (k, &l.value))
    }

    fn stamp(&mut self, now: Instant) -> (Instant, u64) {
        self.serial += 1;
        (now, self.serial)
    }

    /// The leg of a decoder's message on `key`, marked used at `now`. A new key is opened with `open`; when
    /// the table is full the least recently used leg is closed to make room (only once `open` succeeded: a
    /// failed open closes nothing, keeps nothing, and its error is returned).
    pub fn route<E>(
        &mut self,
        now: Instant,
        key: &LegKey,
        open: impl FnOnce() -> Result<T, E>,
    ) -> Result<Routed<'_, T>, E> {
        let used = self.stamp(now);
        let (opened, evicted) = match self.legs.get_mut(key) {
            Some(leg) => {
                self.by_use.remove(&leg.used);
                leg.used = used;
                (false, None)
            }
            None => {
                let value = open()?;
                let evicted = if self.legs.len() >= self.max_legs { self.pop_oldest() } else { None };
                self.legs.insert(key.clone(), Leg { value, used });
                (true, evicted)
            }
        };
        self.by_use.insert(used, key.clone());
        let leg = &mut self.legs.get_mut(key).expect("kept above").value;
        Ok(Routed { leg, opened, evicted })
    }

    /// The leg a reply came back on, marked used at `now`; none when it is closed.
    pub fn touch(&mut self, now: Instant, key: &LegKey) -> Option<&mut T> {
        let used = self.stamp(now);
        let leg = self.legs.get_mut(key)?;
        self.by_use.remove(&leg.used);
        leg.used = used;
        self.by_use.insert(used, key.clone());
        Some(&mut leg.value)
    }

    /// Closes every leg idle for `idle` or longer at `now`, oldest first, and returns them.
    pub fn expire(&mut self, now: Instant) -> Vec<(LegKey, T)> {
        let mut closed = vec![];
        while let Some((&(used, _), _)) = self.by_use.first_key_value() {
            if now.saturating_duration_since(used) < self.idle {
                break;
            }
            closed.extend(self.pop_oldest());
        }
        closed
    }

    /// When the oldest leg falls idle (call [`Legs::expire`] then); none while no leg is open.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.by_use.first_key_value().map(|(&(used, _), _)| used.checked_add(self.idle).unwrap_or(used))
    }

    /// Closes every leg and returns them, oldest first.
    pub fn drain(&mut self) -> Vec<(LegKey, T)> {
        std::iter::from_fn(|| self.pop_oldest()).collect()
    }

    fn pop_oldest(&mut self) -> Option<(LegKey, T)> {
        let (_, key) = self.by_use.pop_first()?;
        let leg = self.legs.remove(&key).expect("by_use names only kept legs");
        Some((key, leg.value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(front: usize, rid: &[u8]) -> LegKey {
        (front, rid.to_vec())
    }

    fn open_ok(n: u32) -> impl FnOnce() -> Result<u32, ()> {
        move || Ok(n)
    }

    #[test]
    fn a_full_table_closes_the_least_recently_used_leg_and_only_when_the_open_succeeds() {
        let t0 = Instant::now();
        let mut legs = Legs::new(2, Duration::from_secs(120));
        assert!(legs.route(t0, &key(0, b"a"), open_ok(1)).unwrap().opened);
        assert!(legs.route(t0, &key(0, b"b"), open_ok(2)).unwrap().opened);
        // `a` is used again (same instant): `b` is now the least recently used.
        assert!(!legs.route(t0, &key(0, b"a"), open_ok(9)).unwrap().opened);
        assert!(legs.route(t0, &key(1, b"c"), || Err::<u32, _>("refused")).is_err());
        assert_eq!(legs.len(), 2, "a failed open closed a leg");
        let r = legs.route(t0, &key(1, b"c"), open_ok(3)).unwrap();
        assert_eq!(r.evicted, Some((key(0, b"b"), 2)));
        assert_eq!(legs.len(), 2);
    }

    #[test]
    fn idle_legs_expire_oldest_first_and_a_reply_keeps_its_leg() {
        let t0 = Instant::now();
        let idle = Duration::from_secs(120);
        let mut legs = Legs::new(8, idle);
        legs.route(t0, &key(0, b"a"), open_ok(1)).unwrap();
        legs.route(t0 + Duration::from_secs(1), &key(0, b"b"), open_ok(2)).unwrap();
        assert_eq!(legs.poll_timeout(), Some(t0 + idle));
        assert!(legs.touch(t0 + Duration::from_secs(100), &key(0, b"a")).is_some());
        assert!(legs.touch(t0, &key(0, b"zz")).is_none());
        assert!(legs.expire(t0 + idle).is_empty());
        let closed = legs.expire(t0 + idle + Duration::from_secs(1));
        assert_eq!(closed, vec![(key(0, b"b"), 2)]);
        assert_eq!(legs.drain(), vec![(key(0, b"a"), 1)]);
        assert!(legs.is_empty() && legs.poll_timeout().is_none());
    }
}
