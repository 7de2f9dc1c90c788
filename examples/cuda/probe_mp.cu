// Probe: CUPTI range profiler, user replay, a multi-pass metric set; how passes merge.
// usage: probe_mp MODE metric... ; MODE: merged (decode once after all passes) | each (decode after every pass)
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti_target.h>
#include <cupti_profiler_target.h>
#include <cupti_profiler_host.h>
#include <cupti_range_profiler.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#define CK(x) do { CUptiResult r_ = (x); if (r_ != CUPTI_SUCCESS) { const char* s_; cuptiGetResultString(r_, &s_); printf("FAIL %s: %d %s\n", #x, (int)r_, s_); exit(1);} } while (0)
__global__ void kA(float* a) { int i = blockIdx.x * blockDim.x + threadIdx.x; a[i] = a[i] * 2.f + 1.f; }
__global__ void kB(float* a) { int i = blockIdx.x * blockDim.x + threadIdx.x; float s = 0; for (int j = 0; j < 4; j++) s += a[i * 4 + j]; a[i * 4] = s; }
static float* buf;
static void launchA() { kA<<<64, 256>>>(buf); }
static void launchB() { kB<<<512, 128>>>(buf); }
int main(int argc, char** argv) {
    const char* mode = argv[1];
    std::vector<const char*> names(argv + 2, argv + argc);
    cudaMalloc(&buf, 64 << 20); cudaMemset(buf, 0, 64 << 20); cudaDeviceSynchronize();
    CUcontext ctx; cuCtxGetCurrent(&ctx);
    CUpti_Profiler_Initialize_Params ip = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE}; CK(cuptiProfilerInitialize(&ip));
    CUpti_Device_GetChipName_Params cn = {CUpti_Device_GetChipName_Params_STRUCT_SIZE}; cn.deviceIndex = 0; CK(cuptiDeviceGetChipName(&cn));
    CUpti_Profiler_GetCounterAvailability_Params ca = {CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE}; ca.ctx = ctx; CK(cuptiProfilerGetCounterAvailability(&ca));
    std::vector<uint8_t> avail(ca.counterAvailabilityImageSize); ca.pCounterAvailabilityImage = avail.data(); CK(cuptiProfilerGetCounterAvailability(&ca));
    CUpti_Profiler_Host_Initialize_Params hi = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    hi.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER; hi.pChipName = cn.pChipName; hi.pCounterAvailabilityImage = avail.data(); CK(cuptiProfilerHostInitialize(&hi));
    CUpti_Profiler_Host_ConfigAddMetrics_Params am = {CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    am.pHostObject = hi.pHostObject; am.ppMetricNames = names.data(); am.numMetrics = names.size(); CK(cuptiProfilerHostConfigAddMetrics(&am));
    CUpti_Profiler_Host_GetConfigImageSize_Params cs = {CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE}; cs.pHostObject = hi.pHostObject; CK(cuptiProfilerHostGetConfigImageSize(&cs));
    std::vector<uint8_t> config(cs.configImageSize);
    CUpti_Profiler_Host_GetConfigImage_Params gc = {CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE}; gc.pHostObject = hi.pHostObject; gc.configImageSize = config.size(); gc.pConfigImage = config.data(); CK(cuptiProfilerHostGetConfigImage(&gc));
    CUpti_Profiler_Host_GetNumOfPasses_Params np = {CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE}; np.configImageSize = config.size(); np.pConfigImage = config.data(); CK(cuptiProfilerHostGetNumOfPasses(&np));
    printf("passes %zu\n", np.numOfPasses);
    if (strcmp(mode, "passes") == 0) return 0;
    CUpti_RangeProfiler_Enable_Params en = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE}; en.ctx = ctx; CK(cuptiRangeProfilerEnable(&en));
    size_t maxr = 16;
    CUpti_RangeProfiler_GetCounterDataSize_Params ds = {CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    ds.pRangeProfilerObject = en.pRangeProfilerObject; ds.pMetricNames = names.data(); ds.numMetrics = names.size(); ds.maxNumOfRanges = maxr; ds.maxNumRangeTreeNodes = maxr; CK(cuptiRangeProfilerGetCounterDataSize(&ds));
    std::vector<uint8_t> data(ds.counterDataSize);
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params di = {CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    di.pRangeProfilerObject = en.pRangeProfilerObject; di.counterDataSize = data.size(); di.pCounterData = data.data(); CK(cuptiRangeProfilerCounterDataImageInitialize(&di));
    CUpti_RangeProfiler_SetConfig_Params sc = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
    sc.pRangeProfilerObject = en.pRangeProfilerObject; sc.configSize = config.size(); sc.pConfig = config.data(); sc.counterDataImageSize = data.size(); sc.pCounterDataImage = data.data();
    sc.range = CUPTI_AutoRange; sc.replayMode = CUPTI_UserReplay; sc.maxRangesPerPass = maxr; sc.numNestingLevels = 1; sc.minNestingLevel = 1; sc.passIndex = 0; sc.targetNestingLevel = 1;
    CK(cuptiRangeProfilerSetConfig(&sc));
    auto evaluate = [&](const char* when) {
        CUpti_RangeProfiler_GetCounterDataInfo_Params gi = {CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE}; gi.pCounterDataImage = data.data(); gi.counterDataImageSize = data.size(); CK(cuptiRangeProfilerGetCounterDataInfo(&gi));
        printf("%s: ranges %zu\n", when, gi.numTotalRanges);
        for (size_t r = 0; r < gi.numTotalRanges; r++) {
            CUpti_RangeProfiler_CounterData_GetRangeInfo_Params ri = {CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE};
            ri.pCounterDataImage = data.data(); ri.counterDataImageSize = data.size(); ri.rangeIndex = r; ri.rangeDelimiter = "/"; CK(cuptiRangeProfilerCounterDataGetRangeInfo(&ri));
            std::vector<double> v(names.size());
            CUpti_Profiler_Host_EvaluateToGpuValues_Params ev = {CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
            ev.pHostObject = hi.pHostObject; ev.pCounterDataImage = data.data(); ev.counterDataImageSize = data.size(); ev.rangeIndex = r; ev.ppMetricNames = names.data(); ev.numMetrics = names.size(); ev.pMetricValues = v.data();
            CUptiResult e = cuptiProfilerHostEvaluateToGpuValues(&ev);
            printf("  range %zu '%s' rc=%d:", r, ri.rangeName, (int)e);
            for (size_t m = 0; m < names.size(); m++) printf(" %s=%.0f", names[m], v[m]);
            printf("\n");
        }
    };
    for (int pass = 0; pass < 8; pass++) {
        CUpti_RangeProfiler_Start_Params st = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE}; st.pRangeProfilerObject = en.pRangeProfilerObject; CK(cuptiRangeProfilerStart(&st));
        if (pass % 2 == 0) { launchA(); launchB(); } else { launchB(); launchA(); }
        cudaDeviceSynchronize();
        CUpti_RangeProfiler_Stop_Params sp = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE}; sp.pRangeProfilerObject = en.pRangeProfilerObject; CK(cuptiRangeProfilerStop(&sp));
        printf("pass %d (%s first): stop passIndex=%zu all=%d\n", pass, pass % 2 ? "B" : "A", sp.passIndex, sp.isAllPassSubmitted);
        if (strcmp(mode, "each") == 0 || sp.isAllPassSubmitted) {
            CUpti_RangeProfiler_DecodeData_Params dd = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE}; dd.pRangeProfilerObject = en.pRangeProfilerObject;
            CUptiResult e = cuptiRangeProfilerDecodeData(&dd);
            printf("decode rc=%d dropped=%zu\n", (int)e, dd.numOfRangeDropped);
            char w[32]; snprintf(w, sizeof w, "after pass %d", pass); evaluate(w);
        }
        if (sp.isAllPassSubmitted) break;
    }
    printf("expect: A warps=512 ctas=64; B warps=2048 ctas=512\n");
    return 0;
}
