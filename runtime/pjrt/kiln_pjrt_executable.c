/* The executable entries of Kiln's PJRT plugin: compile, execute and what the framework asks
 * of a compiled program. The program itself lives in Kiln's Python (kiln_pjrt_python.c);
 * its metadata was copied into C at compile time, so these getters never take the GIL. */
#include <stdlib.h>
#include <string.h>

#include "kiln_pjrt_internal.h"

PJRT_Error *kiln_Client_Compile(PJRT_Client_Compile_Args *args) {
  KILN_PJRT_ARGS_ON(Client_Compile, args, executable, client);
  if (args->program == NULL)
    return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT, "PJRT_Client_Compile: no program");
  return kiln_pjrt_compile(args->client, args->program, args->compile_options,
                           args->compile_options_size, &args->executable);
}

PJRT_Error *kiln_LoadedExecutable_Execute(PJRT_LoadedExecutable_Execute_Args *args) {
  KILN_PJRT_ARGS_ON(LoadedExecutable_Execute, args, device_complete_events, executable);
  if (args->options != NULL && args->options->num_send_ops + args->options->num_recv_ops > 0)
    return kiln_pjrt_error(PJRT_Error_Code_UNIMPLEMENTED,
                           "Kiln's PJRT plugin has no host send/recv callbacks");
  return kiln_pjrt_execute(args);
}

PJRT_Error *kiln_LoadedExecutable_Destroy(PJRT_LoadedExecutable_Destroy_Args *args) {
  KILN_PJRT_ARGS(LoadedExecutable_Destroy, args, executable);
  if (args->executable == NULL) return NULL;
  kiln_pjrt_program_release(args->executable->program);
  free(args->executable);
  return NULL;
}

PJRT_Error *kiln_LoadedExecutable_GetExecutable(PJRT_LoadedExecutable_GetExecutable_Args *args) {
  KILN_PJRT_ARGS_ON(LoadedExecutable_GetExecutable, args, executable, loaded_executable);
  PJRT_Executable *executable = malloc(sizeof *executable);
  if (executable == NULL)
    return kiln_pjrt_out_of_memory("PJRT_LoadedExecutable_GetExecutable");
  executable->program = args->loaded_executable->program;
  kiln_pjrt_program_retain(executable->program);
  args->executable = executable;
  return NULL;
}

PJRT_Error *kiln_LoadedExecutable_AddressableDevices(
    PJRT_LoadedExecutable_AddressableDevices_Args *args) {
  KILN_PJRT_ARGS_ON(LoadedExecutable_AddressableDevices, args, num_addressable_devices, executable);
  args->addressable_devices = kiln_program_devices(args->executable->program);
  args->num_addressable_devices = kiln_program_num_addressable(args->executable->program);
  return NULL;
}

PJRT_Error *kiln_LoadedExecutable_AddressableDeviceLogicalIds(
    PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args *args) {
  KILN_PJRT_ARGS_ON(LoadedExecutable_AddressableDeviceLogicalIds, args,
                    num_addressable_device_logical_ids, executable);
  args->addressable_device_logical_ids = kiln_program_logical_ids(args->executable->program);
  args->num_addressable_device_logical_ids =
      kiln_program_num_addressable(args->executable->program);
  return NULL;
}

PJRT_Error *kiln_LoadedExecutable_Delete(PJRT_LoadedExecutable_Delete_Args *args) {
  KILN_PJRT_ARGS_ON(LoadedExecutable_Delete, args, executable, executable);
  atomic_store(&args->executable->deleted, true);
  return NULL;
}

PJRT_Error *kiln_LoadedExecutable_IsDeleted(PJRT_LoadedExecutable_IsDeleted_Args *args) {
  KILN_PJRT_ARGS_ON(LoadedExecutable_IsDeleted, args, is_deleted, executable);
  args->is_deleted = atomic_load(&args->executable->deleted);
  return NULL;
}

PJRT_Error *kiln_LoadedExecutable_Fingerprint(PJRT_LoadedExecutable_Fingerprint_Args *args) {
  KILN_PJRT_ARGS_ON(LoadedExecutable_Fingerprint, args, executable_fingerprint_size, executable);
  args->executable_fingerprint = kiln_program_fingerprint(args->executable->program);
  args->executable_fingerprint_size = strlen(args->executable_fingerprint);
  return NULL;
}

static void free_assignment(PJRT_DeviceAssignmentSerialized *assignment) {
  (void)assignment; /* the bytes belong to the program */
}

PJRT_Error *kiln_LoadedExecutable_GetDeviceAssignment(
    PJRT_LoadedExecutable_GetDeviceAssignment_Args *args) {
  KILN_PJRT_ARGS_ON(LoadedExecutable_GetDeviceAssignment, args,
                    serialized_device_assignment_deleter, executable);
  args->serialized_bytes =
      kiln_program_device_assignment(args->executable->program, &args->serialized_bytes_size);
  args->serialized_device_assignment = NULL;
  args->serialized_device_assignment_deleter = free_assignment; /* must not be NULL */
  return NULL;
}

/* ---- PJRT_Executable: a view of a loaded executable's program ---- */
PJRT_Error *kiln_Executable_Destroy(PJRT_Executable_Destroy_Args *args) {
  KILN_PJRT_ARGS(Executable_Destroy, args, executable);
  if (args->executable == NULL) return NULL;
  kiln_pjrt_program_release(args->executable->program);
  free(args->executable);
  return NULL;
}

PJRT_Error *kiln_Executable_Name(PJRT_Executable_Name_Args *args) {
  KILN_PJRT_ARGS_ON(Executable_Name, args, executable_name_size, executable);
  args->executable_name = kiln_program_name(args->executable->program);
  args->executable_name_size = strlen(args->executable_name);
  return NULL;
}

PJRT_Error *kiln_Executable_NumReplicas(PJRT_Executable_NumReplicas_Args *args) {
  KILN_PJRT_ARGS_ON(Executable_NumReplicas, args, num_replicas, executable);
  args->num_replicas = kiln_program_num_replicas(args->executable->program);
  return NULL;
}

PJRT_Error *kiln_Executable_NumPartitions(PJRT_Executable_NumPartitions_Args *args) {
  KILN_PJRT_ARGS_ON(Executable_NumPartitions, args, num_partitions, executable);
  args->num_partitions = kiln_program_num_partitions(args->executable->program);
  return NULL;
}

PJRT_Error *kiln_Executable_NumOutputs(PJRT_Executable_NumOutputs_Args *args) {
  KILN_PJRT_ARGS_ON(Executable_NumOutputs, args, num_outputs, executable);
  args->num_outputs = kiln_program_num_outputs(args->executable->program);
  return NULL;
}

PJRT_Error *kiln_Executable_SizeOfGeneratedCodeInBytes(
    PJRT_Executable_SizeOfGeneratedCodeInBytes_Args *args) {
  KILN_PJRT_ARGS_ON(Executable_SizeOfGeneratedCodeInBytes, args, size_in_bytes, executable);
  args->size_in_bytes = kiln_program_code_size(args->executable->program);
  return NULL;
}

PJRT_Error *kiln_Executable_GetCostAnalysis(PJRT_Executable_GetCostAnalysis_Args *args) {
  KILN_PJRT_ARGS(Executable_GetCostAnalysis, args, properties);
  args->num_properties = 0; /* Kiln has no cost model to report */
  args->properties = NULL;
  return NULL;
}

PJRT_Error *kiln_Executable_OutputMemoryKinds(PJRT_Executable_OutputMemoryKinds_Args *args) {
  KILN_PJRT_ARGS_ON(Executable_OutputMemoryKinds, args, memory_kind_sizes, executable);
  KilnProgram *program = args->executable->program;
  args->num_outputs = kiln_program_num_outputs(program);
  args->memory_kinds = kiln_program_memory_kinds(program);
  args->memory_kind_sizes = kiln_program_memory_kind_sizes(program);
  return NULL;
}

PJRT_Error *kiln_Executable_OutputElementTypes(PJRT_Executable_OutputElementTypes_Args *args) {
  KILN_PJRT_ARGS_ON(Executable_OutputElementTypes, args, num_output_types, executable);
  args->output_types = kiln_program_output_types(args->executable->program);
  args->num_output_types = kiln_program_num_outputs(args->executable->program);
  return NULL;
}

PJRT_Error *kiln_Executable_OutputDimensions(PJRT_Executable_OutputDimensions_Args *args) {
  KILN_PJRT_ARGS_ON(Executable_OutputDimensions, args, dim_sizes, executable);
  KilnProgram *program = args->executable->program;
  args->num_outputs = kiln_program_num_outputs(program);
  args->dims = kiln_program_output_dims(program);
  args->dim_sizes = kiln_program_output_ranks(program);
  return NULL;
}

PJRT_Error *kiln_Executable_Fingerprint(PJRT_Executable_Fingerprint_Args *args) {
  KILN_PJRT_ARGS_ON(Executable_Fingerprint, args, executable_fingerprint_size, executable);
  args->executable_fingerprint = kiln_program_fingerprint(args->executable->program);
  args->executable_fingerprint_size = strlen(args->executable_fingerprint);
  return NULL;
}

PJRT_Error *kiln_Executable_GetCompiledMemoryStats(
    PJRT_Executable_GetCompiledMemoryStats_Args *args) {
  KILN_PJRT_ARGS(Executable_GetCompiledMemoryStats, args, host_temp_size_in_bytes);
  return kiln_pjrt_error(PJRT_Error_Code_UNIMPLEMENTED,
                         "Kiln's PJRT plugin reports no compiled memory statistics yet");
}

PJRT_Error *kiln_Executable_Serialize(PJRT_Executable_Serialize_Args *args) {
  KILN_PJRT_ARGS_ON(Executable_Serialize, args, serialized_executable_deleter, executable);
  return kiln_pjrt_serialize(args->executable->program, args);
}

PJRT_Error *kiln_Executable_DeserializeAndLoad(PJRT_Executable_DeserializeAndLoad_Args *args) {
  KILN_PJRT_ARGS_ON(Executable_DeserializeAndLoad, args, loaded_executable, client);
  if (args->serialized_executable == NULL)
    return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT,
                           "PJRT_Executable_DeserializeAndLoad: no serialized executable");
  const char *options = NULL;
  size_t options_size = 0;
  if (KILN_PJRT_HAS_FIELD(PJRT_Executable_DeserializeAndLoad_Args, args,
                          overridden_serialized_compile_options_size)) {
    options = args->overridden_serialized_compile_options;
    options_size = options ? args->overridden_serialized_compile_options_size : 0;
  }
  return kiln_pjrt_deserialize(args->client, args->serialized_executable,
                               args->serialized_executable_size, options, options_size,
                               &args->loaded_executable);
}

/* ---- the Shardings extension ---- */
/* The framework passes the PJRT_Executable of a loaded executable (GetExecutable's), whose
 * first field, like a PJRT_LoadedExecutable's, is the program. */
static void report(const KilnShardings *found, size_t *count, const char *const **shardings,
                   const size_t **sizes) {
  *count = found->bytes ? found->count : 0;
  *shardings = found->bytes;
  *sizes = found->sizes;
}

static PJRT_Error *parameter_shardings(PJRT_Shardings_PJRT_Executable_ParameterShardings_Args *args) {
  KILN_PJRT_ARGS_ON(Shardings_PJRT_Executable_ParameterShardings, args, sharding_sizes, executable);
  report(kiln_program_parameter_shardings(args->executable->program), &args->num_parameters,
         &args->shardings, &args->sharding_sizes);
  return NULL;
}

static PJRT_Error *output_shardings(PJRT_Shardings_PJRT_Executable_OutputShardings_Args *args) {
  KILN_PJRT_ARGS_ON(Shardings_PJRT_Executable_OutputShardings, args, sharding_sizes, executable);
  report(kiln_program_output_shardings(args->executable->program), &args->num_outputs,
         &args->shardings, &args->sharding_sizes);
  return NULL;
}

PJRT_Shardings_Extension kiln_pjrt_shardings_extension = {
    .base = {.struct_size = sizeof(PJRT_Shardings_Extension),
             .type = PJRT_Extension_Type_Shardings,
             .next = NULL},
    .PJRT_Shardings_PJRT_Executable_ParameterShardings = parameter_shardings,
    .PJRT_Shardings_PJRT_Executable_OutputShardings = output_shardings,
};
