//! The rows the streams hand out, and the column decoding they share.

use rusqlite::types::ValueRef;
use rusqlite::Row;

use crate::model::Correlation;

/// A kernel dispatch row.
#[derive(Debug, Clone, Default)]
pub struct DispatchRow {
    /// Row id (= dispatch id in rocprofv3 output).
    pub id: i64,
    /// pid.
    pub pid: i64,
    /// tid.
    pub tid: i64,
    /// Agent id.
    pub agent_id: i64,
    /// Kernel id.
    pub kernel_id: i64,
    /// Dispatch id.
    pub dispatch_id: i64,
    /// Queue handle.
    pub queue_id: i64,
    /// Stream handle.
    pub stream_id: i64,
    /// Start ns.
    pub start: i64,
    /// End ns.
    pub end: i64,
    /// Dynamic scratch.
    pub private_segment_size: i64,
    /// Dynamic LDS.
    pub group_segment_size: i64,
    /// Workgroup size.
    pub workgroup: [i64; 3],
    /// Grid size.
    pub grid: [i64; 3],
    /// Region name string id.
    pub region_name_id: Option<i64>,
    /// Category string id.
    pub category_id: Option<i64>,
    /// Correlation ids.
    pub corr: Correlation,
}

/// An API call (region or sample).
#[derive(Debug, Clone, Default)]
pub struct ApiRow {
    /// Row id (internal correlation id).
    pub id: i64,
    /// pid.
    pub pid: i64,
    /// tid.
    pub tid: i64,
    /// Start ns.
    pub start: i64,
    /// End ns.
    pub end: i64,
    /// Operation-name string id.
    pub name_id: Option<i64>,
    /// Category (kind) string id.
    pub category_id: Option<i64>,
    /// Correlation ids.
    pub corr: Correlation,
    /// Marker message from the event's extdata, if any.
    pub message: Option<String>,
}

/// A memory copy row.
#[derive(Debug, Clone, Default)]
pub struct CopyRow {
    /// Row id.
    pub id: i64,
    /// pid.
    pub pid: i64,
    /// tid.
    pub tid: i64,
    /// Start ns.
    pub start: i64,
    /// End ns.
    pub end: i64,
    /// Operation-name string id.
    pub name_id: Option<i64>,
    /// Destination agent.
    pub dst_agent_id: Option<i64>,
    /// Destination address.
    pub dst_address: i64,
    /// Source agent.
    pub src_agent_id: Option<i64>,
    /// Source address.
    pub src_address: i64,
    /// Bytes.
    pub size: i64,
    /// Stream handle.
    pub stream_id: i64,
    /// Category string id.
    pub category_id: Option<i64>,
    /// Correlation ids.
    pub corr: Correlation,
}

/// A memory allocation row.
#[derive(Debug, Clone, Default)]
pub struct AllocRow {
    /// Row id.
    pub id: i64,
    /// pid.
    pub pid: i64,
    /// tid.
    pub tid: i64,
    /// Agent (allocations only).
    pub agent_id: Option<i64>,
    /// rocprofv3 operation name derived from type and level.
    pub operation: &'static str,
    /// Whether this is scratch memory.
    pub scratch: bool,
    /// Start ns.
    pub start: i64,
    /// End ns.
    pub end: i64,
    /// Address.
    pub address: i64,
    /// Bytes.
    pub size: i64,
    /// Queue handle.
    pub queue_id: i64,
    /// Stream handle.
    pub stream_id: i64,
    /// Scratch flags.
    pub flags: i64,
    /// Category string id.
    pub category_id: Option<i64>,
    /// Correlation ids.
    pub corr: Correlation,
}

/// One counter value of one dispatch, summed over instances.
#[derive(Debug, Clone, Default)]
pub struct CounterRow {
    /// The dispatch.
    pub dispatch: DispatchRow,
    /// Counter id.
    pub pmc_id: i64,
    /// Summed value.
    pub value: f64,
}

/// The `rocpd_event` columns the converters use.
#[derive(Debug, Clone, Default)]
pub(super) struct Event {
    /// Category (kind) string id.
    pub category_id: Option<i64>,
    /// Internal correlation id (rocpd keeps it in `stack_id`).
    pub stack_id: Option<i64>,
    /// Ancestor correlation id.
    pub parent_stack_id: i64,
    /// External correlation id.
    pub correlation_id: i64,
    /// Marker message from the event's extdata (only when asked for).
    pub message: Option<String>,
}

impl Event {
    /// Reads `category_id, stack_id, parent_stack_id, correlation_id` from columns `at..at + 4`.
    pub fn read(r: &Row, at: usize) -> rusqlite::Result<Event> {
        Ok(Event {
            category_id: opt(r, at)?,
            stack_id: opt(r, at + 1)?,
            parent_stack_id: int(r, at + 2)?,
            correlation_id: int(r, at + 3)?,
            message: None,
        })
    }
}

/// The correlation ids of a row with id `id` and event `e` (none: the row id, zeros).
pub(super) fn corr(e: Option<&Event>, id: i64) -> Correlation {
    match e {
        Some(e) => Correlation {
            internal: e.stack_id.unwrap_or(id),
            ancestor: e.parent_stack_id,
            external: e.correlation_id,
        },
        None => Correlation {
            internal: id,
            ancestor: 0,
            external: 0,
        },
    }
}

/// An integer cell; text is parsed, NULL and blobs are `None`.
pub(super) fn opt(r: &Row, i: usize) -> rusqlite::Result<Option<i64>> {
    match r.get_ref(i)? {
        ValueRef::Integer(v) => Ok(Some(v)),
        ValueRef::Null => Ok(None),
        ValueRef::Real(v) => Ok(Some(v as i64)),
        ValueRef::Text(t) => Ok(std::str::from_utf8(t)
            .ok()
            .and_then(|s| s.trim().parse().ok())),
        ValueRef::Blob(_) => Ok(None),
    }
}

/// An integer cell, 0 when absent.
pub(super) fn int(r: &Row, i: usize) -> rusqlite::Result<i64> {
    Ok(opt(r, i)?.unwrap_or(0))
}

/// A text cell (numbers printed, NULL as empty).
pub(super) fn text(r: &Row, i: usize) -> rusqlite::Result<String> {
    Ok(match r.get_ref(i)? {
        ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
        ValueRef::Integer(v) => v.to_string(),
        ValueRef::Real(v) => v.to_string(),
        _ => String::new(),
    })
}

/// The ROCTx message in an event's extdata JSON, if any (parsed only when the text mentions one).
pub(super) fn message(r: &Row, i: usize) -> rusqlite::Result<Option<String>> {
    Ok(roctx_message(r.get_ref(i)?))
}

/// The ROCTx message in an event's extdata cell, if any (parsed only when the text mentions one);
/// every converter reads markers' messages with it.
pub(crate) fn roctx_message(v: ValueRef<'_>) -> Option<String> {
    let ValueRef::Text(raw) = v else {
        return None;
    };
    if raw.len() <= 2 || !raw.windows(9).any(|w| w == b"\"message\"") {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct Ext {
        message: Option<serde_json::Value>,
    }
    serde_json::from_slice::<Ext>(raw)
        .ok()
        .and_then(|e| e.message)
        .map(|m| match m {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        })
}

/// The kernel-dispatch columns [`dispatch_row`] reads, the event id last (column 19).
pub(super) const KERNEL_COLS: &str = "K.id, K.pid, K.tid, K.agent_id, K.kernel_id, K.dispatch_id, K.queue_id, K.stream_id, \
    K.start, K.end, K.private_segment_size, K.group_segment_size, K.workgroup_size_x, K.workgroup_size_y, \
    K.workgroup_size_z, K.grid_size_x, K.grid_size_y, K.grid_size_z, K.region_name_id, K.event_id";

/// Column of the event id in [`KERNEL_COLS`].
pub(super) const KERNEL_EVENT_COL: usize = 19;

/// A dispatch from the [`KERNEL_COLS`] columns and its event.
pub(super) fn dispatch_row(r: &Row, e: Option<&Event>) -> rusqlite::Result<DispatchRow> {
    let id = int(r, 0)?;
    Ok(DispatchRow {
        id,
        pid: int(r, 1)?,
        tid: int(r, 2)?,
        agent_id: int(r, 3)?,
        kernel_id: int(r, 4)?,
        dispatch_id: int(r, 5)?,
        queue_id: int(r, 6)?,
        stream_id: int(r, 7)?,
        start: int(r, 8)?,
        end: int(r, 9)?,
        private_segment_size: int(r, 10)?,
        group_segment_size: int(r, 11)?,
        workgroup: [int(r, 12)?, int(r, 13)?, int(r, 14)?],
        grid: [int(r, 15)?, int(r, 16)?, int(r, 17)?],
        region_name_id: opt(r, 18)?,
        category_id: e.and_then(|e| e.category_id),
        corr: corr(e, id),
    })
}
