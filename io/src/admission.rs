//! Admission to a server: how many connections are open, in all and per IP address. A [`Slot`] holds one place
//! from accept to close (it gives it back when dropped), so a server refuses what is over its budget at once
//! and everyone admitted is served.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Open connections, in all and per IP address.
#[derive(Debug, Default)]
pub(crate) struct Occupancy {
    all: usize,
    per_host: HashMap<IpAddr, usize>,
}

impl Occupancy {
    /// An empty count, shared by the accept loop and the connections' slots.
    pub(crate) fn shared() -> Arc<Mutex<Occupancy>> {
        Arc::default()
    }
}

fn lock(m: &Mutex<Occupancy>) -> std::sync::MutexGuard<'_, Occupancy> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One connection's place; given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    occupancy: Arc<Mutex<Occupancy>>,
    ip: IpAddr,
}

impl Slot {
    /// One more place for a connection from `ip` within `max_all` and `max_per_host`, or why there is none.
    pub(crate) fn take(
        occupancy: &Arc<Mutex<Occupancy>>,
        ip: IpAddr,
        max_all: usize,
        max_per_host: usize,
    ) -> Result<Slot, String> {
        let mut o = lock(occupancy);
        if o.all >= max_all {
            return Err(format!("{} connections open, the most in all (limits)", o.all));
        }
        let from_host = o.per_host.get(&ip).copied().unwrap_or(0);
        if from_host >= max_per_host {
            return Err(format!("{from_host} connections open from {ip}, the most from one host (limits)"));
        }
        o.all += 1;
        *o.per_host.entry(ip).or_default() += 1;
        Ok(Slot { occupancy: occupancy.clone(), ip })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut o = lock(&self.occupancy);
        o.all -= 1;
        if let Some(n) = o.per_host.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                o.per_host.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_counted_in_all_and_per_host_and_given_back() {
        let o = Occupancy::shared();
        let (a, b): (IpAddr, IpAddr) = ("127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap());
        let a1 = Slot::take(&o, a, 3, 2).unwrap();
        let _a2 = Slot::take(&o, a, 3, 2).unwrap();
        assert!(Slot::take(&o, a, 3, 2).unwrap_err().contains("from 127.0.0.1"));
        let _b1 = Slot::take(&o, b, 3, 2).unwrap();
        assert!(Slot::take(&o, b, 3, 2).unwrap_err().contains("in all"));
        drop(a1);
        assert!(Slot::take(&o, a, 3, 2).is_ok());
    }
}
