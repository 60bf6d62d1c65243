//! Faults in what the testee reports to the runner — what a real connector tells its scheduler (finished,
//! failed and invalid blocks, freed transfers), the sizes of its tables, and the bytes in its memory.

use super::Fault;
use mooncake_testee_protocol::{DecoderStatus, PrefillerStatus};

/// A decoder's `status` answer after the faults.
pub fn decoder_status(faults: &[Fault], s: &mut DecoderStatus) {
    for f in faults {
        match f {
            Fault::NoInvalidBlocks => s.failed.iter_mut().for_each(|x| x.invalid_blocks.clear()),
            Fault::MissingInvalidBlock => s.failed.iter_mut().for_each(|x| {
                x.invalid_blocks.pop();
            }),
            Fault::UnreportedFailure => s.failed.clear(),
            Fault::FailedRecvingInstead => s.failed.iter_mut().for_each(|x| {
                x.invalid_blocks.clear();
                x.failed_recving = true;
            }),
            Fault::UnreportedFinish => s.finished.clear(),
            Fault::FinishedTwice => s.finished = s.finished.iter().flat_map(|d| [d.clone(), d.clone()]).collect(),
            Fault::LeakPull => s.pending_pulls = Some(s.pending_pulls.unwrap_or(0) + 1),
            Fault::LeakExchange => s.open_exchanges = Some(s.open_exchanges.unwrap_or(0) + 1),
            Fault::MisreportWrites => s.reads.iter_mut().flatten().for_each(|r| r.bytes += 1),
            _ => {}
        }
    }
}

/// A prefiller's `status` answer after the faults.
pub fn prefiller_status(faults: &[Fault], s: &mut PrefillerStatus) {
    for f in faults {
        match f {
            Fault::UnreportedFree => s.finished_sending.clear(),
            Fault::FreedTwice => {
                s.finished_sending = s.finished_sending.iter().flat_map(|x| [x.clone(), x.clone()]).collect()
            }
            Fault::LeakTransfer => s.tracked_transfers = Some(s.tracked_transfers.unwrap_or(0) + 1),
            Fault::LeakExchange => s.open_exchanges = Some(s.open_exchanges.unwrap_or(0) + 1),
            Fault::MisreportWrites => s.writes.iter_mut().for_each(|w| w.bytes += 1),
            _ => {}
        }
    }
}

/// A decoder's `read_memory` answer after the faults: [`Fault::CorruptMemory`] flips the first nonzero byte.
pub fn memory(faults: &[Fault], mut bytes: Vec<u8>) -> Vec<u8> {
    if faults.contains(&Fault::CorruptMemory) {
        if let Some(b) = bytes.iter_mut().find(|b| **b != 0) {
            *b ^= 0xff;
        }
    }
    bytes
}
