//! The runner replays the recorded bootstrap HTTP requests against a bootstrap testee and compares each
//! status and body with the recorded answer.

use std::time::Duration;

use serde_json::Value as J;

use super::{CaseCtx, PlayError};
use crate::testee::Testee;
use mooncake_testee_protocol::{BootstrapConfig, Command, RoleConfig, Started};
use mooncake_trace::finding::{CheckId, Finding};
use mooncake_trace::trace::HttpEvent;

/// `pairing.testee` is the revision the bootstrap testee is started at.
pub(crate) async fn play(ctx: &mut CaseCtx<'_>) -> Result<(), PlayError> {
    let (t, opts, pairing) = (ctx.t, ctx.opts, ctx.pairing);
    let mut testee = match &opts.external {
        super::External::Bootstrap(_) => None,
        _ => Some(Testee::start_logged(&opts.testee, opts.testee_log.as_ref()).await?.0),
    };
    let r = async {
        let url = match (&opts.external, testee.as_mut()) {
            (super::External::Bootstrap(u), _) => u.trim_end_matches('/').to_string(),
            (_, Some(te)) => {
                let cfg =
                    RoleConfig::Bootstrap(BootstrapConfig { bind: Some("127.0.0.1:0".into()), ..Default::default() });
                let a: Started = te.send(&Command::start(&pairing.testee.revision, &cfg)).await?;
                a.url.ok_or(PlayError::Unsaid { role: "bootstrap", what: "URL" })?
            }
            (_, None) => unreachable!("a testee unless external"),
        };
        let mut out = vec![];
        for (req, resp) in &t.http {
            let Some(resp) = resp else { continue };
            let f = |check: CheckId, detail: String, h: &HttpEvent| {
                Finding::new(check, detail).at(Some(h.seq), Some(h.line)).about(format!("{} {}", req.method, req.path))
            };
            let body: Option<J> = if req.body_raw.is_empty() { None } else { serde_json::from_str(&req.body_raw).ok() };
            match mooncake_io::http::request(
                &req.method,
                &format!("{url}{}", req.path),
                body.as_ref(),
                Duration::from_secs(10),
            )
            .await
            {
                Err(e) => out.push(f(CheckId::BootReply, e.to_string(), resp)),
                Ok((status, bytes)) => {
                    if Some(status) != resp.status {
                        out.push(f(
                            CheckId::BootStatus,
                            format!("answered {status}, vLLM answered {:?}", resp.status),
                            resp,
                        ));
                    }
                    let got: Option<J> = serde_json::from_slice(&bytes).ok();
                    if got != resp.body {
                        out.push(f(
                            CheckId::BootBody,
                            format!("body {} differs from vLLM's {}", String::from_utf8_lossy(&bytes), resp.body_raw),
                            resp,
                        ));
                    }
                }
            }
        }
        Ok::<_, PlayError>(out)
    }
    .await;
    if let Some(te) = testee {
        te.stop().await;
    }
    ctx.found_all(r?);
    Ok(())
}
