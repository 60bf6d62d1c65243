//! What the typed messages mean beyond their wire shape (protocol rules, not generated).

use super::MooncakeXferMetadataOf;
use crate::msgpack::WireInt;

impl<S: AsRef<str>> MooncakeXferMetadataOf<S> {
    /// Whether this pull carries no layout (0.33.0 layout caching, `spec/PROTOCOL.md#layout-caching`: a
    /// nonzero `layout_id`, no base addresses).
    pub fn is_layout_less(&self) -> bool {
        self.layout_id != WireInt::ZERO && self.kv_caches_base_addr.is_empty()
    }
}
