//! Track identities and descriptors: one process track per process, thread tracks under it,
//! kernel tracks per stream (or per agent and queue), copy tracks, and counter tracks.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use super::encoder::Sequence;
use super::proto::{
    counter_descriptor, track_descriptor, CounterDescriptor, ProcessDescriptor, ThreadDescriptor,
    TrackDescriptor,
};
use crate::reader::{AgentIndex, Dims, IdHasher, IdMap};
use crate::Result;

/// 64-bit FNV-1a over words: stable track and flow ids.
pub fn fnv(words: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for w in words {
        for b in w.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// What a track shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TrackKey {
    /// A CPU thread (API calls, markers).
    Thread(i64),
    /// Kernels of one stream.
    Stream(i64),
    /// Kernels of one queue of one agent (`--group-by-queue`).
    Queue(i64, i64),
    /// Copies of one stream.
    CopyStream(i64),
    /// Copies to one agent issued by one thread (`--group-by-queue`).
    CopyThread(i64, i64),
    /// Bytes being copied to an agent (counter).
    CopyBytes(i64),
    /// Bytes allocated on an agent (counter); `None`: frees of unknown allocations.
    Allocated(Option<i64>),
    /// Scratch memory on an agent (counter).
    Scratch(i64),
    /// One PMC counter of one agent.
    Pmc(i64, i64),
    /// One sampled counter (`--spm`, table `rocpd_spm_sample`) of one agent: its index in
    /// [`Declared::spm_names`].
    Spm(i64, usize),
}

/// The process-level identity of one source.
pub struct ProcessIds {
    /// Process track uuid.
    pub uuid: u64,
    /// pid.
    pub pid: i64,
}

impl ProcessIds {
    /// Ids for the `index`-th process (in GUID order) with `pid`.
    pub fn new(index: usize, pid: i64) -> ProcessIds {
        ProcessIds {
            uuid: (index as u64 + 1) << 24,
            pid,
        }
    }

    /// The id of the flow from the API call with internal correlation id `stack_id` to the
    /// work it launched (unique across merged processes).
    pub fn flow(&self, stack_id: i64) -> u64 {
        fnv(&[self.uuid, 0xf10, stack_id as u64])
    }
}

/// The process track descriptor.
pub fn process_descriptor(ids: &ProcessIds, command: &str, init: i64) -> TrackDescriptor {
    let argv0 = command.split_whitespace().next().unwrap_or("");
    let name = argv0.rsplit('/').next().unwrap_or(argv0);
    TrackDescriptor {
        uuid: Some(ids.uuid),
        process: Some(ProcessDescriptor {
            pid: Some(ids.pid as i32),
            cmdline: command.split_whitespace().map(str::to_owned).collect(),
            process_name: Some(if name.is_empty() {
                format!("process {}", ids.pid)
            } else {
                name.to_owned()
            }),
            start_timestamp_ns: Some(init),
        }),
        ..Default::default()
    }
}

/// `AGENT [<index>] (<type>)` with the index chosen by `--agent-index-value`.
pub fn agent_name(dims: &Dims, id: i64, index: AgentIndex) -> String {
    match dims.agents.get(&id) {
        Some(a) => {
            let i = match index {
                AgentIndex::Relative => a.logical_index,
                AgentIndex::Absolute => a.absolute_index,
                AgentIndex::TypeRelative => a.type_index,
            };
            format!("AGENT [{i}] ({})", a.agent_type)
        }
        None => format!("AGENT [{id}]"),
    }
}

/// The tracks one packet sequence has declared, and per-process ordinals for names.
///
/// Track uuids are small numbers, so every event's `track_uuid` is short on the wire:
/// `(process number << 24) | (sequence id << 20) | n`. Each track is written by one sequence
/// only, so sequences never need to agree on a uuid.
#[derive(Default, Clone)]
pub struct Declared {
    /// Looked up for every event: keyed with the fast id hasher.
    seen: HashMap<TrackKey, u64, BuildHasherDefault<IdHasher>>,
    seq_bits: u64,
    threads: IdMap<i64, i64>,
    queues: IdMap<i64, IdMap<i64, i64>>,
    /// The names of the sampled counters of the process being written (`TrackKey::Spm`).
    pub spm_names: Vec<String>,
}

impl Declared {
    /// Tracks of packet sequence `seq_id` (1..15).
    pub fn new(seq_id: u32) -> Declared {
        Declared {
            seq_bits: u64::from(seq_id & 0xf) << 20,
            ..Default::default()
        }
    }

    /// Forgets the previous process's tracks and ordinals.
    pub fn next_process(&mut self) {
        self.seen.clear();
        self.threads.clear();
        self.queues.clear();
    }

    /// Ordinal of a thread in order of first appearance (the main thread is 0).
    fn thread_ordinal(&mut self, pid: i64, tid: i64) -> i64 {
        if tid == pid {
            return 0;
        }
        let n = self.threads.len() as i64 + 1;
        *self.threads.entry(tid).or_insert(n)
    }

    /// The uuid of `key`, writing its descriptor first if this sequence has not yet.
    pub fn get(
        &mut self,
        seq: &mut Sequence,
        ids: &ProcessIds,
        dims: &Dims,
        index: AgentIndex,
        key: TrackKey,
    ) -> Result<u64> {
        if let Some(&uuid) = self.seen.get(&key) {
            return Ok(uuid);
        }
        let uuid = self.new_uuid(ids, dims, key);
        self.seen.insert(key, uuid);
        let desc = self.descriptor(uuid, ids, dims, index, key);
        seq.track(desc)?;
        Ok(uuid)
    }

    /// The uuid of a track not declared yet.
    fn new_uuid(&self, ids: &ProcessIds, dims: &Dims, key: TrackKey) -> u64 {
        match key {
            // Counter tracks of PMC counters get the same uuid in every sequence (kernel shards
            // share them); each counter belongs to one agent, so its position identifies it.
            TrackKey::Pmc(_, p) => {
                let pos = dims
                    .pmcs
                    .iter()
                    .position(|(id, _)| *id == p)
                    .unwrap_or(0xffff);
                ids.uuid | (0xf << 20) | pos as u64
            }
            _ => ids.uuid | self.seq_bits | (self.seen.len() as u64 + 1),
        }
    }

    /// The descriptor of track `key`: a thread, or a named track (a counter for byte counts and
    /// PMC counters) under the process.
    fn descriptor(
        &mut self,
        uuid: u64,
        ids: &ProcessIds,
        dims: &Dims,
        index: AgentIndex,
        key: TrackKey,
    ) -> TrackDescriptor {
        let bytes = || {
            Some(CounterDescriptor {
                unit: Some(counter_descriptor::Unit::SizeBytes as i32),
                ..Default::default()
            })
        };
        let named = |name: String, counter: Option<CounterDescriptor>| TrackDescriptor {
            uuid: Some(uuid),
            parent_uuid: Some(ids.uuid),
            static_or_dynamic_name: Some(track_descriptor::StaticOrDynamicName::Name(name)),
            counter,
            ..Default::default()
        };
        match key {
            TrackKey::Thread(tid) => self.thread(uuid, ids, dims, tid),
            TrackKey::Stream(s) => named(format!("STREAM [{s}]"), None),
            TrackKey::Queue(a, q) => {
                let per_agent = self.queues.entry(a).or_default();
                let n = per_agent.len() as i64;
                let n = *per_agent.entry(q).or_insert(n);
                let agent = agent_name(dims, a, index);
                named(format!("COMPUTE {agent} QUEUE [{n}]"), None)
            }
            TrackKey::CopyStream(s) => named(format!("MEMORY COPY STREAM [{s}]"), None),
            TrackKey::CopyThread(a, t) => {
                let n = self.thread_ordinal(ids.pid, t);
                let agent = agent_name(dims, a, index);
                named(format!("COPY to {agent} THREAD [{n}]"), None)
            }
            TrackKey::CopyBytes(a) => named(
                format!("COPY BYTES to {}", agent_name(dims, a, index)),
                bytes(),
            ),
            TrackKey::Allocated(Some(a)) => named(
                format!("ALLOCATED BYTES on {}", agent_name(dims, a, index)),
                bytes(),
            ),
            TrackKey::Allocated(None) => named(
                "FREED BYTES of allocations made before the trace".to_owned(),
                bytes(),
            ),
            TrackKey::Scratch(a) => named(
                format!("SCRATCH MEMORY on {}", agent_name(dims, a, index)),
                bytes(),
            ),
            TrackKey::Pmc(a, p) => {
                let counter = dims
                    .pmcs
                    .iter()
                    .find(|(id, _)| *id == p)
                    .map(|(_, c)| c.name.as_str())
                    .unwrap_or("?");
                named(
                    format!("{} PMC {counter}", agent_name(dims, a, index)),
                    Some(CounterDescriptor::default()),
                )
            }
            TrackKey::Spm(a, i) => {
                let counter = self.spm_names.get(i).map_or("?", String::as_str);
                named(
                    format!("{} SPM {counter}", agent_name(dims, a, index)),
                    Some(CounterDescriptor::default()),
                )
            }
        }
    }

    /// The descriptor of thread `tid`'s track: the main thread named after the command, the
    /// others numbered.
    fn thread(&mut self, uuid: u64, ids: &ProcessIds, dims: &Dims, tid: i64) -> TrackDescriptor {
        let n = self.thread_ordinal(ids.pid, tid);
        let name = if n == 0 {
            let argv0 = dims.process.command.split_whitespace().next().unwrap_or("");
            argv0.rsplit('/').next().unwrap_or("main").to_owned()
        } else {
            format!("THREAD {n}")
        };
        TrackDescriptor {
            uuid: Some(uuid),
            thread: Some(ThreadDescriptor {
                pid: Some(ids.pid as i32),
                tid: Some(tid),
                thread_name: Some(name),
            }),
            ..Default::default()
        }
    }
}
