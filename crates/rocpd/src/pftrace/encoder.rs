//! One Perfetto packet sequence written as a stream of `Trace.packet` fields.
//!
//! A Perfetto trace file is a `Trace` message: a repeated `TracePacket` (field 1). Each packet is
//! encoded by prost as one length-delimited field 1 and appended to the file as soon as it is
//! complete, so the concatenation of any number of sequences is itself a valid trace and memory
//! does not grow with the trace. Event names, categories, debug-annotation names and repeated
//! annotation strings are interned per sequence (`InternedData`, sent with the first packet that
//! uses them).

use std::collections::HashMap;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};

use super::proto::{
    trace_packet, track_event, DebugAnnotationName, EventCategory, EventName, InternedData,
    InternedString, TracePacket, TrackDescriptor,
};
use super::wire;
use crate::reader::{IdHasher, IdMap};
use crate::{Error, Result};

const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;

/// A debug annotation (slice argument) to attach to an event.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    /// Signed integer.
    Int(&'static str, i64),
    /// Floating point.
    Double(&'static str, f64),
    /// A string from a small set (agent labels, kinds): interned.
    Interned(&'static str, &'a str),
    /// Any string with a dynamic name (function arguments).
    Str(&'a str, &'a str),
    /// Floating point with a dynamic, interned name (counter values).
    NamedDouble(&'a str, f64),
}

/// Slice or counter type of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Slice begin.
    Begin,
    /// Slice end.
    End,
    /// Instant.
    Instant,
    /// Counter value.
    Counter,
}

impl Kind {
    fn proto(self) -> i32 {
        (match self {
            Kind::Begin => track_event::Type::SliceBegin,
            Kind::End => track_event::Type::SliceEnd,
            Kind::Instant => track_event::Type::Instant,
            Kind::Counter => track_event::Type::Counter,
        }) as i32
    }
}

/// String-keyed map with the fast id hasher (names are not attacker-chosen keys).
type StrMap<V> = HashMap<String, V, std::hash::BuildHasherDefault<IdHasher>>;

#[derive(Clone, Default)]
struct Interning {
    names: StrMap<u64>,
    /// Caller-chosen numeric keys (e.g. source index and kernel id) to name iids.
    keyed: IdMap<u64, u64>,
    categories: HashMap<&'static str, u64>,
    arg_names: StrMap<u64>,
    /// Argument names that are `&'static str`s, by address (no hashing of the text).
    static_arg_names: IdMap<u64, u64>,
    strings: StrMap<u64>,
    next: u64,
}

/// A saved position to return to with [`Sequence::rollback`].
pub struct Checkpoint {
    pos: u64,
    interning: Interning,
    packets: u64,
}

/// One packet sequence written to a file.
pub struct Sequence {
    file: File,
    seq_id: u32,
    buf: Vec<u8>,
    /// Scratch buffers of [`Sequence::event`]: the track event, then its packet.
    event_buf: Vec<u8>,
    packet_buf: Vec<u8>,
    interned: InternedData,
    has_interned: bool,
    intern: Interning,
    /// Packets written so far.
    pub packets: u64,
    path_for_errors: std::path::PathBuf,
}

const FLUSH_AT: usize = 256 * 1024;

impl Sequence {
    /// Starts sequence `seq_id` at the current end of `file`; its first packet clears the
    /// incremental state.
    pub fn new(file: File, seq_id: u32, path_for_errors: &std::path::Path) -> Result<Sequence> {
        let mut s = Sequence {
            file,
            seq_id,
            buf: Vec::with_capacity(FLUSH_AT + 4096),
            event_buf: Vec::new(),
            packet_buf: Vec::new(),
            interned: InternedData::default(),
            has_interned: false,
            intern: Interning {
                next: 1,
                ..Default::default()
            },
            packets: 0,
            path_for_errors: path_for_errors.to_path_buf(),
        };
        s.start_sequence()?;
        Ok(s)
    }

    fn start_sequence(&mut self) -> Result<()> {
        let pkt = TracePacket {
            sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
            optional_trusted_packet_sequence_id: Some(
                trace_packet::OptionalTrustedPacketSequenceId::TrustedPacketSequenceId(self.seq_id),
            ),
            ..Default::default()
        };
        self.put(&pkt)
    }

    fn io(&self, e: std::io::Error) -> Error {
        crate::output::write_error(&self.path_for_errors, &e)
    }

    fn put(&mut self, pkt: &TracePacket) -> Result<()> {
        prost::encoding::message::encode(1, pkt, &mut self.buf);
        self.packets += 1;
        if self.buf.len() >= FLUSH_AT {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes buffered packets to the file.
    pub fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            let r = self.file.write_all(&self.buf);
            self.buf.clear();
            r.map_err(|e| self.io(e))?;
        }
        Ok(())
    }

    /// Flushes and returns the file (positioned at its end).
    pub fn finish(mut self) -> Result<File> {
        self.flush()?;
        Ok(self.file)
    }

    /// Remembers the current position and interning state.
    pub fn checkpoint(&mut self) -> Result<Checkpoint> {
        self.flush()?;
        let pos = self.file.stream_position().map_err(|e| self.io(e))?;
        Ok(Checkpoint {
            pos,
            interning: self.intern.clone(),
            packets: self.packets,
        })
    }

    /// Drops everything written since `cp`.
    pub fn rollback(&mut self, cp: Checkpoint) -> Result<()> {
        self.buf.clear();
        self.file.set_len(cp.pos).map_err(|e| self.io(e))?;
        self.file
            .seek(SeekFrom::Start(cp.pos))
            .map_err(|e| self.io(e))?;
        self.intern = cp.interning;
        self.packets = cp.packets;
        Ok(())
    }

    /// Writes a track descriptor.
    pub fn track(&mut self, desc: TrackDescriptor) -> Result<()> {
        let pkt = TracePacket {
            data: Some(trace_packet::Data::TrackDescriptor(desc)),
            optional_trusted_packet_sequence_id: Some(
                trace_packet::OptionalTrustedPacketSequenceId::TrustedPacketSequenceId(self.seq_id),
            ),
            ..Default::default()
        };
        self.put(&pkt)
    }

    fn new_iid(&mut self) -> u64 {
        let i = self.intern.next;
        self.intern.next += 1;
        i
    }

    /// The iid of an event name, interning it if new.
    pub fn name_iid(&mut self, name: &str) -> u64 {
        if let Some(&i) = self.intern.names.get(name) {
            return i;
        }
        let i = self.new_iid();
        self.intern.names.insert(name.to_owned(), i);
        self.interned.event_names.push(EventName {
            iid: Some(i),
            name: Some(name.to_owned()),
        });
        self.has_interned = true;
        i
    }

    /// The iid of the event name known under `key`; `name` is asked for only on the first use.
    pub fn keyed_name_iid<'n>(&mut self, key: u64, name: impl FnOnce() -> &'n str) -> u64 {
        if let Some(&i) = self.intern.keyed.get(&key) {
            return i;
        }
        let i = self.name_iid(name());
        self.intern.keyed.insert(key, i);
        i
    }

    fn category_iid(&mut self, cat: &'static str) -> u64 {
        if let Some(&i) = self.intern.categories.get(cat) {
            return i;
        }
        let i = self.new_iid();
        self.intern.categories.insert(cat, i);
        self.interned.event_categories.push(EventCategory {
            iid: Some(i),
            name: Some(cat.to_owned()),
        });
        self.has_interned = true;
        i
    }

    fn static_arg_name_iid(&mut self, name: &'static str) -> u64 {
        let key = name.as_ptr() as u64 ^ ((name.len() as u64) << 48);
        if let Some(&i) = self.intern.static_arg_names.get(&key) {
            return i;
        }
        let i = self.arg_name_iid(name);
        self.intern.static_arg_names.insert(key, i);
        i
    }

    fn arg_name_iid(&mut self, name: &str) -> u64 {
        if let Some(&i) = self.intern.arg_names.get(name) {
            return i;
        }
        let i = self.new_iid();
        self.intern.arg_names.insert(name.to_owned(), i);
        self.interned
            .debug_annotation_names
            .push(DebugAnnotationName {
                iid: Some(i),
                name: Some(name.to_owned()),
            });
        self.has_interned = true;
        i
    }

    fn string_iid(&mut self, s: &str) -> u64 {
        if let Some(&i) = self.intern.strings.get(s) {
            return i;
        }
        let i = self.new_iid();
        self.intern.strings.insert(s.to_owned(), i);
        self.interned
            .debug_annotation_string_values
            .push(InternedString {
                iid: Some(i),
                str: Some(s.as_bytes().to_vec()),
            });
        self.has_interned = true;
        i
    }

    /// Writes one track event. `name_iid` comes from [`Sequence::name_iid`] (0: no name, for slice
    /// ends and counters); `flows` are flow ids linking this event to others.
    ///
    /// The packet is encoded by hand ([`wire`]) into reused buffers, its fields in tag order as
    /// prost writes them: the bytes prost would write for the same `TracePacket` (a test
    /// compares them).
    #[allow(clippy::too_many_arguments)]
    pub fn event(
        &mut self,
        ts: i64,
        track: u64,
        kind: Kind,
        name_iid: u64,
        category: Option<&'static str>,
        args: &[Arg<'_>],
        flows: &[u64],
        counter: Option<f64>,
    ) -> Result<()> {
        let mut ev = std::mem::take(&mut self.event_buf);
        ev.clear();
        if let Some(c) = category {
            let iid = self.category_iid(c);
            wire::uint(&mut ev, 3, iid);
        }
        for a in args {
            let (name, value) = match *a {
                Arg::Int(n, v) => (self.static_arg_name_iid(n), wire::Value::Int(v)),
                Arg::Double(n, v) => (self.static_arg_name_iid(n), wire::Value::Double(v)),
                Arg::NamedDouble(n, v) => (self.arg_name_iid(n), wire::Value::Double(v)),
                Arg::Interned(n, v) => (
                    self.static_arg_name_iid(n),
                    wire::Value::StrIid(self.string_iid(v)),
                ),
                Arg::Str(n, v) => (self.arg_name_iid(n), wire::Value::Str(v)),
            };
            wire::annotation(&mut ev, name, value);
        }
        wire::uint(&mut ev, 9, kind.proto() as u64);
        if name_iid != 0 {
            wire::uint(&mut ev, 10, name_iid);
        }
        wire::uint(&mut ev, 11, track);
        match counter {
            Some(v) if v.fract() == 0.0 && v.abs() < 9.0e15 => {
                wire::uint(&mut ev, 30, v as i64 as u64)
            }
            Some(v) => wire::fixed64(&mut ev, 44, v.to_bits()),
            None => {}
        }
        for &f in flows {
            wire::fixed64(&mut ev, 47, f);
        }
        let mut pkt = std::mem::take(&mut self.packet_buf);
        pkt.clear();
        wire::uint(&mut pkt, 8, ts.max(0) as u64);
        wire::uint(&mut pkt, 10, u64::from(self.seq_id));
        wire::bytes(&mut pkt, 11, &ev);
        if self.has_interned {
            self.has_interned = false;
            prost::encoding::message::encode(12, &self.interned, &mut pkt);
            self.interned = InternedData::default();
        }
        // Only packets that refer to interned data depend on the sequence's state.
        if name_iid != 0 || category.is_some() || !args.is_empty() {
            wire::uint(&mut pkt, 13, u64::from(SEQ_NEEDS_INCREMENTAL_STATE));
        }
        wire::bytes(&mut self.buf, 1, &pkt);
        self.event_buf = ev;
        self.packet_buf = pkt;
        self.packets += 1;
        if self.buf.len() >= FLUSH_AT {
            self.flush()?;
        }
        Ok(())
    }
}
