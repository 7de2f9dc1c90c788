//! The rocpd schema (version 3, ROCm 7.0): table DDL, the plain `rocpd_*` views, the data views
//! the converters of ROCm's `rocpd` package read, and the summary views.
//!
//! The SQL is a template with two placeholders, exactly like ROCm's schema files: `{{uuid}}` (the
//! table-name suffix, `_` + the GUID with `-` replaced by `_`) and `{{guid}}` (the hyphenated GUID,
//! baked into every table's `guid` column default). The defaults are written as double-quoted
//! string literals, as in ROCm's files, so loading the DDL needs SQLite's "DQS" compatibility; the
//! bundled SQLite enables it and [`load`] turns it on explicitly as well.

use rusqlite::config::DbConfig;
use rusqlite::Connection;

/// The `schema_version` metadata value written by ROCm 7.0 and later (and by us).
pub const SCHEMA_VERSION: &str = "3";

/// Base names of the physical tables, each stored as `<base><uuid suffix>`.
pub const TABLES: [&str; 20] = [
    "rocpd_metadata",
    "rocpd_string",
    "rocpd_info_node",
    "rocpd_info_process",
    "rocpd_info_thread",
    "rocpd_info_agent",
    "rocpd_info_queue",
    "rocpd_info_stream",
    "rocpd_info_pmc",
    "rocpd_info_code_object",
    "rocpd_info_kernel_symbol",
    "rocpd_track",
    "rocpd_event",
    "rocpd_arg",
    "rocpd_pmc_event",
    "rocpd_region",
    "rocpd_sample",
    "rocpd_kernel_dispatch",
    "rocpd_memory_copy",
    "rocpd_memory_allocate",
];

/// The data views created on top of the `rocpd_*` views (what `rocpd convert`/`summary` query).
pub const DATA_VIEWS: [&str; 21] = [
    "code_objects",
    "kernel_symbols",
    "processes",
    "threads",
    "regions",
    "region_args",
    "samples",
    "sample_regions",
    "regions_and_samples",
    "kernels",
    "pmc_info",
    "pmc_events",
    "events_args",
    "stream_args",
    "memory_copies",
    "memory_allocations",
    "scratch_memory",
    "counters_collection",
    "top_kernels",
    "busy",
    "top",
];

/// Physical tables. Column names, types, constraints and defaults follow ROCm 7.0's schema.
const TABLES_SQL: &str = r#"
PRAGMA foreign_keys = ON;
CREATE TABLE IF NOT EXISTS "rocpd_metadata{{uuid}}" (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "tag" TEXT NOT NULL,
  "value" TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS `rocpd_string{{uuid}}` (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
  "string" TEXT NOT NULL UNIQUE ON CONFLICT ABORT);
CREATE TABLE IF NOT EXISTS `rocpd_info_node{{uuid}}` (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
  "hash" BIGINT NOT NULL UNIQUE,
  "machine_id" TEXT NOT NULL UNIQUE,
  "system_name" TEXT, "hostname" TEXT, "release" TEXT, "version" TEXT,
  "hardware_name" TEXT, "domain_name" TEXT);
CREATE TABLE IF NOT EXISTS `rocpd_info_process{{uuid}}` (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
  "nid" INTEGER NOT NULL, "ppid" INTEGER, "pid" INTEGER NOT NULL,
  "init" BIGINT, "fini" BIGINT, "start" BIGINT, "end" BIGINT, "command" TEXT,
  "environment" JSONB DEFAULT "{}" NOT NULL,
  "extdata" JSONB DEFAULT "{}" NOT NULL,
  FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE);
CREATE TABLE IF NOT EXISTS `rocpd_info_thread{{uuid}}` (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
  "nid" INTEGER NOT NULL, "ppid" INTEGER, "pid" INTEGER NOT NULL, "tid" INTEGER NOT NULL,
  "name" TEXT, "start" BIGINT, "end" BIGINT,
  "extdata" JSONB DEFAULT "{}" NOT NULL,
  FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (pid) REFERENCES `rocpd_info_process{{uuid}}` (id) ON UPDATE CASCADE);
CREATE TABLE IF NOT EXISTS `rocpd_info_agent{{uuid}}` (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL,
  "type" TEXT CHECK ("type" IN ('CPU', 'GPU')),
  "absolute_index" INTEGER, "logical_index" INTEGER, "type_index" INTEGER, "uuid" INTEGER,
  "name" TEXT, "model_name" TEXT, "vendor_name" TEXT, "product_name" TEXT, "user_name" TEXT,
  "extdata" JSONB DEFAULT "{}" NOT NULL,
  FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (pid) REFERENCES `rocpd_info_process{{uuid}}` (id) ON UPDATE CASCADE);
CREATE TABLE IF NOT EXISTS `rocpd_info_queue{{uuid}}` (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "name" TEXT,
  "extdata" JSONB DEFAULT "{}" NOT NULL,
  FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (pid) REFERENCES `rocpd_info_process{{uuid}}` (id) ON UPDATE CASCADE);
CREATE TABLE IF NOT EXISTS `rocpd_info_stream{{uuid}}` (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "name" TEXT,
  "extdata" JSONB DEFAULT "{}" NOT NULL,
  FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (pid) REFERENCES `rocpd_info_process{{uuid}}` (id) ON UPDATE CASCADE);
CREATE TABLE IF NOT EXISTS `rocpd_info_pmc{{uuid}}` (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "agent_id" INTEGER,
  "target_arch" TEXT CHECK ("target_arch" IN ('CPU', 'GPU')),
  "event_code" INT, "instance_id" INTEGER,
  "name" TEXT NOT NULL, "symbol" TEXT NOT NULL, "description" TEXT,
  "long_description" TEXT DEFAULT "", "component" TEXT, "units" TEXT DEFAULT "",
  "value_type" TEXT CHECK ("value_type" IN ('ABS', 'ACCUM', 'RELATIVE')),
  "block" TEXT, "expression" TEXT, "is_constant" INTEGER, "is_derived" INTEGER,
  "extdata" JSONB DEFAULT "{}" NOT NULL,
  FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (pid) REFERENCES `rocpd_info_process{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (agent_id) REFERENCES `rocpd_info_agent{{uuid}}` (id) ON UPDATE CASCADE);
CREATE TABLE IF NOT EXISTS `rocpd_info_code_object{{uuid}}` (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "agent_id" INTEGER, "uri" TEXT,
  "load_base" BIGINT, "load_size" BIGINT, "load_delta" BIGINT,
  "storage_type" TEXT CHECK ("storage_type" IN ('FILE', 'MEMORY')),
  "extdata" JSONB DEFAULT "{}" NOT NULL,
  FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (pid) REFERENCES `rocpd_info_process{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (agent_id) REFERENCES `rocpd_info_agent{{uuid}}` (id) ON UPDATE CASCADE);
CREATE TABLE IF NOT EXISTS `rocpd_info_kernel_symbol{{uuid}}` (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "code_object_id" INTEGER NOT NULL,
  "kernel_name" TEXT, "display_name" TEXT, "kernel_object" INTEGER,
  "kernarg_segment_size" INTEGER, "kernarg_segment_alignment" INTEGER,
  "group_segment_size" INTEGER, "private_segment_size" INTEGER, "sgpr_count" INTEGER,
  "arch_vgpr_count" INTEGER, "accum_vgpr_count" INTEGER,
  "extdata" JSONB DEFAULT "{}" NOT NULL,
  FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (pid) REFERENCES `rocpd_info_process{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (code_object_id) REFERENCES `rocpd_info_code_object{{uuid}}` (id) ON UPDATE CASCADE);
CREATE TABLE IF NOT EXISTS `rocpd_track{{uuid}}` (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
  "nid" INTEGER NOT NULL, "pid" INTEGER, "tid" INTEGER, "name_id" INTEGER,
  "extdata" JSONB DEFAULT "{}" NOT NULL,
  FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (pid) REFERENCES `rocpd_info_process{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (tid) REFERENCES `rocpd_info_thread{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (name_id) REFERENCES `rocpd_string{{uuid}}` (id) ON UPDATE CASCADE);
CREATE TABLE IF NOT EXISTS `rocpd_event{{uuid}}` (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
  "category_id" INTEGER, "stack_id" INTEGER, "parent_stack_id" INTEGER, "correlation_id" INTEGER,
  "call_stack" JSONB DEFAULT "{}" NOT NULL,
  "line_info" JSONB DEFAULT "{}" NOT NULL,
  "extdata" JSONB DEFAULT "{}" NOT NULL,
  FOREIGN KEY (category_id) REFERENCES `rocpd_string{{uuid}}` (id) ON UPDATE CASCADE);
CREATE TABLE IF NOT EXISTS `rocpd_arg{{uuid}}` (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
  "event_id" INTEGER NOT NULL, "position" INTEGER NOT NULL,
  "type" TEXT NOT NULL, "name" TEXT NOT NULL, "value" TEXT,
  "extdata" JSONB DEFAULT "{}" NOT NULL,
  FOREIGN KEY (event_id) REFERENCES `rocpd_event{{uuid}}` (id) ON UPDATE CASCADE);
CREATE TABLE IF NOT EXISTS `rocpd_pmc_event{{uuid}}` (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
  "event_id" INTEGER, "pmc_id" INTEGER NOT NULL, "value" REAL DEFAULT 0.0,
  "extdata" JSONB DEFAULT "{}",
  FOREIGN KEY (pmc_id) REFERENCES `rocpd_info_pmc{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (event_id) REFERENCES `rocpd_event{{uuid}}` (id) ON UPDATE CASCADE);
CREATE TABLE IF NOT EXISTS `rocpd_region{{uuid}}` (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER NOT NULL,
  "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, "name_id" INTEGER NOT NULL, "event_id" INTEGER,
  "extdata" JSONB DEFAULT "{}" NOT NULL,
  FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (pid) REFERENCES `rocpd_info_process{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (tid) REFERENCES `rocpd_info_thread{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (name_id) REFERENCES `rocpd_string{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (event_id) REFERENCES `rocpd_event{{uuid}}` (id) ON UPDATE CASCADE);
CREATE TABLE IF NOT EXISTS `rocpd_sample{{uuid}}` (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
  "track_id" INTEGER NOT NULL, "timestamp" BIGINT NOT NULL, "event_id" INTEGER,
  "extdata" JSONB DEFAULT "{}" NOT NULL,
  FOREIGN KEY (track_id) REFERENCES `rocpd_track{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (event_id) REFERENCES `rocpd_event{{uuid}}` (id) ON UPDATE CASCADE);
CREATE TABLE IF NOT EXISTS `rocpd_kernel_dispatch{{uuid}}` (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER,
  "agent_id" INTEGER NOT NULL, "kernel_id" INTEGER NOT NULL, "dispatch_id" INTEGER NOT NULL,
  "queue_id" INTEGER NOT NULL, "stream_id" INTEGER NOT NULL,
  "start" BIGINT NOT NULL, "end" BIGINT NOT NULL,
  "private_segment_size" INTEGER, "group_segment_size" INTEGER,
  "workgroup_size_x" INTEGER NOT NULL, "workgroup_size_y" INTEGER NOT NULL,
  "workgroup_size_z" INTEGER NOT NULL, "grid_size_x" INTEGER NOT NULL,
  "grid_size_y" INTEGER NOT NULL, "grid_size_z" INTEGER NOT NULL,
  "region_name_id" INTEGER, "event_id" INTEGER,
  "extdata" JSONB DEFAULT "{}" NOT NULL,
  FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (pid) REFERENCES `rocpd_info_process{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (tid) REFERENCES `rocpd_info_thread{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (agent_id) REFERENCES `rocpd_info_agent{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (kernel_id) REFERENCES `rocpd_info_kernel_symbol{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (queue_id) REFERENCES `rocpd_info_queue{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (stream_id) REFERENCES `rocpd_info_stream{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (region_name_id) REFERENCES `rocpd_string{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (event_id) REFERENCES `rocpd_event{{uuid}}` (id) ON UPDATE CASCADE);
CREATE TABLE IF NOT EXISTS `rocpd_memory_copy{{uuid}}` (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER,
  "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, "name_id" INTEGER NOT NULL,
  "dst_agent_id" INTEGER, "dst_address" INTEGER, "src_agent_id" INTEGER, "src_address" INTEGER,
  "size" INTEGER NOT NULL, "queue_id" INTEGER, "stream_id" INTEGER,
  "region_name_id" INTEGER, "event_id" INTEGER,
  "extdata" JSONB DEFAULT "{}" NOT NULL,
  FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (pid) REFERENCES `rocpd_info_process{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (tid) REFERENCES `rocpd_info_thread{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (name_id) REFERENCES `rocpd_string{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (dst_agent_id) REFERENCES `rocpd_info_agent{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (src_agent_id) REFERENCES `rocpd_info_agent{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (stream_id) REFERENCES `rocpd_info_stream{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (queue_id) REFERENCES `rocpd_info_queue{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (region_name_id) REFERENCES `rocpd_string{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (event_id) REFERENCES `rocpd_event{{uuid}}` (id) ON UPDATE CASCADE);
CREATE TABLE IF NOT EXISTS `rocpd_memory_allocate{{uuid}}` (
  "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
  "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
  "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER, "agent_id" INTEGER,
  "type" TEXT CHECK ("type" IN ('ALLOC', 'FREE', 'REALLOC', 'RECLAIM')),
  "level" TEXT CHECK ("level" IN ('REAL', 'VIRTUAL', 'SCRATCH')),
  "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, "address" INTEGER, "size" INTEGER NOT NULL,
  "queue_id" INTEGER, "stream_id" INTEGER, "event_id" INTEGER,
  "extdata" JSONB DEFAULT "{}" NOT NULL,
  FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (pid) REFERENCES `rocpd_info_process{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (tid) REFERENCES `rocpd_info_thread{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (agent_id) REFERENCES `rocpd_info_agent{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (stream_id) REFERENCES `rocpd_info_stream{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (queue_id) REFERENCES `rocpd_info_queue{{uuid}}` (id) ON UPDATE CASCADE,
  FOREIGN KEY (event_id) REFERENCES `rocpd_event{{uuid}}` (id) ON UPDATE CASCADE);
INSERT INTO "rocpd_metadata{{uuid}}" ("tag", "value") VALUES ("schema_version", "3");
INSERT INTO "rocpd_metadata{{uuid}}" ("tag", "value") VALUES ("uuid", "{{uuid}}");
INSERT INTO "rocpd_metadata{{uuid}}" ("tag", "value") VALUES ("guid", "{{guid}}");
"#;

/// Data views over the unsuffixed `rocpd_*` views. Every join also matches `guid`, so the views
/// stay correct over merged databases where ids are unique per process only.
const DATA_VIEWS_SQL: &str = r#"
CREATE VIEW IF NOT EXISTS `code_objects` AS
SELECT CO.id, CO.guid, CO.nid, P.pid, A.absolute_index AS agent_abs_index, CO.uri, CO.load_base,
  CO.load_size, CO.load_delta, CO.storage_type AS storage_type_str,
  JSON_EXTRACT(CO.extdata, '$.size') AS code_object_size,
  JSON_EXTRACT(CO.extdata, '$.storage_type') AS storage_type,
  JSON_EXTRACT(CO.extdata, '$.memory_base') AS memory_base,
  JSON_EXTRACT(CO.extdata, '$.memory_size') AS memory_size
FROM `rocpd_info_code_object` CO
  JOIN `rocpd_info_agent` A ON A.id = CO.agent_id AND A.guid = CO.guid
  JOIN `rocpd_info_process` P ON P.id = CO.pid AND P.guid = CO.guid;

CREATE VIEW IF NOT EXISTS `kernel_symbols` AS
SELECT KS.id, KS.guid, KS.nid, P.pid, KS.code_object_id, KS.kernel_name, KS.display_name,
  KS.kernel_object, KS.kernarg_segment_size, KS.kernarg_segment_alignment, KS.group_segment_size,
  KS.private_segment_size, KS.sgpr_count, KS.arch_vgpr_count, KS.accum_vgpr_count,
  JSON_EXTRACT(KS.extdata, '$.size') AS kernel_symbol_size,
  JSON_EXTRACT(KS.extdata, '$.kernel_id') AS kernel_id,
  JSON_EXTRACT(KS.extdata, '$.kernel_code_entry_byte_offset') AS kernel_code_entry_byte_offset,
  JSON_EXTRACT(KS.extdata, '$.formatted_kernel_name') AS formatted_kernel_name,
  JSON_EXTRACT(KS.extdata, '$.demangled_kernel_name') AS demangled_kernel_name,
  JSON_EXTRACT(KS.extdata, '$.truncated_kernel_name') AS truncated_kernel_name,
  JSON_EXTRACT(KS.extdata, '$.kernel_address.handle') AS kernel_address
FROM `rocpd_info_kernel_symbol` KS
  JOIN `rocpd_info_process` P ON P.id = KS.pid AND P.guid = KS.guid;

CREATE VIEW IF NOT EXISTS `processes` AS
SELECT N.id AS nid, N.machine_id, N.system_name, N.hostname, N.release AS system_release,
  N.version AS system_version, P.guid, P.ppid, P.pid, P.init, P.start, P.end, P.fini, P.command
FROM `rocpd_info_process` P
  JOIN `rocpd_info_node` N ON N.id = P.nid AND N.guid = P.guid;

CREATE VIEW IF NOT EXISTS `threads` AS
SELECT N.id AS nid, N.machine_id, N.system_name, N.hostname, N.release AS system_release,
  N.version AS system_version, P.guid, P.ppid, P.pid, T.tid, T.start, T.end, T.name
FROM `rocpd_info_thread` T
  JOIN `rocpd_info_process` P ON P.id = T.pid AND P.guid = T.guid
  JOIN `rocpd_info_node` N ON N.id = T.nid AND N.guid = T.guid;

CREATE VIEW IF NOT EXISTS `regions` AS
SELECT R.id, R.guid,
  (SELECT string FROM `rocpd_string` RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
  S.string AS name, R.nid, P.pid, T.tid, R.start, R.end, (R.end - R.start) AS duration,
  R.event_id, E.stack_id, E.parent_stack_id, E.correlation_id AS corr_id, E.extdata,
  E.call_stack, E.line_info
FROM `rocpd_region` R
  JOIN `rocpd_event` E ON E.id = R.event_id AND E.guid = R.guid
  JOIN `rocpd_string` S ON S.id = R.name_id AND S.guid = R.guid
  JOIN `rocpd_info_process` P ON P.id = R.pid AND P.guid = R.guid
  JOIN `rocpd_info_thread` T ON T.id = R.tid AND T.guid = R.guid;

CREATE VIEW IF NOT EXISTS `region_args` AS
SELECT R.id, R.guid, R.nid, P.pid, A.type, A.name, A.value
FROM `rocpd_region` R
  JOIN `rocpd_event` E ON E.id = R.event_id AND E.guid = R.guid
  JOIN `rocpd_arg` A ON A.event_id = E.id AND A.guid = R.guid
  JOIN `rocpd_info_process` P ON P.id = R.pid AND P.guid = R.guid;

CREATE VIEW IF NOT EXISTS `samples` AS
SELECT R.id, R.guid,
  (SELECT string FROM `rocpd_string` RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
  (SELECT string FROM `rocpd_string` RS WHERE RS.id = T.name_id AND RS.guid = T.guid) AS name,
  T.nid, P.pid, TH.tid, R.timestamp, R.event_id, E.stack_id, E.parent_stack_id,
  E.correlation_id AS corr_id, E.extdata, E.call_stack, E.line_info
FROM `rocpd_sample` R
  JOIN `rocpd_track` T ON T.id = R.track_id AND T.guid = R.guid
  JOIN `rocpd_event` E ON E.id = R.event_id AND E.guid = R.guid
  JOIN `rocpd_info_process` P ON P.id = T.pid AND P.guid = T.guid
  JOIN `rocpd_info_thread` TH ON TH.id = T.tid AND TH.guid = T.guid;

CREATE VIEW IF NOT EXISTS `sample_regions` AS
SELECT id, guid, category, name, nid, pid, tid, timestamp AS start, timestamp AS END,
  0 AS duration, event_id, stack_id, parent_stack_id, corr_id, extdata, call_stack, line_info
FROM `samples`;

CREATE VIEW IF NOT EXISTS `regions_and_samples` AS
SELECT * FROM `regions` UNION ALL SELECT * FROM `sample_regions`;

CREATE VIEW IF NOT EXISTS `kernels` AS
SELECT K.id, K.guid, T.tid,
  (SELECT string FROM `rocpd_string` RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
  R.string AS region, S.display_name AS name, K.nid, P.pid,
  A.absolute_index AS agent_abs_index, A.logical_index AS agent_log_index,
  A.type_index AS agent_type_index, A.type AS agent_type, S.code_object_id, K.kernel_id,
  K.dispatch_id, K.stream_id, K.queue_id, Q.name AS queue, ST.name AS stream, K.start, K.end,
  (K.end - K.start) AS duration, K.grid_size_x AS grid_x, K.grid_size_y AS grid_y,
  K.grid_size_z AS grid_z, K.workgroup_size_x AS workgroup_x, K.workgroup_size_y AS workgroup_y,
  K.workgroup_size_z AS workgroup_z, K.group_segment_size AS lds_size,
  K.private_segment_size AS scratch_size, S.arch_vgpr_count AS vgpr_count, S.accum_vgpr_count,
  S.sgpr_count, S.group_segment_size AS static_lds_size,
  S.private_segment_size AS static_scratch_size, E.stack_id, E.parent_stack_id,
  E.correlation_id AS corr_id
FROM `rocpd_kernel_dispatch` K
  JOIN `rocpd_info_agent` A ON A.id = K.agent_id AND A.guid = K.guid
  JOIN `rocpd_event` E ON E.id = K.event_id AND E.guid = K.guid
  JOIN `rocpd_string` R ON R.id = K.region_name_id AND R.guid = K.guid
  JOIN `rocpd_info_kernel_symbol` S ON S.id = K.kernel_id AND S.guid = K.guid
  LEFT JOIN `rocpd_info_stream` ST ON ST.id = K.stream_id AND ST.guid = K.guid
  LEFT JOIN `rocpd_info_queue` Q ON Q.id = K.queue_id AND Q.guid = K.guid
  JOIN `rocpd_info_process` P ON P.id = Q.pid AND P.guid = Q.guid
  JOIN `rocpd_info_thread` T ON T.id = K.tid AND T.guid = K.guid;

CREATE VIEW IF NOT EXISTS `pmc_info` AS
SELECT PI.id, PI.guid, PI.nid, P.pid, A.absolute_index AS agent_abs_index, PI.is_constant,
  PI.is_derived, PI.name, PI.description, PI.block, PI.expression
FROM `rocpd_info_pmc` PI
  JOIN `rocpd_info_agent` A ON A.id = PI.agent_id AND A.guid = PI.guid
  JOIN `rocpd_info_process` P ON P.id = PI.pid AND P.guid = PI.guid;

CREATE VIEW IF NOT EXISTS `pmc_events` AS
SELECT PE.id, PE.guid, PE.pmc_id, E.id AS event_id,
  (SELECT string FROM `rocpd_string` RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
  (SELECT display_name FROM `rocpd_info_kernel_symbol` KS WHERE KS.id = K.kernel_id AND KS.guid = K.guid) AS name,
  K.nid, P.pid, K.dispatch_id, K.start, K.end, (K.end - K.start) AS duration,
  PI.name AS counter_name, PE.value AS counter_value
FROM `rocpd_pmc_event` PE
  JOIN `rocpd_info_pmc` PI ON PI.id = PE.pmc_id AND PI.guid = PE.guid
  JOIN `rocpd_event` E ON E.id = PE.event_id AND E.guid = PE.guid
  JOIN `rocpd_kernel_dispatch` K ON K.event_id = PE.event_id AND K.guid = PE.guid
  JOIN `rocpd_info_process` P ON P.id = K.pid AND P.guid = K.guid;

CREATE VIEW IF NOT EXISTS `events_args` AS
SELECT E.id AS event_id,
  (SELECT string FROM `rocpd_string` RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
  E.stack_id, E.parent_stack_id, E.correlation_id, A.position AS arg_position, A.type AS arg_type,
  A.name AS arg_name, A.value AS arg_value, E.call_stack, E.line_info, A.extdata
FROM `rocpd_event` E
  JOIN `rocpd_arg` A ON A.event_id = E.id AND A.guid = E.guid;

CREATE VIEW IF NOT EXISTS `stream_args` AS
SELECT A.id AS argument_id, A.event_id, A.position AS arg_position, A.type AS arg_type,
  A.value AS arg_value, JSON_EXTRACT(A.extdata, '$.stream_id') AS stream_id, S.nid, P.pid,
  S.name AS stream_name, S.extdata
FROM `rocpd_arg` A
  JOIN `rocpd_info_stream` S ON S.id = JSON_EXTRACT(A.extdata, '$.stream_id') AND S.guid = A.guid
  JOIN `rocpd_info_process` P ON P.id = S.pid AND P.guid = S.guid
WHERE A.name = 'stream';

CREATE VIEW IF NOT EXISTS `memory_copies` AS
SELECT M.id, M.guid,
  (SELECT string FROM `rocpd_string` RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
  M.nid, P.pid, T.tid, M.start, M.end, (M.end - M.start) AS duration, S.string AS name,
  R.string AS region_name, M.stream_id, M.queue_id, ST.name AS stream_name, Q.name AS queue_name,
  M.size, DA.name AS dst_device, DA.absolute_index AS dst_agent_abs_index,
  DA.logical_index AS dst_agent_log_index, DA.type_index AS dst_agent_type_index,
  DA.type AS dst_agent_type, M.dst_address, SA.name AS src_device,
  SA.absolute_index AS src_agent_abs_index, SA.logical_index AS src_agent_log_index,
  SA.type_index AS src_agent_type_index, SA.type AS src_agent_type, M.src_address,
  E.stack_id, E.parent_stack_id, E.correlation_id AS corr_id
FROM `rocpd_memory_copy` M
  JOIN `rocpd_string` S ON S.id = M.name_id AND S.guid = M.guid
  LEFT JOIN `rocpd_string` R ON R.id = M.region_name_id AND R.guid = M.guid
  JOIN `rocpd_info_agent` DA ON DA.id = M.dst_agent_id AND DA.guid = M.guid
  JOIN `rocpd_info_agent` SA ON SA.id = M.src_agent_id AND SA.guid = M.guid
  LEFT JOIN `rocpd_info_queue` Q ON Q.id = M.queue_id AND Q.guid = M.guid
  LEFT JOIN `rocpd_info_stream` ST ON ST.id = M.stream_id AND ST.guid = M.guid
  JOIN `rocpd_event` E ON E.id = M.event_id AND E.guid = M.guid
  JOIN `rocpd_info_process` P ON P.id = M.pid AND P.guid = M.guid
  JOIN `rocpd_info_thread` T ON T.id = M.tid AND T.guid = M.guid;

CREATE VIEW IF NOT EXISTS `memory_allocations` AS
SELECT M.id, M.guid,
  (SELECT string FROM `rocpd_string` RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
  M.nid, P.pid, T.tid, M.start, M.end, (M.end - M.start) AS duration, M.type, M.level,
  A.name AS agent_name, A.absolute_index AS agent_abs_index, A.logical_index AS agent_log_index,
  A.type_index AS agent_type_index, A.type AS agent_type, M.address, M.size, M.queue_id,
  Q.name AS queue_name, M.stream_id, ST.name AS stream_name, E.stack_id, E.parent_stack_id,
  E.correlation_id AS corr_id
FROM `rocpd_memory_allocate` M
  LEFT JOIN `rocpd_info_agent` A ON A.id = M.agent_id AND A.guid = M.guid
  LEFT JOIN `rocpd_info_queue` Q ON Q.id = M.queue_id AND Q.guid = M.guid
  LEFT JOIN `rocpd_info_stream` ST ON ST.id = M.stream_id AND ST.guid = M.guid
  JOIN `rocpd_event` E ON E.id = M.event_id AND E.guid = M.guid
  JOIN `rocpd_info_process` P ON P.id = M.pid AND P.guid = M.guid
  JOIN `rocpd_info_thread` T ON T.id = M.tid AND T.guid = M.guid;

CREATE VIEW IF NOT EXISTS `scratch_memory` AS
SELECT M.id, M.guid, M.nid, P.pid, M.type AS operation, A.name AS agent_name,
  A.absolute_index AS agent_abs_index, A.logical_index AS agent_log_index,
  A.type_index AS agent_type_index, A.type AS agent_type, M.queue_id, T.tid,
  JSON_EXTRACT(M.extdata, '$.flags') AS alloc_flags, M.start, M.end,
  (M.end - M.start) AS duration, M.size, M.address, E.correlation_id, E.stack_id,
  E.parent_stack_id, E.correlation_id AS corr_id,
  (SELECT string FROM `rocpd_string` RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
  E.extdata AS event_extdata
FROM `rocpd_memory_allocate` M
  LEFT JOIN `rocpd_info_agent` A ON A.id = M.agent_id AND A.guid = M.guid
  LEFT JOIN `rocpd_info_queue` Q ON Q.id = M.queue_id AND Q.guid = M.guid
  JOIN `rocpd_event` E ON E.id = M.event_id AND E.guid = M.guid
  JOIN `rocpd_info_process` P ON P.id = M.pid AND P.guid = M.guid
  JOIN `rocpd_info_thread` T ON T.id = M.tid AND T.guid = M.guid
WHERE M.level = 'SCRATCH'
ORDER BY M.start ASC;

CREATE VIEW IF NOT EXISTS `counters_collection` AS
SELECT MIN(PE.id) AS id, PE.guid, K.dispatch_id, K.kernel_id, E.id AS event_id, E.correlation_id,
  E.stack_id, E.parent_stack_id, P.pid, T.tid, K.agent_id, A.absolute_index AS agent_abs_index,
  A.logical_index AS agent_log_index, A.type_index AS agent_type_index, A.type AS agent_type,
  K.queue_id, K.grid_size_x, K.grid_size_y, K.grid_size_z,
  (K.grid_size_x * K.grid_size_y * K.grid_size_z) AS grid_size, S.display_name AS kernel_name,
  (SELECT string FROM `rocpd_string` RS WHERE RS.id = K.region_name_id AND RS.guid = K.guid) AS kernel_region,
  K.workgroup_size_x, K.workgroup_size_y, K.workgroup_size_z,
  (K.workgroup_size_x * K.workgroup_size_y * K.workgroup_size_z) AS workgroup_size,
  K.group_segment_size AS lds_block_size, K.private_segment_size AS scratch_size,
  S.arch_vgpr_count AS vgpr_count, S.accum_vgpr_count, S.sgpr_count, PI.name AS counter_name,
  PI.symbol AS counter_symbol, PI.component, PI.description, PI.block, PI.expression,
  PI.value_type, PI.id AS counter_id, SUM(PE.value) AS value, K.start, K.end, PI.is_constant,
  PI.is_derived, (K.end - K.start) AS duration,
  (SELECT string FROM `rocpd_string` RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
  K.nid, E.extdata, S.code_object_id
FROM `rocpd_pmc_event` PE
  JOIN `rocpd_info_pmc` PI ON PI.id = PE.pmc_id AND PI.guid = PE.guid
  JOIN `rocpd_event` E ON E.id = PE.event_id AND E.guid = PE.guid
  JOIN `rocpd_kernel_dispatch` K ON K.event_id = PE.event_id AND K.guid = PE.guid
  JOIN `rocpd_info_agent` A ON A.id = K.agent_id AND A.guid = K.guid
  JOIN `rocpd_info_kernel_symbol` S ON S.id = K.kernel_id AND S.guid = K.guid
  JOIN `rocpd_info_process` P ON P.id = K.pid AND P.guid = K.guid
  JOIN `rocpd_info_thread` T ON T.id = K.tid AND T.guid = K.guid
GROUP BY PE.guid, K.dispatch_id, PI.name, K.agent_id;
"#;

/// Summary views (durations in microseconds, as ROCm's `summary_views.sql`).
const SUMMARY_VIEWS_SQL: &str = r#"
CREATE VIEW IF NOT EXISTS `top_kernels` AS
SELECT name, COUNT(*) AS total_calls, SUM(duration) / 1000.0 AS total_duration,
  AVG(duration) / 1000.0 AS average,
  SUM(duration) * 100.0 / (SELECT SUM(duration) FROM `kernels`) AS percentage
FROM `kernels` GROUP BY name ORDER BY total_duration DESC;

CREATE VIEW IF NOT EXISTS `busy` AS
SELECT agent_id, type, SUM(gpu_time) AS GpuTime, MAX(wall) AS WallTime,
  SUM(gpu_time) * 1.0 / MAX(wall) AS Busy
FROM (
  SELECT agent_abs_index AS agent_id, agent_type AS type, duration AS gpu_time,
    (SELECT MAX(end) - MIN(start) FROM `kernels`) AS wall FROM `kernels`
  UNION ALL
  SELECT dst_agent_abs_index, dst_agent_type, duration,
    (SELECT MAX(end) - MIN(start) FROM `memory_copies`) FROM `memory_copies`)
GROUP BY agent_id, type;

CREATE VIEW IF NOT EXISTS `top` AS
SELECT name, COUNT(*) AS total_calls, SUM(duration) / 1000.0 AS total_duration,
  AVG(duration) / 1000.0 AS average,
  SUM(duration) * 100.0 / (SELECT SUM(duration) FROM (
    SELECT duration FROM `kernels` UNION ALL SELECT duration FROM `memory_copies`
    UNION ALL SELECT duration FROM `regions`)) AS percentage
FROM (
  SELECT name, duration FROM `kernels` UNION ALL SELECT name, duration FROM `memory_copies`
  UNION ALL SELECT name, duration FROM `regions`)
GROUP BY name ORDER BY total_duration DESC;
"#;

/// The table-name suffix for a GUID: `_` + the GUID with every `-` replaced by `_`.
pub fn uuid_suffix(guid: &str) -> String {
    if guid.is_empty() {
        return String::new();
    }
    let body = guid.replace('-', "_");
    if body.starts_with('_') {
        body
    } else {
        format!("_{body}")
    }
}

/// Substitutes `{{uuid}}` and `{{guid}}` in a schema template.
pub fn render(template: &str, uuid: &str, guid: &str) -> String {
    template.replace("{{uuid}}", uuid).replace("{{guid}}", guid)
}

/// The complete DDL for one process: tables and metadata rows, `rocpd_*` views, data views and
/// summary views, in the order ROCm's writer runs its schema files.
pub fn ddl(guid: &str) -> String {
    let uuid = uuid_suffix(guid);
    let mut sql = render(TABLES_SQL, &uuid, guid);
    for table in TABLES {
        sql.push_str(&format!(
            "CREATE VIEW IF NOT EXISTS `{table}` AS SELECT * FROM `{table}{uuid}`;\n"
        ));
    }
    sql.push_str(DATA_VIEWS_SQL);
    sql.push_str(SUMMARY_VIEWS_SQL);
    sql
}

/// The data and summary views alone (they only name the unsuffixed `rocpd_*` views).
pub fn data_views_sql() -> String {
    format!("{DATA_VIEWS_SQL}{SUMMARY_VIEWS_SQL}")
}

/// Enables SQLite's double-quoted string literals for DDL and DML on this connection, which the
/// rocpd schema (ROCm's and ours) relies on for its defaults and metadata inserts.
pub fn enable_dqs(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DQS_DDL, true)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DQS_DML, true)?;
    Ok(())
}

/// Loads the complete schema for `guid` into `conn`.
pub fn load(conn: &Connection, guid: &str) -> rusqlite::Result<()> {
    enable_dqs(conn)?;
    conn.execute_batch(&ddl(guid))
}
