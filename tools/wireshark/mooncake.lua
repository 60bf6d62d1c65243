-- @generated from spec/ by mooncake-conformance (conformance/src/dissector). Do not edit: change spec/ and
-- regenerate with `mooncake-conformance dissector --out tools/wireshark/mooncake.lua` (or
-- `BLESS=1 cargo test -p mooncake-conformance --test suite -- dissector`).
--
-- A Wireshark (4.0 or newer) plugin for vLLM's Mooncake KV-transfer traffic: the side channel's ZeroMQ
-- messages of every spec revision (field names, the revisions a message fits, status names, reply texts,
-- request/reply pairing), the transfer engine's P2P handshake and TCP data header, and the bootstrap server's
-- JSON. Use: tshark -X lua_script:mooncake.lua -r capture.pcapng, or copy it to ~/.local/lib/wireshark/plugins/.
-- Filters: mooncake, mooncake.message, mooncake.status, mooncake.revisions, mooncake.<Message>.<field>,
-- mooncake_te, mooncake_bootstrap.

local REVISIONS = {
  { name = "vllm-ascend-0.18.0", family = "pull", generation = 1, releases = "0.18.0", summary = "V1 pull connector: MooncakeAgentMetadata with 5 fields; (b\"get_meta_msg\", \"\") and (b\"done_recving_msg\", request id, port table) tuples; raw ACK." },
  { name = "vllm-ascend-0.23.0.post1", family = "pull", generation = 1, releases = "0.23.0.post1", summary = "MooncakeAgentMetadata grows to 11 fields: per-group layer table, per-layer region lists, block lens/strides, handshake_port; + remote_block_size parameter." },
  { name = "vllm-ascend-main@3e486e317", family = "pull", generation = 2, releases = "", summary = "MooncakePullConnector: (b\"get_meta_msg\",) answered by MooncakeTransferMetadataGroups (PP \226\134\146 TP tables); (b\"done_recving_msg\", request id) answered by raw ACK." },
  { name = "vllm-0.13.0..0.15.1", family = "push", generation = 1, releases = "0.13.0, 0.14.0, 0.14.1, 0.15.0, 0.15.1", summary = "REQ \226\134\146 ROUTER at fixed ports, MooncakeAgentMetadata request, raw trans_done / trans_error reply; no bootstrap server." },
  { name = "vllm-0.16.0..0.18.1", family = "push", generation = 2, releases = "0.16.0, 0.17.0, 0.17.1, 0.18.0, 0.18.1", summary = "Bootstrap server and DEALER\226\134\146ROUTER side channel; MooncakeXferMetadata with 6 fields and flat block lists; MooncakeXferResponse with FINISH/CONTINUE/ERROR." },
  { name = "vllm-0.19.0..0.19.1", family = "push", generation = 2, releases = "0.19.0, 0.19.1", summary = "+ required block_lens (7 fields); one reply per round, empty ok_reqs/err_reqs omitted; heterogeneous TP; HND KV layout." },
  { name = "vllm-0.20.0..0.23.0", family = "push", generation = 2, releases = "0.20.0, 0.20.1, 0.20.2, 0.21.0, 0.22.0, 0.22.1, 0.23.0", summary = "req_blocks values carry one block list per KV-cache group (list[list[int]]). Note: 0.23.0's FlashAttention backend becomes blocks-first, so a FlashAttention deployment of 0.23.0 registers one region per layer where 0.20.0-0.22.1 registered K and V apart; the connector's rules are unchanged, the spec does not model attention backends." },
  { name = "vllm-0.24.0", family = "push", generation = 2, releases = "0.24.0", summary = "+ defaulted registered_layer_names, registered_layer_indices (9 fields), which the prefiller requires in practice." },
  { name = "vllm-0.25.0..0.25.1", family = "push", generation = 2, releases = "0.25.0, 0.25.1", summary = "+ required kv_block_lens (before the defaulted fields), + defaulted registered_group_indices (11 fields)." },
  { name = "vllm-0.26.0..0.28.0", family = "push", generation = 2, releases = "0.26.0, 0.27.0, 0.27.1, 0.28.0", summary = "Wire unchanged; attention regions are no longer split into K and V halves (one region per layer, whole blocks)." },
  { name = "vllm-0.29.0", family = "push", generation = 2, releases = "0.29.0", summary = "Wire unchanged; required KV layout LBHNC instead of HND; no K/V halves at all (per-head regions for non-dense blocks)." },
  { name = "vllm-0.30.0", family = "push", generation = 2, releases = "0.30.0", summary = "+ remote_pp_size: int = 1 (12 fields)." },
  { name = "vllm-0.31.0", family = "push", generation = 2, releases = "0.31.0", summary = "Side channel unchanged; POST /register accepts an identical re-registration." },
  { name = "vllm-0.32.0", family = "push", generation = 2, releases = "0.32.0", summary = "+ defaulted registered_shared_group_ids, registered_row_offsets before remote_pp_size (14 fields)." },
  { name = "vllm-0.33.0", family = "push", generation = 2, releases = "0.33.0", summary = "+ layout_id on request (15 fields) and response (5 fields); + status LAYOUT_MISS = 3; layout caching." },
  { name = "vllm-0.34.0", family = "push", generation = 2, releases = "0.34.0", summary = "+ MooncakeLeaseHeartbeat (decoder \226\134\146 prefiller ROUTER) and KV leases (kv_lease_duration); a pull of an expired transfer is answered at once; descending block runs are reversed before planning." },
}

local MESSAGES = {
{ revs = { 1, 2 }, name = "GetMetaMsg", encoding = "msgpack", from = "decoder", to = "prefiller", answered_by = "MooncakeAgentMetadata", kind = "tuple", array_like = false, fields = {
    { name = "tag", ty = "bytes", req = true, default = "required", doc = "A msgpack bin; a str tag would not match.", type = { k = "bytes" }, const = "\"6765745f6d6574615f6d7367\"" },
    { name = "unused", ty = "str", req = true, default = "required", doc = "Always the empty string.", type = { k = "str" } },
  } },
{ revs = { 1 }, name = "MooncakeAgentMetadata", encoding = "msgpack", from = "prefiller", to = "decoder", answered_by = nil, kind = "map", array_like = false, fields = {
    { name = "engine_id", ty = "EngineId", req = true, default = "required", doc = "The prefiller's engine id; the decoder keys its tables by it.", type = { k = "str" } },
    { name = "te_rpc_port", ty = "int", req = true, default = "required", doc = "The prefiller worker's TransferEngine RPC port (session = local_ip:te_rpc_port).", type = { k = "int" } },
    { name = "kv_caches_base_addr", ty = "list[int]", req = true, default = "required", doc = "Base address of each registered KV region (K and V of every layer).", type = { k = "list", e = { k = "int" } } },
    { name = "num_blocks", ty = "int", req = true, default = "required", doc = "Blocks per region.", type = { k = "int" } },
    { name = "local_ip", ty = "str", req = false, default = "''", doc = "The prefiller worker's IP (get_ip()).", type = { k = "str" } },
  } },
{ revs = { 1, 2 }, name = "DoneRecvingMsg", encoding = "msgpack", from = "decoder", to = "prefiller", answered_by = "Ack", kind = "tuple", array_like = false, fields = {
    { name = "tag", ty = "bytes", req = true, default = "required", doc = "A msgpack bin.", type = { k = "bytes" }, const = "\"646f6e655f72656376696e675f6d7367\"" },
    { name = "request_id", ty = "ReqId", req = true, default = "required", doc = "The prefiller's request id.", type = { k = "str" } },
    { name = "remote_port_send_num", ty = "dict[HandshakePort, RemotePortInfo]", req = true, default = "required", doc = "Per prefiller handshake port, how many done messages it must count before freeing; empty = free on the first.", type = { k = "dict", key = { k = "int" }, val = { k = "struct", s = { name = "RemotePortInfo", kind = "map", array_like = false, fields = {
    { name = "num", ty = "int", req = true, default = "required", doc = "Done messages the prefiller worker on this port waits for.", type = { k = "int" } },
    { name = "host", ty = "str", req = true, default = "required", doc = "That worker's host.", type = { k = "str" } },
  } } } } },
  } },
{ revs = { 1, 2 }, name = "Ack", encoding = "raw", from = "prefiller", to = "decoder", answered_by = nil, constants = { { name = "ACK", bytes = "ACK", doc = "Not MessagePack: the three bytes 41 43 4b. Anything else makes the decoder raise." }, } },
{ revs = { 2 }, name = "MooncakeAgentMetadata", encoding = "msgpack", from = "prefiller", to = "decoder", answered_by = nil, kind = "map", array_like = false, fields = {
    { name = "engine_id", ty = "EngineId", req = true, default = "required", doc = "The prefiller's engine id; the decoder keys its tables by it.", type = { k = "str" } },
    { name = "te_rpc_port", ty = "int", req = true, default = "required", doc = "The prefiller worker's TransferEngine RPC port (session = local_ip:te_rpc_port).", type = { k = "int" } },
    { name = "kv_group2layeridx", ty = "dict[int, tuple[dict[str, any], list[int]]]", req = true, default = "required", doc = "Transfer group \226\134\146 (description, the group's layer indices). The description is a map: layer_names, kv_cache_spec_type (the class name of vLLM's KV-cache spec), kv_cache_spec (msgspec.to_builtins of that spec, or {\"repr\": Python repr of it} when it holds values msgspec cannot encode \226\128\148 a FullAttentionSpec holds a torch dtype, so it travels as its repr \226\128\148 plus num_kv_heads, num_key_value_heads, total_num_kv_heads), kv_cache_group_id; a Mamba group adds shapes and dtype_sizes. The decoder compares it with its own only to log a difference at DEBUG level, stores it, and plans its reads with its own table (MooncakeConnectorWorker._serialize_kv_group_spec, KVCacheRecvingThread._get_remote_metadata).", type = { k = "dict", key = { k = "int" }, val = { k = "tuple", items = { { k = "dict", key = { k = "str" }, val = { k = "any" } }, { k = "list", e = { k = "int" } } } } } },
    { name = "block_size", ty = "int", req = true, default = "required", doc = "The prefiller's block size.", type = { k = "int" } },
    { name = "kv_caches_base_addr", ty = "list[list[int]]", req = true, default = "required", doc = "Base address of each registered KV region (K and V of every layer).", type = { k = "list", e = { k = "list", e = { k = "int" } } } },
    { name = "block_size_scale", ty = "list[list[int]]", req = true, default = "required", doc = "Per layer and region: kernel blocks per logical block.", type = { k = "list", e = { k = "list", e = { k = "int" } } } },
    { name = "num_blocks", ty = "int", req = true, default = "required", doc = "Blocks per region.", type = { k = "int" } },
    { name = "block_lens", ty = "list[list[int]]", req = true, default = "required", doc = "Per layer and region: bytes of one block.", type = { k = "list", e = { k = "list", e = { k = "int" } } } },
    { name = "block_strides", ty = "list[list[int]]", req = true, default = "required", doc = "Per layer and region: bytes between consecutive blocks.", type = { k = "list", e = { k = "list", e = { k = "int" } } } },
    { name = "local_ip", ty = "str", req = false, default = "''", doc = "The prefiller worker's IP (get_ip()).", type = { k = "str" } },
    { name = "handshake_port", ty = "int", req = false, default = "0", doc = "The prefiller worker's side-channel port.", type = { k = "int" } },
  } },
{ revs = { 3 }, name = "GetMetaMsg", encoding = "msgpack", from = "decoder", to = "prefiller", answered_by = "MooncakeTransferMetadataGroups", kind = "tuple", array_like = false, fields = {
    { name = "tag", ty = "bytes", req = true, default = "required", doc = "A msgpack bin.", type = { k = "bytes" }, const = "\"6765745f6d6574615f6d7367\"" },
  } },
{ revs = { 3 }, name = "MooncakeTransferMetadataGroups", encoding = "msgpack", from = "prefiller", to = "decoder", answered_by = nil, kind = "map", array_like = false, fields = {
    { name = "engine_id", ty = "EngineId", req = true, default = "required", doc = "Must equal the remote_engine_id the decoder expects.", type = { k = "str" } },
    { name = "scheduler_host", ty = "str", req = true, default = "required", doc = "The prefiller scheduler's side-channel host.", type = { k = "str" } },
    { name = "scheduler_port", ty = "int", req = true, default = "required", doc = "The prefiller scheduler's side-channel port.", type = { k = "int" } },
    { name = "pp_size", ty = "int", req = true, default = "required", doc = "", type = { k = "int" } },
    { name = "pcp_size", ty = "int", req = true, default = "required", doc = "The decoder requires 1.", type = { k = "int" } },
    { name = "dcp_size", ty = "int", req = true, default = "required", doc = "", type = { k = "int" } },
    { name = "tp_size", ty = "int", req = true, default = "required", doc = "TP ranks outside 0 \226\128\166 tp_size \226\136\146 1 are rejected by the decoder.", type = { k = "int" } },
    { name = "use_kv_pp", ty = "bool", req = true, default = "required", doc = "Whether TP ranks own different layers (LayerSplit).", type = { k = "bool" } },
    { name = "metadata_by_pp_rank", ty = "dict[int, MooncakePPTransferMetadata]", req = true, default = "required", doc = "PP rank \226\134\146 that stage's metadata, in PP-rank order; never empty.", type = { k = "dict", key = { k = "int" }, val = { k = "struct", s = { name = "MooncakePPTransferMetadata", kind = "map", array_like = false, fields = {
    { name = "block_size", ty = "int", req = true, default = "required", doc = "", type = { k = "int" } },
    { name = "num_blocks", ty = "int", req = true, default = "required", doc = "", type = { k = "int" } },
    { name = "layer_names", ty = "list[str]", req = true, default = "required", doc = "", type = { k = "list", e = { k = "str" } } },
    { name = "layer_block_sizes", ty = "list[int]", req = true, default = "required", doc = "", type = { k = "list", e = { k = "int" } } },
    { name = "group_indices", ty = "list[int]", req = true, default = "required", doc = "KV-cache group of each layer.", type = { k = "list", e = { k = "int" } } },
    { name = "block_strides", ty = "list[list[int]]", req = true, default = "required", doc = "", type = { k = "list", e = { k = "list", e = { k = "int" } } } },
    { name = "block_lens", ty = "list[list[int]]", req = true, default = "required", doc = "", type = { k = "list", e = { k = "list", e = { k = "int" } } } },
    { name = "block_shapes", ty = "list[list[tuple[int, ...]]]", req = true, default = "required", doc = "Shape of one block of each cache tensor.", type = { k = "list", e = { k = "list", e = { k = "vartuple", e = { k = "int" } } } } },
    { name = "block_size_scales", ty = "list[list[int]]", req = true, default = "required", doc = "", type = { k = "list", e = { k = "list", e = { k = "int" } } } },
    { name = "metadata_by_tp_rank", ty = "dict[int, MooncakeTPTransferMetadata]", req = true, default = "required", doc = "TP rank \226\134\146 that worker's addresses; never empty.", type = { k = "dict", key = { k = "int" }, val = { k = "struct", s = { name = "MooncakeTPTransferMetadata", kind = "map", array_like = false, fields = {
    { name = "te_rpc_port", ty = "int", req = true, default = "required", doc = "TransferEngine RPC port; the decoder reads from session local_ip:te_rpc_port.", type = { k = "int" } },
    { name = "layer_indices", ty = "list[int]", req = true, default = "required", doc = "Indices into layer_names of the layers this worker holds.", type = { k = "list", e = { k = "int" } } },
    { name = "kv_caches_base_addr", ty = "list[list[int]]", req = true, default = "required", doc = "Per layer of layer_names (empty for layers it does not hold): region base addresses.", type = { k = "list", e = { k = "list", e = { k = "int" } } } },
    { name = "local_ip", ty = "str", req = true, default = "required", doc = "", type = { k = "str" } },
    { name = "handshake_port", ty = "int", req = true, default = "required", doc = "", type = { k = "int" } },
  } } } } },
  } } } } },
  } },
{ revs = { 3 }, name = "DoneRecvingMsg", encoding = "msgpack", from = "decoder", to = "prefiller", answered_by = "Ack", kind = "tuple", array_like = false, fields = {
    { name = "tag", ty = "bytes", req = true, default = "required", doc = "A msgpack bin.", type = { k = "bytes" }, const = "\"646f6e655f72656376696e675f6d7367\"" },
    { name = "request_id", ty = "ReqId", req = true, default = "required", doc = "The prefiller's request id; the prefiller also accepts it before its own request_finished and applies it later.", type = { k = "str" } },
  } },
{ revs = { 3 }, name = "Ack", encoding = "raw", from = "prefiller", to = "decoder", answered_by = nil, constants = { { name = "ACK", bytes = "ACK", doc = "Not MessagePack: the bytes 41 43 4b. A repeated completion for a freed request is acknowledged too." }, } },
{ revs = { 4 }, name = "MooncakeAgentMetadata", encoding = "msgpack", from = "decoder", to = "prefiller", answered_by = "TransferReply", kind = "map", array_like = false, fields = {
    { name = "remote_hostname", ty = "str", req = true, default = "required", doc = "Decoder worker IP.", type = { k = "str" } },
    { name = "remote_port", ty = "int", req = true, default = "required", doc = "Decoder's TransferEngine RPC port.", type = { k = "int" } },
    { name = "request_ids", ty = "list[ReqId]", req = true, default = "required", doc = "Requests to pull.", type = { k = "list", e = { k = "str" } } },
    { name = "kv_caches_base_addr", ty = "list[int]", req = true, default = "required", doc = "Base address of each registered decoder KV region.", type = { k = "list", e = { k = "int" } } },
    { name = "block_ids", ty = "list[list[int]]", req = true, default = "required", doc = "Destination block ids, parallel to request_ids.", type = { k = "list", e = { k = "list", e = { k = "int" } } } },
  } },
{ revs = { 4 }, name = "TransferReply", encoding = "raw", from = "prefiller", to = "decoder", answered_by = nil, constants = { { name = "trans_done", bytes = "trans_done", doc = "Success; also sent when the request id is unknown to the prefiller." }, { name = "trans_error", bytes = "trans_error", doc = "Decoding or transferring failed." }, } },
{ revs = { 5 }, name = "MooncakeXferMetadata", encoding = "msgpack", from = "decoder", to = "prefiller", answered_by = "MooncakeXferResponse", kind = "map", array_like = false, fields = {
    { name = "remote_hostname", ty = "str", req = true, default = "required", doc = "Decoder worker IP (get_ip()).", type = { k = "str" } },
    { name = "remote_port", ty = "int", req = true, default = "required", doc = "Decoder's TransferEngine RPC port (not a ZMQ port).", type = { k = "int" } },
    { name = "remote_tp_size", ty = "int", req = true, default = "required", doc = "Decoder TP world size.", type = { k = "int" } },
    { name = "remote_tp_rank", ty = "int", req = true, default = "required", doc = "Decoder TP rank.", type = { k = "int" } },
    { name = "req_blocks", ty = "dict[ReqId, tuple[TransferId, list[int]]]", req = true, default = "required", doc = "Decoder request id \226\134\146 (transfer id, destination block ids).", type = { k = "dict", key = { k = "str" }, val = { k = "tuple", items = { { k = "str" }, { k = "list", e = { k = "int" } } } } } },
    { name = "kv_caches_base_addr", ty = "list[int]", req = true, default = "required", doc = "Base address of each registered decoder KV region.", type = { k = "list", e = { k = "int" } } },
  } },
{ revs = { 5, 6, 7, 8, 9, 10, 11, 12, 13, 14 }, name = "MooncakeXferResponse", encoding = "msgpack", from = "prefiller", to = "decoder", answered_by = nil, kind = "map", array_like = false, fields = {
    { name = "status", ty = "MooncakeXferResponseStatus", req = true, default = "required", doc = "See the status enum.", type = { k = "enum", name = "MooncakeXferResponseStatus", members = { [0] = { name = "FINISH", terminal = true }, [1] = { name = "CONTINUE", terminal = false }, [2] = { name = "ERROR", terminal = true } } } },
    { name = "ok_reqs", ty = "optional[list[ReqId]]", req = false, default = "None", doc = "Decoder request ids written (or with nothing to write) in this round.", type = { k = "opt", e = { k = "list", e = { k = "str" } } } },
    { name = "err_reqs", ty = "optional[list[ReqId]]", req = false, default = "None", doc = "Decoder request ids that failed in this round.", type = { k = "opt", e = { k = "list", e = { k = "str" } } } },
    { name = "err_msg", ty = "optional[str]", req = false, default = "None", doc = "Free-text reason.", type = { k = "opt", e = { k = "str" } } },
  } },
{ revs = { 6 }, name = "MooncakeXferMetadata", encoding = "msgpack", from = "decoder", to = "prefiller", answered_by = "MooncakeXferResponse", kind = "map", array_like = false, fields = {
    { name = "remote_hostname", ty = "str", req = true, default = "required", doc = "Decoder worker IP (get_ip()).", type = { k = "str" } },
    { name = "remote_port", ty = "int", req = true, default = "required", doc = "Decoder's TransferEngine RPC port (not a ZMQ port).", type = { k = "int" } },
    { name = "remote_tp_size", ty = "int", req = true, default = "required", doc = "Decoder TP world size.", type = { k = "int" } },
    { name = "remote_tp_rank", ty = "int", req = true, default = "required", doc = "Decoder TP rank.", type = { k = "int" } },
    { name = "req_blocks", ty = "dict[ReqId, tuple[TransferId, list[int]]]", req = true, default = "required", doc = "Decoder request id \226\134\146 (transfer id, destination block ids).", type = { k = "dict", key = { k = "str" }, val = { k = "tuple", items = { { k = "str" }, { k = "list", e = { k = "int" } } } } } },
    { name = "kv_caches_base_addr", ty = "list[int]", req = true, default = "required", doc = "Base address of each registered decoder KV region.", type = { k = "list", e = { k = "int" } } },
    { name = "block_lens", ty = "list[int]", req = true, default = "required", doc = "Byte stride between consecutive blocks of each region.", type = { k = "list", e = { k = "int" } } },
  } },
{ revs = { 7 }, name = "MooncakeXferMetadata", encoding = "msgpack", from = "decoder", to = "prefiller", answered_by = "MooncakeXferResponse", kind = "map", array_like = false, fields = {
    { name = "remote_hostname", ty = "str", req = true, default = "required", doc = "Decoder worker IP (get_ip()).", type = { k = "str" } },
    { name = "remote_port", ty = "int", req = true, default = "required", doc = "Decoder's TransferEngine RPC port (not a ZMQ port).", type = { k = "int" } },
    { name = "remote_tp_size", ty = "int", req = true, default = "required", doc = "Decoder TP world size.", type = { k = "int" } },
    { name = "remote_tp_rank", ty = "int", req = true, default = "required", doc = "Decoder TP rank.", type = { k = "int" } },
    { name = "req_blocks", ty = "dict[ReqId, tuple[TransferId, list[list[int]]]]", req = true, default = "required", doc = "Decoder request id \226\134\146 (transfer id, destination block ids per KV transfer group); [] when nothing is to be written.", type = { k = "dict", key = { k = "str" }, val = { k = "tuple", items = { { k = "str" }, { k = "list", e = { k = "list", e = { k = "int" } } } } } } },
    { name = "kv_caches_base_addr", ty = "list[int]", req = true, default = "required", doc = "Base address of each registered decoder KV region.", type = { k = "list", e = { k = "int" } } },
    { name = "block_lens", ty = "list[int]", req = true, default = "required", doc = "Byte stride between consecutive blocks of each region.", type = { k = "list", e = { k = "int" } } },
  } },
{ revs = { 8 }, name = "MooncakeXferMetadata", encoding = "msgpack", from = "decoder", to = "prefiller", answered_by = "MooncakeXferResponse", kind = "map", array_like = false, fields = {
    { name = "remote_hostname", ty = "str", req = true, default = "required", doc = "Decoder worker IP (get_ip()).", type = { k = "str" } },
    { name = "remote_port", ty = "int", req = true, default = "required", doc = "Decoder's TransferEngine RPC port (not a ZMQ port).", type = { k = "int" } },
    { name = "remote_tp_size", ty = "int", req = true, default = "required", doc = "Decoder TP world size.", type = { k = "int" } },
    { name = "remote_tp_rank", ty = "int", req = true, default = "required", doc = "Decoder TP rank.", type = { k = "int" } },
    { name = "req_blocks", ty = "dict[ReqId, tuple[TransferId, list[list[int]]]]", req = true, default = "required", doc = "Decoder request id \226\134\146 (transfer id, destination block ids per KV transfer group); [] when nothing is to be written.", type = { k = "dict", key = { k = "str" }, val = { k = "tuple", items = { { k = "str" }, { k = "list", e = { k = "list", e = { k = "int" } } } } } } },
    { name = "kv_caches_base_addr", ty = "list[int]", req = true, default = "required", doc = "Base address of each registered decoder KV region.", type = { k = "list", e = { k = "int" } } },
    { name = "block_lens", ty = "list[int]", req = true, default = "required", doc = "Byte stride between consecutive blocks of each region.", type = { k = "list", e = { k = "int" } } },
    { name = "registered_layer_names", ty = "list[str]", req = false, default = "list()", doc = "Layer name per region (repeated when a layer has several regions).", type = { k = "list", e = { k = "str" } } },
    { name = "registered_layer_indices", ty = "list[int]", req = false, default = "list()", doc = "Layer index per region.", type = { k = "list", e = { k = "int" } } },
  } },
{ revs = { 9, 10, 11 }, name = "MooncakeXferMetadata", encoding = "msgpack", from = "decoder", to = "prefiller", answered_by = "MooncakeXferResponse", kind = "map", array_like = false, fields = {
    { name = "remote_hostname", ty = "str", req = true, default = "required", doc = "Decoder worker IP (get_ip()).", type = { k = "str" } },
    { name = "remote_port", ty = "int", req = true, default = "required", doc = "Decoder's TransferEngine RPC port (not a ZMQ port).", type = { k = "int" } },
    { name = "remote_tp_size", ty = "int", req = true, default = "required", doc = "Decoder TP world size.", type = { k = "int" } },
    { name = "remote_tp_rank", ty = "int", req = true, default = "required", doc = "Decoder TP rank.", type = { k = "int" } },
    { name = "req_blocks", ty = "dict[ReqId, tuple[TransferId, list[list[int]]]]", req = true, default = "required", doc = "Decoder request id \226\134\146 (transfer id, destination block ids per KV transfer group); [] when nothing is to be written.", type = { k = "dict", key = { k = "str" }, val = { k = "tuple", items = { { k = "str" }, { k = "list", e = { k = "list", e = { k = "int" } } } } } } },
    { name = "kv_caches_base_addr", ty = "list[int]", req = true, default = "required", doc = "Base address of each registered decoder KV region.", type = { k = "list", e = { k = "int" } } },
    { name = "block_lens", ty = "list[int]", req = true, default = "required", doc = "Byte stride between consecutive blocks of each region.", type = { k = "list", e = { k = "int" } } },
    { name = "kv_block_lens", ty = "list[int]", req = true, default = "required", doc = "Bytes to move per block of each region (at most the stride).", type = { k = "list", e = { k = "int" } } },
    { name = "registered_layer_names", ty = "list[str]", req = false, default = "list()", doc = "Layer name per region (repeated when a layer has several regions).", type = { k = "list", e = { k = "str" } } },
    { name = "registered_layer_indices", ty = "list[int]", req = false, default = "list()", doc = "Layer index per region.", type = { k = "list", e = { k = "int" } } },
    { name = "registered_group_indices", ty = "list[int]", req = false, default = "list()", doc = "KV transfer group per region; -1 marks a region shared by several groups.", type = { k = "list", e = { k = "int" } } },
  } },
{ revs = { 12, 13 }, name = "MooncakeXferMetadata", encoding = "msgpack", from = "decoder", to = "prefiller", answered_by = "MooncakeXferResponse", kind = "map", array_like = false, fields = {
    { name = "remote_hostname", ty = "str", req = true, default = "required", doc = "Decoder worker IP (get_ip()).", type = { k = "str" } },
    { name = "remote_port", ty = "int", req = true, default = "required", doc = "Decoder's TransferEngine RPC port (not a ZMQ port).", type = { k = "int" } },
    { name = "remote_tp_size", ty = "int", req = true, default = "required", doc = "Decoder TP world size.", type = { k = "int" } },
    { name = "remote_tp_rank", ty = "int", req = true, default = "required", doc = "Decoder TP rank.", type = { k = "int" } },
    { name = "req_blocks", ty = "dict[ReqId, tuple[TransferId, list[list[int]]]]", req = true, default = "required", doc = "Decoder request id \226\134\146 (transfer id, destination block ids per KV transfer group); [] when nothing is to be written.", type = { k = "dict", key = { k = "str" }, val = { k = "tuple", items = { { k = "str" }, { k = "list", e = { k = "list", e = { k = "int" } } } } } } },
    { name = "kv_caches_base_addr", ty = "list[int]", req = true, default = "required", doc = "Base address of each registered decoder KV region.", type = { k = "list", e = { k = "int" } } },
    { name = "block_lens", ty = "list[int]", req = true, default = "required", doc = "Byte stride between consecutive blocks of each region.", type = { k = "list", e = { k = "int" } } },
    { name = "kv_block_lens", ty = "list[int]", req = true, default = "required", doc = "Bytes to move per block of each region (at most the stride).", type = { k = "list", e = { k = "int" } } },
    { name = "registered_layer_names", ty = "list[str]", req = false, default = "list()", doc = "Layer name per region (repeated when a layer has several regions).", type = { k = "list", e = { k = "str" } } },
    { name = "registered_layer_indices", ty = "list[int]", req = false, default = "list()", doc = "Layer index per region.", type = { k = "list", e = { k = "int" } } },
    { name = "registered_group_indices", ty = "list[int]", req = false, default = "list()", doc = "KV transfer group per region; -1 marks a region shared by several groups.", type = { k = "list", e = { k = "int" } } },
    { name = "remote_pp_size", ty = "int", req = false, default = "1", doc = "Decoder PP size (omitted when 1).", type = { k = "int" } },
  } },
{ revs = { 14 }, name = "MooncakeXferMetadata", encoding = "msgpack", from = "decoder", to = "prefiller", answered_by = "MooncakeXferResponse", kind = "map", array_like = false, fields = {
    { name = "remote_hostname", ty = "str", req = true, default = "required", doc = "Decoder worker IP (get_ip()).", type = { k = "str" } },
    { name = "remote_port", ty = "int", req = true, default = "required", doc = "Decoder's TransferEngine RPC port (not a ZMQ port).", type = { k = "int" } },
    { name = "remote_tp_size", ty = "int", req = true, default = "required", doc = "Decoder TP world size.", type = { k = "int" } },
    { name = "remote_tp_rank", ty = "int", req = true, default = "required", doc = "Decoder TP rank.", type = { k = "int" } },
    { name = "req_blocks", ty = "dict[ReqId, tuple[TransferId, list[list[int]]]]", req = true, default = "required", doc = "Decoder request id \226\134\146 (transfer id, destination block ids per KV transfer group); [] when nothing is to be written.", type = { k = "dict", key = { k = "str" }, val = { k = "tuple", items = { { k = "str" }, { k = "list", e = { k = "list", e = { k = "int" } } } } } } },
    { name = "kv_caches_base_addr", ty = "list[int]", req = true, default = "required", doc = "Base address of each registered decoder KV region.", type = { k = "list", e = { k = "int" } } },
    { name = "block_lens", ty = "list[int]", req = true, default = "required", doc = "Byte stride between consecutive blocks of each region.", type = { k = "list", e = { k = "int" } } },
    { name = "kv_block_lens", ty = "list[int]", req = true, default = "required", doc = "Bytes to move per block of each region (at most the stride).", type = { k = "list", e = { k = "int" } } },
    { name = "registered_layer_names", ty = "list[str]", req = false, default = "list()", doc = "Layer name per region (repeated when a layer has several regions).", type = { k = "list", e = { k = "str" } } },
    { name = "registered_layer_indices", ty = "list[int]", req = false, default = "list()", doc = "Layer index per region.", type = { k = "list", e = { k = "int" } } },
    { name = "registered_group_indices", ty = "list[int]", req = false, default = "list()", doc = "KV transfer group per region; -1 marks a region shared by several groups.", type = { k = "list", e = { k = "int" } } },
    { name = "registered_shared_group_ids", ty = "list[list[int]]", req = false, default = "list()", doc = "Groups sharing each region ([[g]] for an unshared region).", type = { k = "list", e = { k = "list", e = { k = "int" } } } },
    { name = "registered_row_offsets", ty = "list[int]", req = false, default = "list()", doc = "Byte offset of a packed-row view inside its block row; -1 = not a packed-row view.", type = { k = "list", e = { k = "int" } } },
    { name = "remote_pp_size", ty = "int", req = false, default = "1", doc = "Decoder PP size (omitted when 1).", type = { k = "int" } },
  } },
{ revs = { 15, 16 }, name = "MooncakeXferMetadata", encoding = "msgpack", from = "decoder", to = "prefiller", answered_by = "MooncakeXferResponse", kind = "map", array_like = false, fields = {
    { name = "remote_hostname", ty = "str", req = true, default = "required", doc = "Decoder worker IP (get_ip()).", type = { k = "str" } },
    { name = "remote_port", ty = "int", req = true, default = "required", doc = "Decoder's TransferEngine RPC port (not a ZMQ port).", type = { k = "int" } },
    { name = "remote_tp_size", ty = "int", req = true, default = "required", doc = "Decoder TP world size.", type = { k = "int" } },
    { name = "remote_tp_rank", ty = "int", req = true, default = "required", doc = "Decoder TP rank.", type = { k = "int" } },
    { name = "req_blocks", ty = "dict[ReqId, tuple[TransferId, list[list[int]]]]", req = true, default = "required", doc = "Decoder request id \226\134\146 (transfer id, destination block ids per KV transfer group); [] when nothing is to be written.", type = { k = "dict", key = { k = "str" }, val = { k = "tuple", items = { { k = "str" }, { k = "list", e = { k = "list", e = { k = "int" } } } } } } },
    { name = "kv_caches_base_addr", ty = "list[int]", req = true, default = "required", doc = "Base address of each registered decoder KV region.", type = { k = "list", e = { k = "int" } } },
    { name = "block_lens", ty = "list[int]", req = true, default = "required", doc = "Byte stride between consecutive blocks of each region.", type = { k = "list", e = { k = "int" } } },
    { name = "kv_block_lens", ty = "list[int]", req = true, default = "required", doc = "Bytes to move per block of each region (at most the stride).", type = { k = "list", e = { k = "int" } } },
    { name = "registered_layer_names", ty = "list[str]", req = false, default = "list()", doc = "Layer name per region (repeated when a layer has several regions).", type = { k = "list", e = { k = "str" } } },
    { name = "registered_layer_indices", ty = "list[int]", req = false, default = "list()", doc = "Layer index per region.", type = { k = "list", e = { k = "int" } } },
    { name = "registered_group_indices", ty = "list[int]", req = false, default = "list()", doc = "KV transfer group per region; -1 marks a region shared by several groups.", type = { k = "list", e = { k = "int" } } },
    { name = "registered_shared_group_ids", ty = "list[list[int]]", req = false, default = "list()", doc = "Groups sharing each region ([[g]] for an unshared region).", type = { k = "list", e = { k = "list", e = { k = "int" } } } },
    { name = "registered_row_offsets", ty = "list[int]", req = false, default = "list()", doc = "Byte offset of a packed-row view inside its block row; -1 = not a packed-row view.", type = { k = "list", e = { k = "int" } } },
    { name = "remote_pp_size", ty = "int", req = false, default = "1", doc = "Decoder PP size (omitted when 1).", type = { k = "int" } },
    { name = "layout_id", ty = "int", req = false, default = "0", doc = "Random odd 63-bit id of the decoder's current registration; 0 = the layout is always sent.", type = { k = "int" } },
  } },
{ revs = { 15, 16 }, name = "MooncakeXferResponse", encoding = "msgpack", from = "prefiller", to = "decoder", answered_by = nil, kind = "map", array_like = false, fields = {
    { name = "status", ty = "MooncakeXferResponseStatus", req = true, default = "required", doc = "See the status enum.", type = { k = "enum", name = "MooncakeXferResponseStatus", members = { [0] = { name = "FINISH", terminal = true }, [1] = { name = "CONTINUE", terminal = false }, [2] = { name = "ERROR", terminal = true }, [3] = { name = "LAYOUT_MISS", terminal = true } } } },
    { name = "ok_reqs", ty = "optional[list[ReqId]]", req = false, default = "None", doc = "Decoder request ids written (or with nothing to write) in this round.", type = { k = "opt", e = { k = "list", e = { k = "str" } } } },
    { name = "err_reqs", ty = "optional[list[ReqId]]", req = false, default = "None", doc = "Decoder request ids that failed in this round.", type = { k = "opt", e = { k = "list", e = { k = "str" } } } },
    { name = "err_msg", ty = "optional[str]", req = false, default = "None", doc = "Free-text reason.", type = { k = "opt", e = { k = "str" } } },
    { name = "layout_id", ty = "int", req = false, default = "0", doc = "Echo of the request's layout_id in CONTINUE/FINISH once the layout is cached; absent in ERROR/LAYOUT_MISS.", type = { k = "int" } },
  } },
{ revs = { 16 }, name = "MooncakeLeaseHeartbeat", encoding = "msgpack", from = "decoder", to = "prefiller", answered_by = "MooncakeXferResponse", kind = "map", array_like = false, fields = {
    { name = "lease_transfer_ids", ty = "list[TransferId]", req = false, default = "list()", doc = "Transfer ids whose KV lease to renew; empty (or absent) means this is not a heartbeat.", type = { k = "list", e = { k = "str" } } },
  } },
}

local REPLIES = { message = "MooncakeXferResponse", field = "err_msg" }
local REPLY_TEXTS = {
  { revs = { 5 }, name = "not_paired", text = "This P tp_rank {tp_rank} not in remote D target ranks {remote_tp_ranks}", pattern = "^This P tp_rank .- not in remote D target ranks .-$", status = { "ERROR" } },
  { revs = { 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 }, name = "ready_timeout", text = "Timeout waiting for P side ready.", pattern = "^Timeout waiting for P side ready%.$", status = { "FINISH" } },
  { revs = { 5 }, name = "block_count", text = "P num blocks less than D", pattern = "^P num blocks less than D$", status = { "CONTINUE", "FINISH" } },
  { revs = { 5 }, name = "transfer_failed", text = "Mooncake transfer engine returned {ret_value}", pattern = "^Mooncake transfer engine returned .-$", status = { "CONTINUE", "FINISH" } },
  { revs = { 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 }, name = "not_paired", text = "This D tp_rank {remote_tp_rank} is not paired with P tp_rank {tp_rank}; expected one of {remote_tp_ranks}.", pattern = "^This D tp_rank .- is not paired with P tp_rank .-; expected one of .-%.$", status = { "ERROR" } },
  { revs = { 14, 15, 16 }, name = "packed_pp_mismatch", text = "Mooncake non-page-contiguous packed regions keep only the first layer name, so they cannot be aligned across PP sizes {pp_size} and {remote_pp_size}.", pattern = "^Mooncake non%-page%-contiguous packed regions keep only the first layer name, so they cannot be aligned across PP sizes .- and .-%.$", status = { "ERROR" } },
  { revs = { 15, 16 }, name = "layout_miss", text = "Mooncake KV layout {layout_id:#x} from {remote_hostname}:{remote_port} is not cached.", pattern = "^Mooncake KV layout .- from .-:.- is not cached%.$", status = { "LAYOUT_MISS" } },
  { revs = { 16 }, name = "lease_off", text = "kv_lease_duration is not set on this prefill instance.", pattern = "^kv_lease_duration is not set on this prefill instance%.$", status = { "ERROR" } },
  { revs = { 16 }, name = "expired", text = "KV expired on P side before the pull.", pattern = "^KV expired on P side before the pull%.$", status = { "CONTINUE", "FINISH" } },
}

local ROUTES = {
{ revs = { 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 }, method = "POST", path = "/register", request = { k = "struct", s = { name = "RegisterWorkerPayload", kind = "map", array_like = false, fields = {
    { name = "engine_id", ty = "EngineId", req = true, default = "required", doc = "", type = { k = "str" } },
    { name = "dp_rank", ty = "int", req = true, default = "required", doc = "", type = { k = "int" } },
    { name = "tp_rank", ty = "int", req = true, default = "required", doc = "", type = { k = "int" } },
    { name = "pp_rank", ty = "int", req = true, default = "required", doc = "", type = { k = "int" } },
    { name = "addr", ty = "WorkerAddr", req = true, default = "required", doc = "", type = { k = "str" } },
  } } }, responses = {
    { status = 200, body = { k = "struct", s = { name = "RegisterOk", kind = "map", array_like = false, fields = {
    { name = "status", ty = "str", req = true, default = "required", doc = "", type = { k = "str" }, const = "\"ok\"" },
  } } }, detail = nil, when = "the (dp_rank, tp_rank, pp_rank) slot was free; the dp_rank entry is created on first sight" },
    { status = 400, body = { k = "struct", s = { name = "HTTPError", kind = "map", array_like = false, fields = {
    { name = "detail", ty = "str", req = true, default = "required", doc = "", type = { k = "str" } },
  } } }, detail = "^Engine ID mismatch for dp_rank=.-: expected .-, got .-$", when = "dp_rank is registered under another engine_id" },
    { status = 400, body = { k = "struct", s = { name = "HTTPError", kind = "map", array_like = false, fields = {
    { name = "detail", ty = "str", req = true, default = "required", doc = "", type = { k = "str" } },
  } } }, detail = "^Worker with dp_rank=.-, tp_rank=.-, pp_rank=.- is already registered at .-, but still want to register at .-$", when = "the slot is taken (see duplicate_registration)" },
    { status = 422, body = nil, detail = nil, when = "the body fails pydantic validation (FastAPI)" },
  } },
{ revs = { 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 }, method = "GET", path = "/query", request = nil, responses = {
    { status = 200, body = { k = "dict", key = { k = "int" }, val = { k = "struct", s = { name = "EngineEntry", kind = "map", array_like = false, fields = {
    { name = "engine_id", ty = "EngineId", req = true, default = "required", doc = "", type = { k = "str" } },
    { name = "worker_addr", ty = "dict[int, dict[int, WorkerAddr]]", req = true, default = "required", doc = "tp_rank \226\134\146 pp_rank \226\134\146 address; JSON writes the int keys as decimal strings.", type = { k = "dict", key = { k = "int" }, val = { k = "dict", key = { k = "int" }, val = { k = "str" } } } },
  } } } }, detail = nil, when = "always; whatever is registered so far, possibly {}" },
  } },
}

local DIRECTIONS = {
  { sender = "DEALER", receiver = "ROUTER", from = "decoder", to = "prefiller" },
  { sender = "REQ", receiver = "ROUTER", from = "decoder", to = "prefiller" },
  { sender = "ROUTER", receiver = "DEALER", from = "prefiller", to = "decoder" },
  { sender = "ROUTER", receiver = "REQ", from = "prefiller", to = "decoder" },
}

local REQUEST_ID_FIELDS = { ["req_blocks"] = true, ["request_id"] = true, ["request_ids"] = true }
local REPLY_ID_FIELDS = { ["err_reqs"] = true, ["ok_reqs"] = true }

local TE = { max_length = 1048576, types = { [0] = "connection", [1] = "metadata", [2] = "notify", [3] = "probe" }, max_type = 3, header_length = 24, opcodes = { [0] = "read", [1] = "write" }, write = 1, v2_flag = 128, statuses = { [0] = "ok", [1] = "addr_rejected" }, segment = { tcp_data_host = "Where the initiator connects for data.", tcp_proto_version = "Advertised by targets that speak the acknowledged format; an initiator uses version 2 only towards a descriptor with tcp_proto_version >= 2 (MC_TCP_PROTO=1 forces version 1)." } }

local BOOTSTRAP_PORT = 8998

-- ---- runtime: the same for every spec; the tables above are what spec/ says -----------------------------

local MAX_DEPTH = 64
local MAX_ITEMS = 64 -- children shown per container (the JSON field always holds the whole value)
local OWN_ZMTP = nil -- set below: true when this Wireshark has no ZMTP dissector of its own

local p_mc = Proto("mooncake", "Mooncake KV transfer (vLLM)")
local p_zmtp = Proto("mczmtp", "ZMTP 3 framing (mooncake plugin)")
local p_te = Proto("mooncake_te", "Mooncake Transfer Engine")
local p_boot = Proto("mooncake_bootstrap", "Mooncake bootstrap (vLLM)")

local F = {
    message = ProtoField.string("mooncake.message", "Message"),
    direction = ProtoField.string("mooncake.direction", "Direction"),
    revisions = ProtoField.string("mooncake.revisions", "Fits revisions"),
    accepted = ProtoField.string("mooncake.accepted_by", "Decodes under (unknown keys ignored)"),
    json = ProtoField.string("mooncake.json", "As JSON"),
    text = ProtoField.string("mooncake.text", "Text payload"),
    status = ProtoField.string("mooncake.status", "Status"),
    reply_text = ProtoField.string("mooncake.reply_text", "Reply text"),
    request_in = ProtoField.framenum("mooncake.request_in", "Answers the message in frame"),
    reply_in = ProtoField.framenum("mooncake.reply_in", "Answered in frame"),
    item = ProtoField.string("mooncake.item", "Item"),
    doc = ProtoField.string("mooncake.doc", "Spec"),
}
local FZ = {
    greeting = ProtoField.bytes("mczmtp.greeting", "Greeting"),
    version = ProtoField.string("mczmtp.version", "Version"),
    mechanism = ProtoField.string("mczmtp.mechanism", "Mechanism"),
    flags = ProtoField.uint8("mczmtp.flags", "Flags", base.HEX),
    more = ProtoField.bool("mczmtp.more", "More frames follow"),
    length = ProtoField.uint64("mczmtp.length", "Length"),
    command = ProtoField.string("mczmtp.command", "Command"),
    property = ProtoField.string("mczmtp.property", "Property"),
    data = ProtoField.bytes("mczmtp.data", "Frame body"),
}
local FT = {
    length = ProtoField.uint64("mooncake_te.length", "Frame length"),
    type = ProtoField.uint8("mooncake_te.type", "Handshake type"),
    descriptor = ProtoField.string("mooncake_te.descriptor", "Segment descriptor (JSON)"),
    item = ProtoField.string("mooncake_te.item", "Descriptor item"),
    size = ProtoField.uint64("mooncake_te.size", "Size"),
    addr = ProtoField.uint64("mooncake_te.addr", "Target address", base.HEX),
    opcode = ProtoField.uint8("mooncake_te.opcode", "Opcode", base.HEX),
    status = ProtoField.uint64("mooncake_te.status", "Status frame", base.HEX),
    payload = ProtoField.bytes("mooncake_te.payload", "Payload"),
}
local FB = {
    route = ProtoField.string("mooncake_bootstrap.route", "Route"),
    body = ProtoField.string("mooncake_bootstrap.body", "Body model"),
    revisions = ProtoField.string("mooncake_bootstrap.revisions", "Fits revisions"),
    json = ProtoField.string("mooncake_bootstrap.json", "Body as JSON"),
    item = ProtoField.string("mooncake_bootstrap.item", "Item"),
    detail = ProtoField.string("mooncake_bootstrap.detail", "Error detail"),
}

-- One filterable field per message field of the spec: mooncake.<Message>.<field>, its value as JSON text.
local FIELD_OF = {}
for _, m in ipairs(MESSAGES) do
    for _, f in ipairs(m.fields or {}) do
        local key = m.name .. "." .. f.name
        if not FIELD_OF[key] then
            FIELD_OF[key] = ProtoField.string("mooncake." .. key, f.name)
            F[#F + 1] = FIELD_OF[key]
        end
    end
end
local list = {}
for _, v in pairs(F) do list[#list + 1] = v end
p_mc.fields = list
list = {}
for _, v in pairs(FZ) do list[#list + 1] = v end
p_zmtp.fields = list
list = {}
for _, v in pairs(FT) do list[#list + 1] = v end
p_te.fields = list
list = {}
for _, v in pairs(FB) do list[#list + 1] = v end
p_boot.fields = list

local E = {
    malformed = ProtoExpert.new("mooncake.malformed", "Not MessagePack", expert.group.MALFORMED, expert.severity.ERROR),
    unknown = ProtoExpert.new("mooncake.unknown", "No spec revision has this message", expert.group.PROTOCOL, expert.severity.WARN),
    lenient = ProtoExpert.new("mooncake.lenient", "No revision sends this message; some decode it", expert.group.PROTOCOL, expert.severity.NOTE),
    text = ProtoExpert.new("mooncake.unknown_text", "A reply text no revision sends", expert.group.PROTOCOL, expert.severity.NOTE),
    status = ProtoExpert.new("mooncake.status_mismatch", "The reply text goes with other statuses", expert.group.PROTOCOL, expert.severity.WARN),
    pairing = ProtoExpert.new("mooncake.pairing", "A reply names an id its request does not", expert.group.SEQUENCE, expert.severity.WARN),
    te = ProtoExpert.new("mooncake_te.bad", "Not the transfer engine's framing", expert.group.MALFORMED, expert.severity.ERROR),
    boot = ProtoExpert.new("mooncake_bootstrap.unknown", "No spec revision has this body", expert.group.PROTOCOL, expert.severity.WARN),
}
p_mc.experts = { E.malformed, E.unknown, E.lenient, E.text, E.status, E.pairing }
p_te.experts = { E.te }
p_boot.experts = { E.boot }

-- ---- values: one shape for MessagePack and JSON --------------------------------------------------------
-- A value is { t = "nil"|"bool"|"int"|"float"|"str"|"bin"|"array"|"map"|"ext", v = ..., off, len, items }:
-- an int beyond 2^53 keeps its exact UInt64/Int64 in `big`.

local function hex(s)
    return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

local function mp_decode(tvb, off, depth)
    if depth > MAX_DEPTH then error("nested deeper than " .. MAX_DEPTH) end
    local total = tvb:len()
    local function need(n) if off + n > total then error("truncated at byte " .. off) end end
    need(1)
    local b = tvb(off, 1):uint()
    local start = off
    local function done(node, used) node.off = start; node.len = used; return node end
    local function uint(n) need(1 + n); return tvb(off + 1, n):uint() end
    local function container(kind, n, hdr)
        if n > total - off then error("a " .. kind .. " of " .. n .. " items in " .. (total - off) .. " bytes") end
        local items, pos = {}, off + hdr
        for i = 1, n do
            if kind == "map" then
                local k = mp_decode(tvb, pos, depth + 1); pos = k.off + k.len
                local v = mp_decode(tvb, pos, depth + 1); pos = v.off + v.len
                items[i] = { k, v }
            else
                local v = mp_decode(tvb, pos, depth + 1); pos = v.off + v.len
                items[i] = v
            end
        end
        return done({ t = kind, items = items }, pos - start)
    end
    local function str(kind, n, hdr)
        need(hdr + n)
        return done({ t = kind, v = (n > 0) and tvb(off + hdr, n):raw() or "" }, hdr + n)
    end
    local function big(n, signed)
        need(9)
        local r = tvb(off + 1, 8)
        local x = signed and r:int64() or r:uint64()
        local lim = signed and Int64(2 ^ 53) or UInt64(2 ^ 53)
        if (not signed and x <= lim) or (signed and x <= lim and x >= -lim) then
            return done({ t = "int", v = x:tonumber() }, 9)
        end
        return done({ t = "int", v = 0, big = x }, 9)
    end
    if b <= 0x7f then return done({ t = "int", v = b }, 1) end
    if b >= 0xe0 then return done({ t = "int", v = b - 256 }, 1) end
    if b >= 0x80 and b <= 0x8f then return container("map", b - 0x80, 1) end
    if b >= 0x90 and b <= 0x9f then return container("array", b - 0x90, 1) end
    if b >= 0xa0 and b <= 0xbf then return str("str", b - 0xa0, 1) end
    if b == 0xc0 then return done({ t = "nil" }, 1) end
    if b == 0xc2 or b == 0xc3 then return done({ t = "bool", v = (b == 0xc3) }, 1) end
    if b == 0xc4 then return str("bin", uint(1), 2) end
    if b == 0xc5 then return str("bin", uint(2), 3) end
    if b == 0xc6 then return str("bin", uint(4), 5) end
    if b == 0xca then need(5); return done({ t = "float", v = tvb(off + 1, 4):float() }, 5) end
    if b == 0xcb then need(9); return done({ t = "float", v = tvb(off + 1, 8):float() }, 9) end
    if b == 0xcc then return done({ t = "int", v = uint(1) }, 2) end
    if b == 0xcd then return done({ t = "int", v = uint(2) }, 3) end
    if b == 0xce then return done({ t = "int", v = uint(4) }, 5) end
    if b == 0xcf then return big(8, false) end
    if b == 0xd0 then need(2); return done({ t = "int", v = tvb(off + 1, 1):int() }, 2) end
    if b == 0xd1 then need(3); return done({ t = "int", v = tvb(off + 1, 2):int() }, 3) end
    if b == 0xd2 then need(5); return done({ t = "int", v = tvb(off + 1, 4):int() }, 5) end
    if b == 0xd3 then return big(8, true) end
    if b == 0xd9 then return str("str", uint(1), 2) end
    if b == 0xda then return str("str", uint(2), 3) end
    if b == 0xdb then return str("str", uint(4), 5) end
    if b == 0xdc then return container("array", uint(2), 3) end
    if b == 0xdd then return container("array", uint(4), 5) end
    if b == 0xde then return container("map", uint(2), 3) end
    if b == 0xdf then return container("map", uint(4), 5) end
    local fixext = { [0xd4] = 1, [0xd5] = 2, [0xd6] = 4, [0xd7] = 8, [0xd8] = 16 }
    if fixext[b] then need(2 + fixext[b]); return done({ t = "ext" }, 2 + fixext[b]) end
    if b == 0xc7 then local n = uint(1); need(3 + n); return done({ t = "ext" }, 3 + n) end
    if b == 0xc8 then local n = uint(2); need(4 + n); return done({ t = "ext" }, 4 + n) end
    if b == 0xc9 then local n = uint(4); need(6 + n); return done({ t = "ext" }, 6 + n) end
    error(string.format("byte 0x%02x at %d starts no MessagePack value", b, off))
end

-- JSON text -> value (bootstrap bodies and transfer-engine descriptors).
local function json_decode(s)
    local pos = 1
    local function ws() pos = s:find("[^ \t\r\n]", pos) or (#s + 1) end
    local value
    local function str()
        local out, i = {}, pos + 1
        while true do
            local c = s:sub(i, i)
            if c == "" then error("unterminated string") end
            if c == '"' then pos = i + 1; return table.concat(out) end
            if c == "\\" then
                local e = s:sub(i + 1, i + 1)
                local map = { b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }
                if e == "u" then
                    local cp = tonumber(s:sub(i + 2, i + 5), 16) or error("bad \\u escape")
                    if cp < 0x80 then out[#out + 1] = string.char(cp)
                    elseif cp < 0x800 then out[#out + 1] = string.char(0xc0 + math.floor(cp / 64), 0x80 + cp % 64)
                    else out[#out + 1] = string.char(0xe0 + math.floor(cp / 4096), 0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64) end
                    i = i + 6
                else
                    out[#out + 1] = map[e] or e
                    i = i + 2
                end
            else
                out[#out + 1] = c
                i = i + 1
            end
        end
    end
    value = function(depth)
        if depth > MAX_DEPTH then error("nested deeper than " .. MAX_DEPTH) end
        ws()
        local c = s:sub(pos, pos)
        if c == "{" then
            pos = pos + 1
            local items = {}
            ws()
            if s:sub(pos, pos) == "}" then pos = pos + 1; return { t = "map", items = items } end
            while true do
                ws()
                if s:sub(pos, pos) ~= '"' then error("object key expected at " .. pos) end
                local k = { t = "str", v = str() }
                ws()
                if s:sub(pos, pos) ~= ":" then error("':' expected at " .. pos) end
                pos = pos + 1
                items[#items + 1] = { k, value(depth + 1) }
                ws()
                local d = s:sub(pos, pos); pos = pos + 1
                if d == "}" then return { t = "map", items = items } end
                if d ~= "," then error("',' or '}' expected at " .. (pos - 1)) end
            end
        elseif c == "[" then
            pos = pos + 1
            local items = {}
            ws()
            if s:sub(pos, pos) == "]" then pos = pos + 1; return { t = "array", items = items } end
            while true do
                items[#items + 1] = value(depth + 1)
                ws()
                local d = s:sub(pos, pos); pos = pos + 1
                if d == "]" then return { t = "array", items = items } end
                if d ~= "," then error("',' or ']' expected at " .. (pos - 1)) end
            end
        elseif c == '"' then
            return { t = "str", v = str() }
        elseif s:sub(pos, pos + 3) == "true" then pos = pos + 4; return { t = "bool", v = true }
        elseif s:sub(pos, pos + 4) == "false" then pos = pos + 5; return { t = "bool", v = false }
        elseif s:sub(pos, pos + 3) == "null" then pos = pos + 4; return { t = "nil" }
        else
            local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
            if not num or num == "" then error("unexpected " .. c .. " at " .. pos) end
            pos = pos + #num
            if num:find("[%.eE]") then return { t = "float", v = tonumber(num) } end
            return { t = "int", v = tonumber(num), digits = num }
        end
    end
    local v = value(0)
    ws()
    if pos <= #s then error("trailing text at " .. pos) end
    return v
end

local function json_str(s)
    return '"' .. s:gsub('[%c"\\]', function(c)
        local m = { ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }
        return m[c] or string.format("\\u%04x", c:byte())
    end) .. '"'
end

local function int_text(n)
    if n.big then return tostring(n.big) end
    if n.digits then return n.digits end
    return string.format("%d", n.v)
end

-- As the recorder writes `decoded`: JSON builtins, bytes as hex, map keys as text.
local function to_json(n)
    if n.t == "nil" then return "null" end
    if n.t == "bool" then return n.v and "true" or "false" end
    if n.t == "int" then return int_text(n) end
    if n.t == "float" then return string.format("%.17g", n.v) end
    if n.t == "str" then return json_str(n.v) end
    if n.t == "bin" then return json_str(hex(n.v)) end
    if n.t == "ext" then return "null" end
    local out = {}
    if n.t == "array" then
        for i, v in ipairs(n.items) do out[i] = to_json(v) end
        return "[" .. table.concat(out, ",") .. "]"
    end
    for i, kv in ipairs(n.items) do
        local k = kv[1]
        local key = (k.t == "str") and k.v or ((k.t == "bin") and hex(k.v) or to_json(k))
        out[i] = json_str(key) .. ":" .. to_json(kv[2])
    end
    return "{" .. table.concat(out, ",") .. "}"
end

local function short(n, max)
    local s = to_json(n)
    max = max or 120
    if #s > max then s = s:sub(1, max) .. "…" end
    return s
end

-- ---- types: does a value fit a spec type ----------------------------------------------------------------

local fits
local function fits_struct(n, s, strict, json)
    if s.kind == "tuple" or s.array_like then
        if n.t ~= "array" then return false, "not an array" end
        local need = 0
        for i, f in ipairs(s.fields) do if f.req then need = i end end
        if s.kind == "tuple" then need = #s.fields end
        if #n.items < need or #n.items > #s.fields then return false, "array of " .. #n.items end
        for i, v in ipairs(n.items) do
            local ok, why = fits(v, s.fields[i].type, strict, json)
            if not ok then return false, s.fields[i].name .. ": " .. why end
            if s.fields[i].const and to_json(v) ~= s.fields[i].const then return false, s.fields[i].name .. " is not the constant" end
        end
        return true
    end
    if n.t ~= "map" then return false, "not a map" end
    local seen = {}
    for _, kv in ipairs(n.items) do
        local k = kv[1]
        if k.t ~= "str" then return false, "a key that is not text" end
        local f = s.by_name[k.v]
        if f then
            local ok, why = fits(kv[2], f.type, strict, json)
            if not ok then return false, k.v .. ": " .. why end
            if f.const and to_json(kv[2]) ~= f.const then return false, k.v .. " is not " .. f.const end
            seen[k.v] = true
        elseif s.tag_field and k.v == s.tag_field then
            if to_json(kv[2]) ~= s.tag then return false, "tag " .. to_json(kv[2]) end
            seen[k.v] = true
        elseif strict then
            return false, "unknown key " .. k.v
        end
    end
    for _, f in ipairs(s.fields) do
        if f.req and not seen[f.name] then return false, "missing required field " .. f.name end
    end
    if s.tag_field and not seen[s.tag_field] then return false, "missing tag" end
    return true
end

fits = function(n, t, strict, json)
    local k = t.k
    if k == "any" then return true end
    if k == "opt" then if n.t == "nil" then return true end return fits(n, t.e, strict, json) end
    if k == "int" then
        if n.t == "int" then return true end
        return false, "not an int"
    end
    if k == "float" then return (n.t == "int" or n.t == "float"), "not a number" end
    if k == "str" then return n.t == "str", "not text" end
    if k == "bytes" then return n.t == "bin", "not bytes" end
    if k == "bool" then return n.t == "bool", "not a bool" end
    if k == "enum" then
        if n.t ~= "int" or n.big or not t.members[n.v] then return false, "not a member of " .. t.name end
        return true
    end
    if k == "list" or k == "vartuple" or k == "tuple" then
        if n.t ~= "array" then return false, "not an array" end
        if k == "tuple" and #n.items ~= #t.items then return false, "tuple of " .. #n.items end
        for i, v in ipairs(n.items) do
            local ok, why = fits(v, (k == "tuple") and t.items[i] or t.e, strict, json)
            if not ok then return false, "[" .. (i - 1) .. "] " .. why end
        end
        return true
    end
    if k == "dict" then
        if n.t ~= "map" then return false, "not a map" end
        for _, kv in ipairs(n.items) do
            local key = kv[1]
            -- JSON writes int keys as decimal text.
            if json and t.key.k == "int" and key.t == "str" and key.v:match("^-?%d+$") then
                key = { t = "int", v = tonumber(key.v) }
            end
            local ok, why = fits(key, t.key, strict, json)
            if not ok then return false, "key " .. why end
            ok, why = fits(kv[2], t.val, strict, json)
            if not ok then return false, "value " .. why end
        end
        return true
    end
    if k == "struct" then return fits_struct(n, t.s, strict, json) end
    return false, "type " .. tostring(k)
end

for _, m in ipairs(MESSAGES) do
    if m.fields then
        m.by_name = {}
        for _, f in ipairs(m.fields) do m.by_name[f.name] = f end
    end
end
local function index_structs(t)
    if type(t) ~= "table" then return end
    if t.k == "struct" and not t.s.by_name then
        t.s.by_name = {}
        for _, f in ipairs(t.s.fields) do t.s.by_name[f.name] = f; index_structs(f.type) end
    end
    for _, v in pairs(t) do if type(v) == "table" and v ~= t.s then index_structs(v) end end
end
for _, m in ipairs(MESSAGES) do for _, f in ipairs(m.fields or {}) do index_structs(f.type) end end
for _, r in ipairs(ROUTES) do
    index_structs(r.request)
    for _, resp in ipairs(r.responses) do index_structs(resp.body) end
end

local function rev_names(revs)
    local out = {}
    for i, r in ipairs(revs) do out[i] = REVISIONS[r].name end
    return table.concat(out, ", ")
end

-- ---- the side channel: one ZeroMQ message payload ------------------------------------------------------

local pulls = {}   -- tcp stream -> the requests on it, in order: { frame, ids = set }
local answers = {} -- request frame -> first answer frame
-- A TCP connection by its addresses and ports (fields such as tcp.stream are not there in tshark's first pass
-- of -2, which builds no tree).
local function conn_id(pinfo)
    local a = tostring(pinfo.src) .. ":" .. pinfo.src_port
    local b = tostring(pinfo.dst) .. ":" .. pinfo.dst_port
    if a < b then return a .. "|" .. b end
    return b .. "|" .. a
end

local function enum_note(m, f, v)
    local t = f.type
    if t.k == "opt" then t = t.e end
    if t.k ~= "enum" or v.t ~= "int" then return nil end
    local mem = t.members[v.v]
    if not mem then return nil end
    return mem
end

local function add_value(tree, label, v, depth)
    local item = tree:add(F.item, label .. ": " .. short(v))
    if (v.t == "array" or v.t == "map") and depth < 3 then
        for i, e in ipairs(v.items) do
            if i > MAX_ITEMS then item:add(F.item, "… " .. (#v.items - MAX_ITEMS) .. " more"); break end
            if v.t == "map" then
                local k = e[1]
                add_value(item, (k.t == "str") and k.v or to_json(k), e[2], depth + 1)
            else
                add_value(item, "[" .. (i - 1) .. "]", e, depth + 1)
            end
        end
    end
    return item
end

local function ids_of(v, names)
    local out = {}
    if not v or v.t ~= "map" then return out end
    for _, kv in ipairs(v.items) do
        if kv[1].t == "str" and names[kv[1].v] then
            local x = kv[2]
            if x.t == "map" then for _, e in ipairs(x.items) do if e[1].t == "str" then out[e[1].v] = true end end end
            if x.t == "array" then for _, e in ipairs(x.items) do if e.t == "str" then out[e.v] = true end end end
        end
    end
    return out
end

local function match_reply_text(msg, revs)
    for _, r in ipairs(REPLY_TEXTS) do
        if msg:match(r.pattern) then return r end
    end
    return nil
end

local function classify(v, dir)
    local strict, lenient = {}, {}
    for _, m in ipairs(MESSAGES) do
        if m.encoding == "msgpack" and (not dir or m.from == dir.from) then
            if fits(v, { k = "struct", s = m }, true) then strict[#strict + 1] = m
            elseif fits(v, { k = "struct", s = m }, false) then lenient[#lenient + 1] = m end
        end
    end
    return strict, lenient
end

local function names_of(ms)
    local names, seen, revs = {}, {}, {}
    for _, m in ipairs(ms) do
        if not seen[m.name] then seen[m.name] = true; names[#names + 1] = m.name end
        for _, r in ipairs(m.revs) do revs[#revs + 1] = r end
    end
    table.sort(revs)
    local uniq = {}
    for i, r in ipairs(revs) do if r ~= revs[i - 1] then uniq[#uniq + 1] = r end end
    local label = rev_names(uniq)
    if #uniq > 3 then
        label = REVISIONS[uniq[1]].name .. " … " .. REVISIONS[uniq[#uniq]].name .. " (" .. #uniq .. " revisions)"
    end
    return table.concat(names, " / "), rev_names(uniq), label
end

local function show_field(tree, m, f, x)
    local item = tree:add(FIELD_OF[m.name .. "." .. f.name], short(x, 200))
    local mem = enum_note(m, f, x)
    if mem then item:append_text(" (" .. mem.name .. (mem.terminal and ", terminal" or "") .. ")") end
    item:add(F.doc, f.ty .. (f.req and ", required" or ", default " .. (f.default or "")) .. (f.doc ~= "" and (" — " .. f.doc) or ""))
    if (x.t == "array" or x.t == "map") then
        for i, e in ipairs(x.items) do
            if i > MAX_ITEMS then item:add(F.item, "… " .. (#x.items - MAX_ITEMS) .. " more"); break end
            if x.t == "map" then add_value(item, (e[1].t == "str") and e[1].v or to_json(e[1]), e[2], 1)
            else add_value(item, "[" .. (i - 1) .. "]", e, 1) end
        end
    end
end

local function show_fields(tree, m, v)
    if v.t == "array" then
        -- A tuple or array-like struct: fields by position.
        for i, x in ipairs(v.items) do
            local f = m.fields and m.fields[i]
            if f then show_field(tree, m, f, x) else add_value(tree, "[" .. (i - 1) .. "]", x, 1) end
        end
        return
    end
    for _, kv in ipairs(v.items) do
        local k, x = kv[1], kv[2]
        local f = (k.t == "str") and m.by_name and m.by_name[k.v]
        if f then
            show_field(tree, m, f, x)
        else
            add_value(tree, ((k.t == "str") and k.v or to_json(k)) .. " (a key no revision of " .. m.name .. " has)", x, 1)
        end
    end
end

local function pair(pinfo, tree, m, v)
    local s = conn_id(pinfo)
    pulls[s] = pulls[s] or {}
    if m.answered_by then
        if not pinfo.visited then
            pulls[s][#pulls[s] + 1] = { frame = pinfo.number, ids = ids_of(v, REQUEST_ID_FIELDS) }
        end
        if answers[pinfo.number] then tree:add(F.reply_in, answers[pinfo.number]):set_generated() end
        return
    end
    local req
    for _, p in ipairs(pulls[s]) do if p.frame < pinfo.number then req = p end end
    if not req then return end
    if not pinfo.visited and not answers[req.frame] then answers[req.frame] = pinfo.number end
    tree:add(F.request_in, req.frame):set_generated()
    for id in pairs(ids_of(v, REPLY_ID_FIELDS)) do
        if next(req.ids) and not req.ids[id] then tree:add_proto_expert_info(E.pairing, "id " .. id .. " is not in frame " .. req.frame) end
    end
end

local function show_message(tvb, pinfo, tree, v, dir)
    local root = tree:add(p_mc, tvb())
    local strict, lenient = classify(v, dir)
    root:add(F.json, tvb(), to_json(v))
    local use = strict[1] or lenient[1]
    if not use then
        root:add_proto_expert_info(E.unknown)
        pinfo.cols.info:append(" Mooncake: unknown message")
        return
    end
    local names, revs, label = names_of(#strict > 0 and strict or lenient)
    root:append_text(": " .. names)
    root:add(F.message, names)
    if dir then root:add(F.direction, dir.from .. " → " .. dir.to) end
    if #strict > 0 then root:add(F.revisions, revs) else
        root:add(F.accepted, revs)
        root:add_proto_expert_info(E.lenient)
    end
    show_fields(root, use, v)
    local info = " " .. names
    for _, kv in ipairs(v.t == "map" and v.items or {}) do
        local f = kv[1].t == "str" and use.by_name and use.by_name[kv[1].v]
        local mem = f and enum_note(use, f, kv[2])
        if mem then
            root:add(F.status, mem.name)
            info = info .. " " .. mem.name
        end
        if f and REPLIES and use.name == REPLIES.message and f.name == REPLIES.field and kv[2].t == "str" then
            local r = match_reply_text(kv[2].v)
            if r then
                local it = root:add(F.reply_text, r.name .. " (sent with " .. table.concat(r.status, ", ") .. "; " .. rev_names(r.revs) .. ")")
                local st = mem and mem.name
                for _, x in ipairs(v.items) do
                    local g = x[1].t == "str" and use.by_name[x[1].v]
                    local mm = g and enum_note(use, g, x[2])
                    if mm then st = mm.name end
                end
                local agree = not st
                for _, s in ipairs(r.status) do if s == st then agree = true end end
                if not agree then it:add_proto_expert_info(E.status) end
            else
                root:add_proto_expert_info(E.text)
            end
        end
    end
    pinfo.cols.info:append(info .. " [" .. label .. "]")
    pair(pinfo, root, use, v)
end

local function dissect_payload(tvb, pinfo, tree, dir)
    pinfo.cols.protocol = "Mooncake"
    local ok, v = pcall(mp_decode, tvb, 0, 0)
    if ok and v.len == tvb:len() then
        show_message(tvb, pinfo, tree, v, dir)
        return
    end
    local raw = tvb():raw()
    local hits, cname, cdoc = {}, nil, nil
    for _, m in ipairs(MESSAGES) do
        for _, c in ipairs(m.constants or {}) do
            if raw == c.bytes and (not dir or m.from == dir.from) then
                hits[#hits + 1] = m
                cname, cdoc = c.name, c.doc
            end
        end
    end
    if #hits > 0 then
        local names, revs, label = names_of(hits)
        local root = tree:add(p_mc, tvb(), "Mooncake KV transfer (vLLM): " .. names .. " " .. cname)
        root:add(F.text, tvb(), raw)
        root:add(F.message, names .. " " .. cname)
        root:add(F.revisions, revs)
        root:add(F.doc, cdoc)
        pinfo.cols.info:append(" " .. cname .. " [" .. label .. "]")
        pair(pinfo, root, hits[1], nil)
        return
    end
    local root = tree:add(p_mc, tvb())
    root:add(F.text, tvb(), raw)
    root:add_proto_expert_info(E.malformed, ok and "trailing bytes after a MessagePack value" or tostring(v))
end

-- ---- ZMTP framing (Wireshark before 4.2 has no ZMTP dissector) ------------------------------------------

local socket_of = {} -- "stream:port" -> socket type from READY

local function direction(pinfo)
    local c = conn_id(pinfo)
    local mine = socket_of[c .. ":" .. pinfo.src_port]
    local theirs = socket_of[c .. ":" .. pinfo.dst_port]
    if not mine or not theirs then return nil end
    for _, d in ipairs(DIRECTIONS) do
        if d.sender == mine and d.receiver == theirs then return d end
    end
    return nil
end

local function zmtp_properties(tvb, off, stop, tree, pinfo)
    local c = conn_id(pinfo)
    while off + 5 <= stop do
        local n = tvb(off, 1):uint()
        local name = tvb(off + 1, n):string()
        local vlen = tvb(off + 1 + n, 4):uint()
        local value = (vlen > 0) and tvb(off + 5 + n, vlen):string() or ""
        tree:add(FZ.property, tvb(off, 5 + n + vlen), name .. "=" .. value)
        if name == "Socket-Type" then socket_of[c .. ":" .. pinfo.src_port] = value end
        off = off + 5 + n + vlen
    end
end

function p_zmtp.dissector(tvb, pinfo, tree)
    local off, total = 0, tvb:len()
    while off < total do
        local flags = tvb(off, 1):uint()
        local hdr, len
        if flags == 0xff then
            if total - off < 64 then
                pinfo.desegment_offset = off; pinfo.desegment_len = 64 - (total - off); return
            end
            local t = tree:add(p_zmtp, tvb(off, 64), "ZMTP greeting")
            t:add(FZ.greeting, tvb(off, 10))
            t:add(FZ.version, tvb(off + 10, 2), tvb(off + 10, 1):uint() .. "." .. tvb(off + 11, 1):uint())
            t:add(FZ.mechanism, tvb(off + 12, 20), tvb(off + 12, 20):stringz())
            pinfo.cols.protocol = "ZMTP"
            off = off + 64
        else
            if flags > 7 then
                tree:add(p_zmtp, tvb(off), "not ZMTP framing"); return
            end
            if bit32.band(flags, 2) ~= 0 then
                if total - off < 9 then pinfo.desegment_offset = off; pinfo.desegment_len = DESEGMENT_ONE_MORE_SEGMENT; return end
                hdr, len = 9, tvb(off + 1, 8):uint64():tonumber()
            else
                if total - off < 2 then pinfo.desegment_offset = off; pinfo.desegment_len = DESEGMENT_ONE_MORE_SEGMENT; return end
                hdr, len = 2, tvb(off + 1, 1):uint()
            end
            if total - off < hdr + len then
                pinfo.desegment_offset = off; pinfo.desegment_len = hdr + len - (total - off); return
            end
            local t = tree:add(p_zmtp, tvb(off, hdr + len))
            t:add(FZ.flags, tvb(off, 1))
            t:add(FZ.length, tvb(off + 1, hdr - 1), UInt64(len))
            local body = (len > 0) and tvb(off + hdr, len) or nil
            if bit32.band(flags, 4) ~= 0 then
                local n = tvb(off + hdr, 1):uint()
                local name = tvb(off + hdr + 1, n):string()
                t:append_text(", command " .. name)
                t:add(FZ.command, tvb(off + hdr, 1 + n), name)
                if name == "READY" then zmtp_properties(tvb, off + hdr + 1 + n, off + hdr + len, t, pinfo) end
                pinfo.cols.protocol = "ZMTP"
                pinfo.cols.info:append(" " .. name)
            elseif bit32.band(flags, 1) ~= 0 then
                t:append_text(", frame (more follow)")
                t:add(FZ.more, tvb(off, 1), true)
                if body then t:add(FZ.data, body) end
            else
                t:append_text(", last frame of a message")
                if body then dissect_payload(body:tvb(), pinfo, tree, direction(pinfo)) end
            end
            off = off + hdr + len
        end
    end
end

-- ---- the transfer engine: P2P handshake and TCP data header ---------------------------------------------

local te_data_ports = {}
local p_te_data = Proto("mooncake_te_data", "Mooncake Transfer Engine data")
-- Handshake frames reassembled in the first pass, by the frame that completed them: a later pass (tshark -2, the
-- GUI's re-dissection) may get that frame's own segment only.
local te_pdus = {}
local function te_handshake(tvb, pinfo, tree)
    local whole = te_pdus[pinfo.number]
    if pinfo.visited and whole and tvb:len() < #whole then
        tvb = ByteArray.new(whole, true):tvb("Transfer-engine handshake frame (reassembled)")
    end
    if not pinfo.visited and tvb:len() >= 9 then te_pdus[pinfo.number] = tvb:raw() end
    local off, total = 0, tvb:len()
    while off < total do
        if total - off < 9 then pinfo.desegment_offset = off; pinfo.desegment_len = DESEGMENT_ONE_MORE_SEGMENT; return end
        local len = tvb(off, 8):le_uint64():tonumber()
        if len < 1 or len > TE.max_length then tree:add_proto_expert_info(E.te, "frame length " .. len); return end
        if total - off < 8 + len then pinfo.desegment_offset = off; pinfo.desegment_len = 8 + len - (total - off); return end
        local t = tree:add(p_te, tvb(off, 8 + len), "Mooncake Transfer Engine handshake")
        t:add_le(FT.length, tvb(off, 8))
        local ty = tvb(off + 8, 1):uint()
        t:add(FT.type, tvb(off + 8, 1)):append_text(" (" .. (TE.types[ty] or "unknown") .. ")")
        pinfo.cols.protocol = "Mooncake TE"
        pinfo.cols.info:append(" handshake " .. (TE.types[ty] or tostring(ty)))
        if len > 1 then
            local text = tvb(off + 9, len - 1):raw()
            local d = t:add(FT.descriptor, tvb(off + 9, len - 1), text)
            local ok, v = pcall(json_decode, text)
            if ok and v.t == "map" then
                for _, kv in ipairs(v.items) do
                    local doc = TE.segment[kv[1].v]
                    d:add(FT.item, kv[1].v .. ": " .. short(kv[2]) .. (doc and (" — " .. doc) or ""))
                    if kv[1].v == "tcp_data_port" and kv[2].t == "int" and not te_data_ports[kv[2].v] then
                        te_data_ports[kv[2].v] = true
                        DissectorTable.get("tcp.port"):add(kv[2].v, p_te_data)
                    end
                end
            end
        end
        off = off + 8 + len
    end
end

local te_left = {}    -- "stream:port" -> payload bytes still to come from that side; by frame: at its start
local te_expect = {}  -- tcp stream -> the target's answers still due, in request order: { status, data }
function p_te_data.dissector(tvb, pinfo, tree)
    pinfo.cols.protocol = "Mooncake TE"
    local stream = conn_id(pinfo)
    local key = stream .. ":" .. pinfo.src_port
    local off, total = 0, tvb:len()
    local left = te_left[pinfo.number]
    if left == nil then left = te_left[key] or 0; te_left[pinfo.number] = left end
    local to_data = te_data_ports[pinfo.dst_port]
    te_expect[stream] = te_expect[stream] or {}
    local due = te_expect[stream]
    while off < total do
        if left > 0 then
            local n = math.min(left, total - off)
            tree:add(p_te, tvb(off, n), "Mooncake Transfer Engine payload (" .. n .. " bytes)")
            off, left = off + n, left - n
        elseif to_data then
            if total - off < TE.header_length then break end
            local t = tree:add(p_te, tvb(off, TE.header_length), "Mooncake Transfer Engine request header")
            local size = tvb(off, 8):le_uint64():tonumber()
            t:add_le(FT.size, tvb(off, 8))
            t:add_le(FT.addr, tvb(off + 8, 8))
            local op = tvb(off + 16, 1):uint()
            local base_op, v2 = op % TE.v2_flag, op >= TE.v2_flag
            t:add(FT.opcode, tvb(off + 16, 1)):append_text(" (" .. (TE.opcodes[base_op] or "?") .. (v2 and ", acknowledged (v2)" or "") .. ")")
            pinfo.cols.info:append(" " .. (TE.opcodes[base_op] or "?") .. " " .. size)
            off = off + TE.header_length
            local write = (base_op == TE.write)
            if not pinfo.visited and (v2 or not write) then
                due[#due + 1] = { status = v2, data = write and 0 or size }
            end
            if write then left = size end
        else
            local d = due[1] or { status = true, data = 0 }
            if d.status then
                if total - off < 8 then break end
                local t = tree:add(p_te, tvb(off, 8), "Mooncake Transfer Engine status")
                t:add_le(FT.status, tvb(off, 8))
                local code = tvb(off, 4):le_uint()
                t:append_text(" (" .. (TE.statuses[code] or "?") .. ")")
                pinfo.cols.info:append(" status " .. (TE.statuses[code] or tostring(code)))
                off = off + 8
                if code ~= 0 then d.data = 0 end
            end
            if not pinfo.visited then table.remove(due, 1) end
            left = d.data
        end
    end
    if not pinfo.visited then te_left[key] = left end
end

function p_te.dissector(tvb, pinfo, tree) te_handshake(tvb, pinfo, tree) end

-- ---- finding the conversations --------------------------------------------------------------------------

local zmtp_table = nil
do
    local ok, t = pcall(DissectorTable.get, "zmtp.protocol")
    if ok and t then zmtp_table = t end
end
OWN_ZMTP = (zmtp_table == nil)
local p_payload = Proto("mooncake_payload", "Mooncake payload (under Wireshark's ZMTP)")
function p_payload.dissector(tvb, pinfo, tree) dissect_payload(tvb, pinfo, tree, nil) end

-- The TCP streams claimed: "zmtp" or "te". Each later segment of a claimed stream comes back through the
-- heuristic (nothing else claims it), and goes to the same dissector.
local claimed = {}
local seen_dir = {} -- "stream:port": a payload from this side of the stream was seen

local function zmtp_stream(tvb, pinfo, tree)
    if OWN_ZMTP then
        p_zmtp.dissector(tvb, pinfo, tree)
    else
        local z = Dissector.get("zmtp")
        z:call(tvb, pinfo, tree)
    end
end

local function heuristic(tvb, pinfo, tree)
    local s = conn_id(pinfo)
    local n = tvb:len()
    if s and claimed[s] == "zmtp" then zmtp_stream(tvb, pinfo, tree); return true end
    if s and claimed[s] == "te" then te_handshake(tvb, pinfo, tree); return true end
    if n >= 10 and tvb(0, 1):uint() == 0xff and tvb(9, 1):uint() == 0x7f then
        if s then claimed[s] = "zmtp" end
        if not OWN_ZMTP then
            zmtp_table:add(pinfo.src_port, p_payload)
            zmtp_table:add(pinfo.dst_port, p_payload)
        end
        zmtp_stream(tvb, pinfo, tree)
        return true
    end
    -- A transfer-engine handshake frame starts the stream: a length, a type byte, a JSON descriptor. The engine
    -- may write the three in separate segments, so the first segment may hold the length alone.
    -- (The first payload of each direction of a stream; tcp.seq is not there in tshark's first pass of -2.)
    local first = false
    if s and not seen_dir[s .. ":" .. pinfo.src_port] then
        seen_dir[s .. ":" .. pinfo.src_port] = true
        first = true
    end
    if n >= 8 and first then
        local len = tvb(0, 8):le_uint64()
        local typed = (n < 9) or tvb(8, 1):uint() <= TE.max_type
        local json = (n < 10) or tvb(9, 1):uint() == 0x7b
        if len >= UInt64(2) and len <= UInt64(TE.max_length) and typed and json then
            if s then claimed[s] = "te" end
            te_handshake(tvb, pinfo, tree)
            return true
        end
    end
    return false
end
p_zmtp:register_heuristic("tcp", heuristic)

-- ---- the bootstrap server's HTTP ------------------------------------------------------------------------

local http = Dissector.get("http")
do
    local ok, h = pcall(Dissector.get, "http-over-tcp")
    if ok and h then http = h end
end
p_boot.prefs.port = Pref.uint("Bootstrap server port", BOOTSTRAP_PORT, "TCP port of vLLM's Mooncake bootstrap server (HTTP)")
local boot_port = nil
function p_boot.prefs_changed()
    local t = DissectorTable.get("tcp.port")
    if boot_port then t:remove(boot_port, http) end
    boot_port = p_boot.prefs.port
    t:add(boot_port, http)
end
DissectorTable.get("tcp.port"):add(BOOTSTRAP_PORT, http)
boot_port = BOOTSTRAP_PORT

local f_method = Field.new("http.request.method")
local f_uri = Field.new("http.request.uri")
local f_code = Field.new("http.response.code")
local f_for = Field.new("http.response_for.uri")
local f_body = Field.new("http.file_data")

local function annotate(tree, t, v, depth)
    if depth > 4 then return end
    if t.k == "opt" then t = t.e end
    if t.k == "struct" and v.t == "map" then
        for _, kv in ipairs(v.items) do
            local f = kv[1].t == "str" and t.s.by_name[kv[1].v]
            local it = tree:add(FB.item, kv[1].v .. ": " .. short(kv[2]) .. (f and (" (" .. f.ty .. ")" .. (f.doc ~= "" and (" — " .. f.doc) or "")) or " (not in the model)"))
            if f then annotate(it, f.type, kv[2], depth + 1) end
        end
    elseif t.k == "dict" and v.t == "map" then
        for _, kv in ipairs(v.items) do
            local it = tree:add(FB.item, to_json(kv[1]) .. ": " .. short(kv[2]))
            annotate(it, t.val, kv[2], depth + 1)
        end
    end
end

function p_boot.dissector(tvb, pinfo, tree)
    local code, path, method = f_code(), nil, nil
    if f_method() then method = f_method().value; path = f_uri().value
    elseif code and f_for() then path = f_for().value:gsub("^https?://[^/]*", "") end
    if not path then return end
    path = path:gsub("%?.*", "")
    local body = f_body()
    local text = body and body.range and body.range:raw() or ""
    local root, json_done
    for _, r in ipairs(ROUTES) do
        if r.path == path and (not method or r.method == method) then
            root = root or tree:add(p_boot, "Mooncake bootstrap: " .. r.method .. " " .. r.path)
            local model, revs = nil, r.revs
            local v = nil
            if text ~= "" then
                local ok, x = pcall(json_decode, text)
                if ok then v = x end
            end
            if v and not json_done then root:add(FB.json, to_json(v)); json_done = true end
            if method then
                model = r.request
            else
                for _, resp in ipairs(r.responses) do
                    if resp.status == code.value and (not resp.body or (v and fits(v, resp.body, true, true))) then
                        model = resp.body
                        if resp.detail and v then
                            for _, kv in ipairs(v.items or {}) do
                                if kv[1].v == "detail" and kv[2].t == "str" then
                                    root:add(FB.detail, kv[2].v .. (kv[2].v:match(resp.detail) and " (the spec's text)" or " (a text the spec does not list)"))
                                end
                            end
                        end
                        root:add(FB.item, "when: " .. resp.when)
                        break
                    end
                end
            end
            if model and v then
                if fits(v, model, true, true) then
                    local mname = (model.k == "struct" and model.s.name) or (model.k == "dict" and model.val.k == "struct" and ("dict of " .. model.val.s.name)) or model.k
                    root:add(FB.body, mname)
                    root:add(FB.revisions, rev_names(revs))
                    annotate(root, model, v, 0)
                    pinfo.cols.info:append(" [Mooncake bootstrap " .. mname .. "]")
                    return
                end
            end
        end
    end
    if root and text ~= "" then root:add_proto_expert_info(E.boot) end
end
register_postdissector(p_boot, true)
