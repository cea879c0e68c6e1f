/* GetPjrtApi(): the table of Kiln's PJRT plugin.
 *
 * Every one of the 138 entries is filled: Kiln's implementation where there is one, else a
 * stub that returns an UNIMPLEMENTED error naming the entry (a NULL entry would make some
 * frameworks crash instead of reporting). */
#include <string.h>

#include "kiln_pjrt_internal.h"

/* Kiln's entries, by name without the PJRT_ prefix; the implementations, defined across the
 * plugin's files, are named kiln_<Entry>. */
#define KILN_IMPLEMENTED(X)                                             \
  X(Error_Destroy) X(Error_Message) X(Error_GetCode) X(Error_ForEachPayload) \
  X(Plugin_Initialize) X(Plugin_Attributes)                               \
  X(Event_Destroy) X(Event_IsReady) X(Event_Error) X(Event_Await) X(Event_OnReady) \
  X(Event_Create) X(Event_Set)                                            \
  X(Client_Create) X(Client_Destroy) X(Client_PlatformName) X(Client_ProcessIndex) \
  X(Client_PlatformVersion) X(Client_Devices) X(Client_AddressableDevices) \
  X(Client_LookupDevice) X(Client_LookupAddressableDevice) X(Client_AddressableMemories) \
  X(Client_Compile) X(Client_DefaultDeviceAssignment) X(Client_BufferFromHostBuffer) \
  X(Client_TopologyDescription) X(Client_CreateUninitializedBuffer)       \
  X(DeviceDescription_Id) X(DeviceDescription_ProcessIndex) X(DeviceDescription_Attributes) \
  X(DeviceDescription_Kind) X(DeviceDescription_DebugString) X(DeviceDescription_ToString) \
  X(Device_GetDescription) X(Device_IsAddressable) X(Device_LocalHardwareId) \
  X(Device_AddressableMemories) X(Device_DefaultMemory) X(Device_MemoryStats) \
  X(Device_GetAttributes)                                                 \
  X(Memory_Id) X(Memory_Kind) X(Memory_Kind_Id) X(Memory_DebugString) X(Memory_ToString) \
  X(Memory_AddressableByDevices)                                          \
  X(TopologyDescription_Destroy) X(TopologyDescription_PlatformName)      \
  X(TopologyDescription_PlatformVersion) X(TopologyDescription_GetDeviceDescriptions) \
  X(TopologyDescription_Attributes) X(TopologyDescription_Fingerprint)    \
  X(Executable_Destroy) X(Executable_Name) X(Executable_NumReplicas)      \
  X(Executable_NumPartitions) X(Executable_NumOutputs)                    \
  X(Executable_SizeOfGeneratedCodeInBytes) X(Executable_GetCostAnalysis)  \
  X(Executable_OutputMemoryKinds) X(Executable_OutputElementTypes)        \
  X(Executable_OutputDimensions) X(Executable_Fingerprint)                \
  X(Executable_GetCompiledMemoryStats) X(Executable_Serialize)           \
  X(Executable_DeserializeAndLoad)                                        \
  X(LoadedExecutable_Destroy) X(LoadedExecutable_GetExecutable)           \
  X(LoadedExecutable_AddressableDevices) X(LoadedExecutable_Delete)       \
  X(LoadedExecutable_IsDeleted) X(LoadedExecutable_Execute)               \
  X(LoadedExecutable_Fingerprint) X(LoadedExecutable_GetDeviceAssignment) \
  X(LoadedExecutable_AddressableDeviceLogicalIds)                         \
  X(Buffer_Destroy) X(Buffer_ElementType) X(Buffer_Dimensions) X(Buffer_UnpaddedDimensions) \
  X(Buffer_DynamicDimensionIndices) X(Buffer_GetMemoryLayout) X(Buffer_OnDeviceSizeInBytes) \
  X(Buffer_Device) X(Buffer_Memory) X(Buffer_Delete) X(Buffer_IsDeleted)  \
  X(Buffer_CopyToDevice) X(Buffer_CopyToMemory) X(Buffer_ToHostBuffer) X(Buffer_IsOnCpu) \
  X(Buffer_ReadyEvent) X(Buffer_UnsafePointer) X(Buffer_IncreaseExternalReferenceCount) \
  X(Buffer_DecreaseExternalReferenceCount) X(Buffer_OpaqueDeviceMemoryDataPointer) \
  X(Buffer_CopyRawToHost)

#define KILN_PROTOTYPE(short_name) PJRT_##short_name kiln_##short_name;
KILN_IMPLEMENTED(KILN_PROTOTYPE)

/* ---- plugin ---- */
PJRT_Error *kiln_Plugin_Initialize(PJRT_Plugin_Initialize_Args *args) {
  KILN_PJRT_ARGS(Plugin_Initialize, args, extension_start);
  return NULL;
}

static int64_t stablehlo_current[3], stablehlo_minimum[3];
static PJRT_NamedValue attributes[3];
static pthread_mutex_t attributes_mutex = PTHREAD_MUTEX_INITIALIZER;

/* What the framework reads of the plugin: the StableHLO versions Kiln reads (so that JAX
 * serializes programs to a version Kiln knows) and a version number for feature checks.
 * The versions are asked of Kiln's Python (taking the GIL) before the mutex is taken: a C
 * lock is never held while waiting for the GIL. */
PJRT_Error *kiln_Plugin_Attributes(PJRT_Plugin_Attributes_Args *args) {
  KILN_PJRT_ARGS(Plugin_Attributes, args, num_attributes);
  int64_t current[3], minimum[3];
  kiln_pjrt_stablehlo_versions(current, minimum);
  static const char *const names[] = {"stablehlo_current_version", "stablehlo_minimum_version",
                                      "xla_version"};
  pthread_mutex_lock(&attributes_mutex);
  memcpy(stablehlo_current, current, sizeof current);
  memcpy(stablehlo_minimum, minimum, sizeof minimum);
  for (int i = 0; i < 3; i++)
    attributes[i] = (PJRT_NamedValue){.struct_size = sizeof(PJRT_NamedValue),
                                      .name = names[i],
                                      .name_size = strlen(names[i])};
  attributes[0].type = attributes[1].type = PJRT_NamedValue_kInt64List;
  attributes[0].int64_array_value = stablehlo_current;
  attributes[1].int64_array_value = stablehlo_minimum;
  attributes[0].value_size = attributes[1].value_size = 3;
  attributes[2].type = PJRT_NamedValue_kInt64;
  attributes[2].int64_value = 2; /* the xla_version of jaxlib's own plugins of this era */
  attributes[2].value_size = 1;
  pthread_mutex_unlock(&attributes_mutex);
  args->attributes = attributes;
  args->num_attributes = 3;
  return NULL;
}

/* ---- stubs ---- */
#define KILN_STUB_0(name)                                     \
  static PJRT_Error *stub_##name(name##_Args *args) {         \
    (void)args;                                               \
    return kiln_pjrt_unimplemented(#name);                    \
  }
#define KILN_STUB_1(name)
#define KILN_STUB_2(name)
#define KILN_STUB(name, kind) KILN_STUB_##kind(name)
KILN_PJRT_ENTRIES(KILN_STUB)

/* ---- the table ---- */
static PJRT_Api api;

static void fill(void) {
  api.struct_size = sizeof(PJRT_Api);
  api.extension_start = &kiln_pjrt_shardings_extension.base;
  api.pjrt_api_version.struct_size = sizeof(PJRT_Api_Version);
  api.pjrt_api_version.major_version = KILN_PJRT_API_MAJOR;
  api.pjrt_api_version.minor_version = KILN_PJRT_API_MINOR;
#define KILN_ASSIGN_STUB_0(name) api.name = stub_##name;
#define KILN_ASSIGN_STUB_1(name)
#define KILN_ASSIGN_STUB_2(name)
#define KILN_ASSIGN_STUB(name, kind) KILN_ASSIGN_STUB_##kind(name)
  KILN_PJRT_ENTRIES(KILN_ASSIGN_STUB)
#define KILN_ASSIGN_IMPL(short_name) api.PJRT_##short_name = kiln_##short_name;
  KILN_IMPLEMENTED(KILN_ASSIGN_IMPL)
}

__attribute__((visibility("default"))) const PJRT_Api *GetPjrtApi(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, fill);
  return &api;
}
