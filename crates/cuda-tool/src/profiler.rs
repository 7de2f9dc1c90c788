//! CUPTI's counter APIs, as the CUDA 13 headers declare them: `cupti_profiler_target.h`,
//! `cupti_target.h`, `cupti_profiler_host.h`, `cupti_range_profiler.h` and
//! `cupti_pmsampling.h`. Every call takes one parameter struct whose first field is its size
//! ([`sized`] fills it as `CUPTI_PROFILER_STRUCT_SIZE` does); the structs below are those of
//! the headers, field for field (tests/layout.rs checks the offsets against the real headers).
//! The functions are looked up in the loaded libcupti ([`Profiler::resolve`]); a CUPTI without
//! them (older than CUDA 12.6) cannot count.

#![allow(missing_docs)]

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::cupti::{sym, CuptiResult};

/// `CUPTI_PROFILER_TYPE_RANGE_PROFILER`.
pub const TYPE_RANGE_PROFILER: c_int = 0;
/// `CUPTI_PROFILER_TYPE_PM_SAMPLING`.
pub const TYPE_PM_SAMPLING: c_int = 1;
/// `CUPTI_AutoRange`.
pub const AUTO_RANGE: c_int = 1;
/// `CUPTI_KernelReplay`.
pub const KERNEL_REPLAY: c_int = 2;
/// `CUPTI_UserReplay`.
pub const USER_REPLAY: c_int = 3;
/// `CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL`.
pub const TRIGGER_GPU_TIME_INTERVAL: c_int = 1;
/// `CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST`.
pub const APPEND_KEEP_LATEST: c_int = 1;
/// `CUPTI_ERROR_INSUFFICIENT_PRIVILEGES`.
pub const INSUFFICIENT_PRIVILEGES: CuptiResult = 35;
/// `CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES`.
pub const VIRTUALIZED_INSUFFICIENT_PRIVILEGES: CuptiResult = 40;
/// `CUPTI_ERROR_INVALID_METRIC_NAME`.
pub const INVALID_METRIC_NAME: CuptiResult = 17;
/// `CUPTI_ERROR_NOT_SUPPORTED`.
pub const NOT_SUPPORTED: CuptiResult = 27;

/// The API version of the libcupti this process loaded (`cuptiGetVersion`), which decides how
/// much of a grown parameter struct [`sized`] declares; 0 until [`Profiler::resolve`].
static LOADED_VERSION: AtomicU32 = AtomicU32::new(0);

/// The loaded libcupti's API version (0 before [`Profiler::resolve`]).
pub fn loaded_version() -> u32 {
    LOADED_VERSION.load(Ordering::Relaxed)
}

/// A parameter struct whose first field is `structSize`. Its size is the header's
/// `*_STRUCT_SIZE` (the end of its last field: Rust's size, less tail padding) as the *loaded*
/// CUPTI knows it: some structs grew fields in later CUPTIs, and a CUPTI given a `structSize`
/// larger than its own refuses the call with `CUPTI_ERROR_INVALID_PARAMETER` (CUDA 13.0's
/// CUPTI did so for 13.1's `bAllowDeviceLevelCounters`). A smaller size is what every newer
/// CUPTI accepts, so a field newer than the loaded CUPTI is simply not declared.
pub trait Sized_: Default {
    /// `*_STRUCT_SIZE` for a CUPTI of API version `version` (`u32::MAX`: the newest headers).
    fn struct_size_for(version: u32) -> usize;
    /// `*_STRUCT_SIZE` of the loaded CUPTI.
    fn struct_size() -> usize {
        Self::struct_size_for(loaded_version())
    }
    /// Sets `structSize`.
    fn set_size(&mut self, n: usize);
}

/// A zeroed parameter struct with its `structSize` set for the loaded CUPTI.
pub fn sized<T: Sized_>() -> T {
    let mut t = T::default();
    t.set_size(T::struct_size());
    t
}

/// The end of `field` in a value of a struct: the struct size CUPTI's headers give when
/// `field` is the last one.
macro_rules! end_of {
    ($name:ident, $z:ident, $field:ident) => {
        std::mem::offset_of!($name, $field) + std::mem::size_of_val(&$z.$field)
    };
}

/// A parameter struct: its name, the last field the oldest supported CUPTI (12.6) knows, and
/// for a struct that grew, each later last field with the first API version that has it.
macro_rules! params {
    ($name:ident, $last:ident $(, since $v:literal => $newer:ident)* { $($f:ident : $t:ty),* $(,)? }) => {
        #[repr(C)]
        #[derive(Debug)]
        pub struct $name {
            pub struct_size: usize,
            pub p_priv: *mut c_void,
            $(pub $f: $t,)*
        }
        impl Default for $name {
            fn default() -> Self {
                // SAFETY: plain old data: integers and raw pointers, for which zero is valid.
                unsafe { std::mem::zeroed() }
            }
        }
        impl Sized_ for $name {
            #[allow(unused_mut, unused_variables)]
            fn struct_size_for(version: u32) -> usize {
                let z = Self::default();
                let mut n = end_of!($name, z, $last);
                $(if version >= $v {
                    n = end_of!($name, z, $newer);
                })*
                n
            }
            fn set_size(&mut self, n: usize) {
                self.struct_size = n;
            }
        }
    };
}

params!(ProfilerInitialize, p_priv {});
params!(GetChipName, p_chip_name { device_index: usize, p_chip_name: *const c_char });
params!(GetCounterAvailability, p_counter_availability_image, since 130100 => b_allow_device_level_counters {
    ctx: *mut c_void,
    counter_availability_image_size: usize,
    p_counter_availability_image: *mut u8,
    b_allow_device_level_counters: u8,
});
params!(HostInitialize, p_host_object, since 130500 => p_single_pass_metric_set_name {
    profiler_type: c_int,
    p_chip_name: *const c_char,
    p_counter_availability_image: *const u8,
    p_host_object: *mut c_void,
    p_single_pass_metric_set_name: *const c_char,
});
params!(HostDeinitialize, p_host_object { p_host_object: *mut c_void });
params!(HostConfigAddMetrics, num_metrics {
    p_host_object: *mut c_void,
    pp_metric_names: *const *const c_char,
    num_metrics: usize,
});
params!(HostGetConfigImageSize, config_image_size {
    p_host_object: *mut c_void,
    config_image_size: usize,
});
params!(HostGetConfigImage, p_config_image {
    p_host_object: *mut c_void,
    config_image_size: usize,
    p_config_image: *mut u8,
});
params!(HostGetNumOfPasses, num_of_passes {
    config_image_size: usize,
    p_config_image: *mut u8,
    num_of_passes: usize,
});
params!(HostEvaluateToGpuValues, p_metric_values {
    p_host_object: *mut c_void,
    p_counter_data_image: *const u8,
    counter_data_image_size: usize,
    range_index: usize,
    pp_metric_names: *const *const c_char,
    num_metrics: usize,
    p_metric_values: *mut f64,
});
params!(HostGetBaseMetrics, num_metrics {
    p_host_object: *mut c_void,
    metric_type: c_int,
    pp_metric_names: *const *const c_char,
    num_metrics: usize,
});
params!(HostGetMetricProperties, metric_type, since 130500 => metric_collection_scope {
    p_host_object: *mut c_void,
    p_metric_name: *const c_char,
    p_description: *const c_char,
    p_hw_unit: *const c_char,
    p_dim_unit: *const c_char,
    metric_type: c_int,
    metric_collection_scope: c_int,
});
params!(RpEnable, p_range_profiler_object, since 130500 => cache_control_mode {
    ctx: *mut c_void,
    p_range_profiler_object: *mut c_void,
    cache_control_mode: c_int,
});
params!(RpObject, p_range_profiler_object { p_range_profiler_object: *mut c_void });
params!(RpSetConfig, target_nesting_level {
    p_range_profiler_object: *mut c_void,
    config_size: usize,
    p_config: *const u8,
    counter_data_image_size: usize,
    p_counter_data_image: *mut u8,
    range: c_int,
    replay_mode: c_int,
    max_ranges_per_pass: usize,
    num_nesting_levels: u16,
    min_nesting_level: u16,
    pass_index: usize,
    target_nesting_level: u16,
});
params!(RpStop, is_all_pass_submitted {
    p_range_profiler_object: *mut c_void,
    pass_index: usize,
    target_nesting_level: usize,
    is_all_pass_submitted: u8,
});
params!(RpDecodeData, num_of_range_dropped {
    p_range_profiler_object: *mut c_void,
    num_of_range_dropped: usize,
});
params!(RpGetCounterDataSize, counter_data_size {
    p_range_profiler_object: *mut c_void,
    p_metric_names: *const *const c_char,
    num_metrics: usize,
    max_num_of_ranges: usize,
    max_num_range_tree_nodes: u32,
    counter_data_size: usize,
});
params!(RpCounterDataImageInitialize, p_counter_data {
    p_range_profiler_object: *mut c_void,
    counter_data_size: usize,
    p_counter_data: *mut u8,
});
params!(RpGetCounterDataInfo, num_total_ranges {
    p_counter_data_image: *const u8,
    counter_data_image_size: usize,
    num_total_ranges: usize,
});
params!(RpGetRangeInfo, range_name {
    p_counter_data_image: *const u8,
    counter_data_image_size: usize,
    range_index: usize,
    range_delimiter: *const c_char,
    range_name: *const c_char,
});
params!(PmEnable, p_pm_sampling_object {
    device_index: usize,
    p_pm_sampling_object: *mut c_void,
});
params!(PmObject, p_pm_sampling_object { p_pm_sampling_object: *mut c_void });
params!(PmSetConfig, trigger_mode, since 130000 => hw_buffer_append_mode {
    p_pm_sampling_object: *mut c_void,
    config_size: usize,
    p_config: *const u8,
    hardware_buffer_size: usize,
    sampling_interval: u64,
    trigger_mode: c_int,
    hw_buffer_append_mode: c_int,
});
params!(PmDecodeData, overflow {
    p_pm_sampling_object: *mut c_void,
    p_counter_data_image: *mut u8,
    counter_data_image_size: usize,
    decode_stop_reason: c_int,
    overflow: u8,
});
params!(PmGetCounterAvailability, p_counter_availability_image {
    device_index: usize,
    counter_availability_image_size: usize,
    p_counter_availability_image: *mut u8,
});
params!(PmGetCounterDataSize, counter_data_size {
    p_pm_sampling_object: *mut c_void,
    p_metric_names: *const *const c_char,
    num_metrics: usize,
    max_samples: u32,
    counter_data_size: usize,
});
params!(PmCounterDataImageInitialize, p_counter_data {
    p_pm_sampling_object: *mut c_void,
    counter_data_size: usize,
    p_counter_data: *mut u8,
});
params!(PmGetCounterDataInfo, num_completed_samples {
    p_counter_data_image: *const u8,
    counter_data_image_size: usize,
    num_total_samples: usize,
    num_populated_samples: usize,
    num_completed_samples: usize,
});
params!(PmGetSampleInfo, end_timestamp {
    p_pm_sampling_object: *mut c_void,
    p_counter_data_image: *const u8,
    counter_data_image_size: usize,
    sample_index: usize,
    start_timestamp: u64,
    end_timestamp: u64,
});

type Call<P> = unsafe extern "C" fn(*mut P) -> CuptiResult;

macro_rules! table {
    ($($field:ident : $p:ty = $sym:literal),* $(,)?) => {
        /// The counter entry points of the loaded libcupti.
        #[derive(Debug, Clone, Copy)]
        pub struct Profiler {
            $(pub $field: Call<$p>,)*
        }

        impl Profiler {
            /// Looks every function up in `h`, whose API version (`cuptiGetVersion`) is
            /// `version`: it decides the struct sizes of every later call ([`sized`]); the
            /// names missing otherwise.
            ///
            /// # Safety
            /// `h` must be a live `dlopen` handle of libcupti, whose functions have the
            /// signatures of the CUDA 13 headers.
            #[allow(clippy::missing_transmute_annotations)]
            pub unsafe fn resolve(h: *mut c_void, version: u32) -> Result<Profiler, Vec<&'static str>> {
                LOADED_VERSION.store(version, Ordering::Relaxed);
                let mut missing = Vec::new();
                $(let $field = sym(h, $sym);
                if $field.is_null() {
                    missing.push($sym);
                })*
                if !missing.is_empty() {
                    return Err(missing);
                }
                Ok(Profiler {
                    $($field: std::mem::transmute::<*mut c_void, Call<$p>>($field),)*
                })
            }
        }
    };
}

table! {
    initialize: ProfilerInitialize = "cuptiProfilerInitialize",
    chip_name: GetChipName = "cuptiDeviceGetChipName",
    counter_availability: GetCounterAvailability = "cuptiProfilerGetCounterAvailability",
    host_initialize: HostInitialize = "cuptiProfilerHostInitialize",
    host_deinitialize: HostDeinitialize = "cuptiProfilerHostDeinitialize",
    host_add_metrics: HostConfigAddMetrics = "cuptiProfilerHostConfigAddMetrics",
    host_config_size: HostGetConfigImageSize = "cuptiProfilerHostGetConfigImageSize",
    host_config_image: HostGetConfigImage = "cuptiProfilerHostGetConfigImage",
    host_passes: HostGetNumOfPasses = "cuptiProfilerHostGetNumOfPasses",
    host_evaluate: HostEvaluateToGpuValues = "cuptiProfilerHostEvaluateToGpuValues",
    host_base_metrics: HostGetBaseMetrics = "cuptiProfilerHostGetBaseMetrics",
    host_metric_properties: HostGetMetricProperties = "cuptiProfilerHostGetMetricProperties",
    rp_enable: RpEnable = "cuptiRangeProfilerEnable",
    rp_disable: RpObject = "cuptiRangeProfilerDisable",
    rp_set_config: RpSetConfig = "cuptiRangeProfilerSetConfig",
    rp_start: RpObject = "cuptiRangeProfilerStart",
    rp_stop: RpStop = "cuptiRangeProfilerStop",
    rp_decode: RpDecodeData = "cuptiRangeProfilerDecodeData",
    rp_data_size: RpGetCounterDataSize = "cuptiRangeProfilerGetCounterDataSize",
    rp_data_init: RpCounterDataImageInitialize = "cuptiRangeProfilerCounterDataImageInitialize",
    rp_data_info: RpGetCounterDataInfo = "cuptiRangeProfilerGetCounterDataInfo",
    rp_range_info: RpGetRangeInfo = "cuptiRangeProfilerCounterDataGetRangeInfo",
    pm_enable: PmEnable = "cuptiPmSamplingEnable",
    pm_disable: PmObject = "cuptiPmSamplingDisable",
    pm_set_config: PmSetConfig = "cuptiPmSamplingSetConfig",
    pm_start: PmObject = "cuptiPmSamplingStart",
    pm_stop: PmObject = "cuptiPmSamplingStop",
    pm_decode: PmDecodeData = "cuptiPmSamplingDecodeData",
    pm_availability: PmGetCounterAvailability = "cuptiPmSamplingGetCounterAvailability",
    pm_data_size: PmGetCounterDataSize = "cuptiPmSamplingGetCounterDataSize",
    pm_data_init: PmCounterDataImageInitialize = "cuptiPmSamplingCounterDataImageInitialize",
    pm_data_info: PmGetCounterDataInfo = "cuptiPmSamplingGetCounterDataInfo",
    pm_sample_info: PmGetSampleInfo = "cuptiPmSamplingCounterDataGetSampleInfo",
}

/// Calls `f` with a fresh sized parameter struct that `fill` prepares; the struct after the
/// call, or CUPTI's result.
///
/// # Safety
/// `f` must be the CUPTI function taking `P`, and `fill` must leave every pointer in `P`
/// valid for the call.
pub unsafe fn call<P: Sized_>(f: Call<P>, fill: impl FnOnce(&mut P)) -> Result<P, CuptiResult> {
    let mut p: P = sized();
    fill(&mut p);
    match f(&mut p) {
        0 => Ok(p),
        r => Err(r),
    }
}
