//! The peers' status logs (finished transfers, writes, rejections, payloads sent) grow with every transfer;
//! a reference peer left running would otherwise keep all of them. Each log keeps at most
//! [`limits::MAX_STATUS_RECORDS`] entries: past that, the oldest half is dropped (amortised O(1) a push).

use mooncake_wire::limits;

/// Appends `item`, dropping the oldest half of `log` first when it is full.
pub fn record<T>(log: &mut Vec<T>, item: T) {
    record_within(log, item, limits::MAX_STATUS_RECORDS);
}

fn record_within<T>(log: &mut Vec<T>, item: T, max: usize) {
    if log.len() >= max {
        log.drain(..log.len() - max / 2);
    }
    log.push(item);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_log_keeps_its_newest_entries_in_order() {
        let mut log = vec![];
        for i in 0..25 {
            record_within(&mut log, i, 10);
            assert!(log.len() <= 10, "{log:?}");
        }
        // Full with 0..10; halved to 5..10 before 10 went in, to 10..15 before 15, to 15..20 before 20.
        assert_eq!(log, (15..25).collect::<Vec<_>>());
        assert_eq!(log.last(), Some(&24));
    }
}
