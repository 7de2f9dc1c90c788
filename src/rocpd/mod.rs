//! rocpd databases: model, reader, writer, converters (work in progress).
