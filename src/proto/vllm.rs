//! [`SenderPlanner`] for the vLLM 0.33.0 planner of [`crate::plan`].

use std::sync::Arc;

use super::planner::{ReadyReq, SenderPlanner, TransferBatch};
use crate::plan::{PreparedRegions, Producer, Pull, ReadyRequest, Refusal, RegisteredLayout};
use crate::typed::MooncakeXferMetadata;

impl SenderPlanner for Producer {
    type Error = Refusal;
    type Pull = Pull;
    type Prepared = Arc<PreparedRegions>;
    /// `_prepare_transfer_regions` reads the decoder's TP and PP sizes and its layout (not its rank).
    type PrepareKey = (i64, i64, Arc<RegisteredLayout>);

    fn pull(&self, meta: &MooncakeXferMetadata) -> Result<Pull, Refusal> {
        Pull::try_from(meta).map_err(Refusal::OutOfRange)
    }

    fn check(&self, pull: &Pull) -> Result<Vec<usize>, Refusal> {
        let ranks = self.check_pairing(pull)?;
        if self.pp_mismatch_hides_packed_layers(pull) {
            return Err(Refusal::PpMismatchHidesPackedLayers {
                local_pp_size: self.config.pp_size,
                remote_pp_size: pull.remote_pp_size,
            });
        }
        Ok(ranks.into_iter().map(|r| r as usize).collect())
    }

    fn prepare_key(&self, pull: &Pull) -> Self::PrepareKey {
        (pull.remote_tp_size, pull.remote_pp_size, pull.layout.clone())
    }

    fn prepare(&self, pull: &Pull) -> Result<Arc<PreparedRegions>, Refusal> {
        Producer::prepare(self, pull).map(Arc::new)
    }

    fn validate(&self, pull: &Pull, prepared: &Arc<PreparedRegions>) -> Result<(), Refusal> {
        Producer::validate(self, prepared, pull.remote_tp_size)
    }

    fn build(
        &self,
        pull: &Pull,
        prepared: &Arc<PreparedRegions>,
        ready: &[ReadyReq<'_>],
    ) -> Result<TransferBatch, Refusal> {
        let reqs: Vec<ReadyRequest> = ready
            .iter()
            .map(|r| ReadyRequest {
                d_req_id: r.d_req_id.to_string(),
                local_block_ids: r.local_blocks.iter().map(|g| g.iter().map(|b| *b as i64).collect()).collect(),
                remote_block_ids: r
                    .remote_blocks
                    .iter()
                    .map(|g| g.iter().map(|b| b.as_i64().unwrap_or(i64::MAX)).collect())
                    .collect(),
            })
            .collect();
        Ok(Producer::build(self, prepared, pull, &reqs)?)
    }

    fn need_send(&self, target_ranks: &[usize], remote_pp_size: usize) -> usize {
        let ranks: Vec<i64> = target_ranks.iter().map(|r| *r as i64).collect();
        Producer::need_send(self, &ranks, remote_pp_size as i64).max(0) as usize
    }
}
