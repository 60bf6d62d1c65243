//! TP pairing between a local worker and a remote engine (vLLM 0.33.0 `TransferTopology.tp_ratio` and
//! `handshake_target_ranks` without decode-context parallelism; `kv_connector/utils.py`).

/// `local_tp / remote_tp` when local ≥ remote, else `-(remote_tp / local_tp)`; an error text (vLLM's assert
/// message) when one does not divide the other.
pub fn tp_ratio(local_tp: usize, remote_tp: usize) -> Result<i64, String> {
    if local_tp == 0 || remote_tp == 0 {
        return Err(format!("tensor parallel sizes must be positive (local {local_tp}, remote {remote_tp})"));
    }
    if local_tp >= remote_tp {
        if local_tp % remote_tp != 0 {
            return Err(format!("Local tensor parallel size {local_tp} is not divisible by remote tensor parallel size {remote_tp}."));
        }
        Ok((local_tp / remote_tp) as i64)
    } else {
        if remote_tp % local_tp != 0 {
            return Err(format!("Remote tensor parallel size {remote_tp} is not divisible by local tensor parallel size {local_tp}."));
        }
        Ok(-((remote_tp / local_tp) as i64))
    }
}

/// The remote TP ranks a local rank exchanges with.
pub fn handshake_target_ranks(local_tp: usize, local_rank: usize, remote_tp: usize) -> Result<Vec<usize>, String> {
    let r = tp_ratio(local_tp, remote_tp)?;
    Ok(if r > 0 {
        vec![local_rank / r as usize]
    } else {
        let a = (-r) as usize;
        (0..a).map(|i| local_rank * a + i).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn pairs() {
        assert_eq!(handshake_target_ranks(1, 0, 2).unwrap(), vec![0, 1]);
        assert_eq!(handshake_target_ranks(2, 1, 1).unwrap(), vec![0]);
        assert_eq!(handshake_target_ranks(4, 3, 2).unwrap(), vec![1]);
        assert_eq!(handshake_target_ranks(2, 1, 4).unwrap(), vec![2, 3]);
        assert_eq!(tp_ratio(3, 2).unwrap_err(), "Local tensor parallel size 3 is not divisible by remote tensor parallel size 2.");
    }
}
