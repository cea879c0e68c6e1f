/* The client, its devices, their memories and the topology of Kiln's PJRT plugin.
 *
 * Kiln's devices are CPU threads of this process sharing host memory: one by default, N with
 * the client option "num_devices" (the Python side passes KILN_DEVICES). Each device has one
 * memory, of kind "device", which is host memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_pjrt_internal.h"

#define MEMORY_KIND "device"

typedef struct UserData {
  const void *key;
  void *data;
  void (*destructor)(void *);
  struct UserData *next;
} UserData;

struct KilnMemory {
  PJRT_Memory base; /* first: the framework reads the function table through it */
  int id;
  PJRT_Device *device;
  char debug_string[64];
  char to_string[64];
  pthread_mutex_t mutex; /* guards user_data */
  UserData *user_data;
};

static KilnMemory *as_kiln(PJRT_Memory *memory) { return (KilnMemory *)memory; }

static void *memory_get_user_data(PJRT_Memory *memory, const void *key) {
  KilnMemory *kiln = as_kiln(memory);
  void *data = NULL;
  pthread_mutex_lock(&kiln->mutex);
  for (UserData *entry = kiln->user_data; entry; entry = entry->next)
    if (entry->key == key) {
      data = entry->data;
      break;
    }
  pthread_mutex_unlock(&kiln->mutex);
  return data;
}

static void memory_set_user_data(PJRT_Memory *memory, const void *key, void *data,
                                 void (*destructor)(void *)) {
  KilnMemory *kiln = as_kiln(memory);
  void (*old_destructor)(void *) = NULL;
  void *old_data = NULL;
  pthread_mutex_lock(&kiln->mutex);
  UserData *entry = kiln->user_data;
  while (entry && entry->key != key) entry = entry->next;
  if (entry == NULL && (entry = calloc(1, sizeof *entry)) != NULL) {
    entry->key = key;
    entry->next = kiln->user_data;
    kiln->user_data = entry;
  } else if (entry != NULL) {
    old_destructor = entry->destructor;
    old_data = entry->data;
  }
  if (entry != NULL) {
    entry->data = data;
    entry->destructor = destructor;
  }
  pthread_mutex_unlock(&kiln->mutex);
  if (old_destructor && old_data) old_destructor(old_data); /* outside the lock */
}

static const PJRT_Memory_FunctionTable memory_table = {
    .struct_size = sizeof(PJRT_Memory_FunctionTable),
    .extension_start = NULL,
    .instance_struct_size = sizeof(KilnMemory),
    .get_user_data = memory_get_user_data,
    .set_user_data = memory_set_user_data,
};

PJRT_Memory *kiln_pjrt_device_memory(PJRT_Device *device) { return &device->memory->base; }

static void client_free(PJRT_Client *client) {
  if (client == NULL) return;
  for (int i = 0; i < client->num_devices; i++) {
    PJRT_Device *device = client->devices ? client->devices[i] : NULL;
    if (device == NULL) continue;
    kiln_pjrt_queue_close(device);
    KilnMemory *memory = device->memory;
    if (memory) {
      for (UserData *entry = memory->user_data; entry;) {
        UserData *next = entry->next;
        if (entry->destructor && entry->data) entry->destructor(entry->data);
        free(entry);
        entry = next;
      }
      pthread_mutex_destroy(&memory->mutex);
      free(memory);
    }
    free(device);
  }
  free(client->devices);
  free(client->descriptions);
  free(client->memories);
  free(client);
}

/* The value of integer option `name`, or `fallback`. */
static PJRT_Error *int_option(const PJRT_NamedValue *options, size_t count, const char *name,
                              int64_t fallback, int64_t *value) {
  *value = fallback;
  for (size_t i = 0; i < count; i++) {
    const PJRT_NamedValue *option = &options[i];
    if (option->name_size != strlen(name) || memcmp(option->name, name, option->name_size))
      continue;
    if (option->type != PJRT_NamedValue_kInt64)
      return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT,
                             "Kiln PJRT client option '%s' must be an integer", name);
    *value = option->int64_value;
  }
  return NULL;
}

/* Options Kiln knows; any other is an error (a typo would otherwise be ignored silently). */
static PJRT_Error *check_option_names(const PJRT_NamedValue *options, size_t count) {
  static const char *const known[] = {"num_devices"};
  for (size_t i = 0; i < count; i++) {
    bool found = false;
    for (size_t k = 0; k < sizeof known / sizeof *known; k++)
      found |= options[i].name_size == strlen(known[k]) &&
               !memcmp(options[i].name, known[k], options[i].name_size);
    if (!found)
      return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT,
                             "unknown Kiln PJRT client option '%.*s' (known: num_devices)",
                             (int)options[i].name_size, options[i].name);
  }
  return NULL;
}

PJRT_Error *kiln_Client_Create(PJRT_Client_Create_Args *args) {
  KILN_PJRT_ARGS(Client_Create, args, client);
  const PJRT_NamedValue *options = args->num_options ? args->create_options : NULL;
  PJRT_Error *error = check_option_names(options, args->num_options);
  if (error) return error;
  int64_t num_devices;
  if ((error = int_option(options, args->num_options, "num_devices", 1, &num_devices)))
    return error;
  if (num_devices < 1 || num_devices > KILN_PJRT_MAX_DEVICES)
    return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT,
                           "Kiln PJRT client: num_devices must be 1 to %d, got %lld",
                           KILN_PJRT_MAX_DEVICES, (long long)num_devices);
  PJRT_Client *client = calloc(1, sizeof *client);
  if (client == NULL) goto oom;
  client->num_devices = (int)num_devices;
  client->topology.client = client;
  client->devices = calloc((size_t)num_devices, sizeof *client->devices);
  client->descriptions = calloc((size_t)num_devices, sizeof *client->descriptions);
  client->memories = calloc((size_t)num_devices, sizeof *client->memories);
  if (!client->devices || !client->descriptions || !client->memories) goto oom;
  for (int i = 0; i < client->num_devices; i++) {
    PJRT_Device *device = calloc(1, sizeof *device);
    if (device == NULL) goto oom;
    client->devices[i] = device;
    device->client = client;
    device->description.id = i;
    snprintf(device->description.kind, sizeof device->description.kind, "kiln");
    snprintf(device->description.debug_string, sizeof device->description.debug_string,
             "KILN_%d", i);
    snprintf(device->description.to_string, sizeof device->description.to_string,
             "KilnDevice(id=%d)", i);
    client->descriptions[i] = &device->description;
    KilnMemory *memory = calloc(1, sizeof *memory);
    if (memory == NULL) goto oom;
    device->memory = memory;
    memory->base.vtable = &memory_table;
    memory->id = i;
    memory->device = device;
    pthread_mutex_init(&memory->mutex, NULL);
    snprintf(memory->debug_string, sizeof memory->debug_string, "KILN_%d:" MEMORY_KIND, i);
    snprintf(memory->to_string, sizeof memory->to_string,
             "KilnMemory(id=%d, kind=" MEMORY_KIND ")", i);
    client->memories[i] = &memory->base;
  }
  args->client = client;
  return NULL;
oom:
  client_free(client);
  return kiln_pjrt_out_of_memory("PJRT_Client_Create");
}

PJRT_Error *kiln_Client_Destroy(PJRT_Client_Destroy_Args *args) {
  KILN_PJRT_ARGS(Client_Destroy, args, client);
  client_free(args->client);
  return NULL;
}

PJRT_Error *kiln_Client_PlatformName(PJRT_Client_PlatformName_Args *args) {
  KILN_PJRT_ARGS(Client_PlatformName, args, platform_name_size);
  KILN_PJRT_SET_STRING(args, platform_name, KILN_PJRT_PLATFORM);
  return NULL;
}

PJRT_Error *kiln_Client_ProcessIndex(PJRT_Client_ProcessIndex_Args *args) {
  KILN_PJRT_ARGS(Client_ProcessIndex, args, process_index);
  args->process_index = 0;
  return NULL;
}

PJRT_Error *kiln_Client_PlatformVersion(PJRT_Client_PlatformVersion_Args *args) {
  KILN_PJRT_ARGS(Client_PlatformVersion, args, platform_version_size);
  KILN_PJRT_SET_STRING(args, platform_version, "kiln (PJRT C API 0.112)");
  return NULL;
}

PJRT_Error *kiln_Client_Devices(PJRT_Client_Devices_Args *args) {
  KILN_PJRT_ARGS_ON(Client_Devices, args, num_devices, client);
  args->devices = args->client->devices;
  args->num_devices = (size_t)args->client->num_devices;
  return NULL;
}

PJRT_Error *kiln_Client_AddressableDevices(PJRT_Client_AddressableDevices_Args *args) {
  KILN_PJRT_ARGS_ON(Client_AddressableDevices, args, num_addressable_devices, client);
  args->addressable_devices = args->client->devices;
  args->num_addressable_devices = (size_t)args->client->num_devices;
  return NULL;
}

static PJRT_Error *lookup(PJRT_Client *client, int id, PJRT_Device **device) {
  if (id < 0 || id >= client->num_devices)
    return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT,
                           "no Kiln device with id %d (this client has %d)", id,
                           client->num_devices);
  *device = client->devices[id];
  return NULL;
}

PJRT_Error *kiln_Client_LookupDevice(PJRT_Client_LookupDevice_Args *args) {
  KILN_PJRT_ARGS_ON(Client_LookupDevice, args, device, client);
  return lookup(args->client, args->id, &args->device);
}

PJRT_Error *kiln_Client_LookupAddressableDevice(PJRT_Client_LookupAddressableDevice_Args *args) {
  KILN_PJRT_ARGS_ON(Client_LookupAddressableDevice, args, addressable_device, client);
  return lookup(args->client, args->local_hardware_id, &args->addressable_device);
}

PJRT_Error *kiln_Client_AddressableMemories(PJRT_Client_AddressableMemories_Args *args) {
  KILN_PJRT_ARGS_ON(Client_AddressableMemories, args, num_addressable_memories, client);
  args->addressable_memories = args->client->memories;
  args->num_addressable_memories = (size_t)args->client->num_devices;
  return NULL;
}

PJRT_Error *kiln_Client_DefaultDeviceAssignment(PJRT_Client_DefaultDeviceAssignment_Args *args) {
  KILN_PJRT_ARGS_ON(Client_DefaultDeviceAssignment, args, default_assignment, client);
  int64_t needed = (int64_t)args->num_replicas * args->num_partitions;
  if (args->num_replicas < 1 || args->num_partitions < 1 || needed > args->client->num_devices)
    return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT,
                           "%d replica(s) x %d partition(s) need more devices than Kiln's %d "
                           "(set KILN_DEVICES=N before importing jax)",
                           args->num_replicas, args->num_partitions, args->client->num_devices);
  if ((int64_t)args->default_assignment_size < needed)
    return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT,
                           "PJRT_Client_DefaultDeviceAssignment: room for %zu ids, need %lld",
                           args->default_assignment_size, (long long)needed);
  for (int64_t i = 0; i < needed; i++) args->default_assignment[i] = (int)i;
  return NULL;
}

PJRT_Error *kiln_Client_TopologyDescription(PJRT_Client_TopologyDescription_Args *args) {
  KILN_PJRT_ARGS_ON(Client_TopologyDescription, args, topology, client);
  args->topology = &args->client->topology;
  return NULL;
}

/* ---- device descriptions ---- */
PJRT_Error *kiln_DeviceDescription_Id(PJRT_DeviceDescription_Id_Args *args) {
  KILN_PJRT_ARGS_ON(DeviceDescription_Id, args, id, device_description);
  args->id = args->device_description->id;
  return NULL;
}

PJRT_Error *kiln_DeviceDescription_ProcessIndex(PJRT_DeviceDescription_ProcessIndex_Args *args) {
  KILN_PJRT_ARGS(DeviceDescription_ProcessIndex, args, process_index);
  args->process_index = 0;
  return NULL;
}

PJRT_Error *kiln_DeviceDescription_Attributes(PJRT_DeviceDescription_Attributes_Args *args) {
  KILN_PJRT_ARGS(DeviceDescription_Attributes, args, attributes);
  args->num_attributes = 0; /* Kiln's devices have no platform-specific attributes */
  args->attributes = NULL;
  return NULL;
}

PJRT_Error *kiln_DeviceDescription_Kind(PJRT_DeviceDescription_Kind_Args *args) {
  KILN_PJRT_ARGS_ON(DeviceDescription_Kind, args, device_kind_size, device_description);
  KILN_PJRT_SET_STRING(args, device_kind, args->device_description->kind);
  return NULL;
}

PJRT_Error *kiln_DeviceDescription_DebugString(PJRT_DeviceDescription_DebugString_Args *args) {
  KILN_PJRT_ARGS_ON(DeviceDescription_DebugString, args, debug_string_size, device_description);
  KILN_PJRT_SET_STRING(args, debug_string, args->device_description->debug_string);
  return NULL;
}

PJRT_Error *kiln_DeviceDescription_ToString(PJRT_DeviceDescription_ToString_Args *args) {
  KILN_PJRT_ARGS_ON(DeviceDescription_ToString, args, to_string_size, device_description);
  KILN_PJRT_SET_STRING(args, to_string, args->device_description->to_string);
  return NULL;
}

/* ---- devices ---- */
PJRT_Error *kiln_Device_GetDescription(PJRT_Device_GetDescription_Args *args) {
  KILN_PJRT_ARGS_ON(Device_GetDescription, args, device_description, device);
  args->device_description = &args->device->description;
  return NULL;
}

PJRT_Error *kiln_Device_IsAddressable(PJRT_Device_IsAddressable_Args *args) {
  KILN_PJRT_ARGS(Device_IsAddressable, args, is_addressable);
  args->is_addressable = true;
  return NULL;
}

PJRT_Error *kiln_Device_LocalHardwareId(PJRT_Device_LocalHardwareId_Args *args) {
  KILN_PJRT_ARGS_ON(Device_LocalHardwareId, args, local_hardware_id, device);
  args->local_hardware_id = args->device->description.id;
  return NULL;
}

PJRT_Error *kiln_Device_AddressableMemories(PJRT_Device_AddressableMemories_Args *args) {
  KILN_PJRT_ARGS_ON(Device_AddressableMemories, args, num_memories, device);
  PJRT_Client *client = args->device->client;
  args->memories = &client->memories[args->device->description.id];
  args->num_memories = 1;
  return NULL;
}

PJRT_Error *kiln_Device_DefaultMemory(PJRT_Device_DefaultMemory_Args *args) {
  KILN_PJRT_ARGS_ON(Device_DefaultMemory, args, memory, device);
  args->memory = kiln_pjrt_device_memory(args->device);
  return NULL;
}

PJRT_Error *kiln_Device_MemoryStats(PJRT_Device_MemoryStats_Args *args) {
  KILN_PJRT_ARGS(Device_MemoryStats, args, bytes_in_use);
  return kiln_pjrt_error(PJRT_Error_Code_UNIMPLEMENTED,
                         "Kiln's devices use host memory and keep no memory statistics");
}

static void no_attributes_to_delete(PJRT_Device_Attributes *attributes) { (void)attributes; }

PJRT_Error *kiln_Device_GetAttributes(PJRT_Device_GetAttributes_Args *args) {
  KILN_PJRT_ARGS(Device_GetAttributes, args, attributes_deleter);
  args->attributes = NULL;
  args->num_attributes = 0;
  args->device_attributes = NULL;
  args->attributes_deleter = no_attributes_to_delete; /* must not be NULL */
  return NULL;
}

/* ---- memories ---- */
PJRT_Error *kiln_Memory_Id(PJRT_Memory_Id_Args *args) {
  KILN_PJRT_ARGS_ON(Memory_Id, args, id, memory);
  args->id = as_kiln(args->memory)->id;
  return NULL;
}

PJRT_Error *kiln_Memory_Kind(PJRT_Memory_Kind_Args *args) {
  KILN_PJRT_ARGS(Memory_Kind, args, kind_size);
  KILN_PJRT_SET_STRING(args, kind, MEMORY_KIND);
  return NULL;
}

PJRT_Error *kiln_Memory_Kind_Id(PJRT_Memory_Kind_Id_Args *args) {
  KILN_PJRT_ARGS(Memory_Kind_Id, args, kind_id);
  args->kind_id = 0; /* the only kind */
  return NULL;
}

PJRT_Error *kiln_Memory_DebugString(PJRT_Memory_DebugString_Args *args) {
  KILN_PJRT_ARGS_ON(Memory_DebugString, args, debug_string_size, memory);
  KILN_PJRT_SET_STRING(args, debug_string, as_kiln(args->memory)->debug_string);
  return NULL;
}

PJRT_Error *kiln_Memory_ToString(PJRT_Memory_ToString_Args *args) {
  KILN_PJRT_ARGS_ON(Memory_ToString, args, to_string_size, memory);
  KILN_PJRT_SET_STRING(args, to_string, as_kiln(args->memory)->to_string);
  return NULL;
}

PJRT_Error *kiln_Memory_AddressableByDevices(PJRT_Memory_AddressableByDevices_Args *args) {
  KILN_PJRT_ARGS_ON(Memory_AddressableByDevices, args, num_devices, memory);
  KilnMemory *memory = as_kiln(args->memory);
  args->devices = &memory->device->client->devices[memory->device->description.id];
  args->num_devices = 1;
  return NULL;
}

/* ---- topology: the client's devices ---- */
PJRT_Error *kiln_TopologyDescription_Destroy(PJRT_TopologyDescription_Destroy_Args *args) {
  KILN_PJRT_ARGS(TopologyDescription_Destroy, args, topology);
  return NULL; /* the only topologies are clients' own, freed with them */
}

PJRT_Error *kiln_TopologyDescription_PlatformName(PJRT_TopologyDescription_PlatformName_Args *args) {
  KILN_PJRT_ARGS(TopologyDescription_PlatformName, args, platform_name_size);
  KILN_PJRT_SET_STRING(args, platform_name, KILN_PJRT_PLATFORM);
  return NULL;
}

PJRT_Error *kiln_TopologyDescription_PlatformVersion(
    PJRT_TopologyDescription_PlatformVersion_Args *args) {
  KILN_PJRT_ARGS(TopologyDescription_PlatformVersion, args, platform_version_size);
  KILN_PJRT_SET_STRING(args, platform_version, "kiln (PJRT C API 0.112)");
  return NULL;
}

PJRT_Error *kiln_TopologyDescription_GetDeviceDescriptions(
    PJRT_TopologyDescription_GetDeviceDescriptions_Args *args) {
  KILN_PJRT_ARGS_ON(TopologyDescription_GetDeviceDescriptions, args, num_descriptions, topology);
  PJRT_Client *client = args->topology->client;
  args->descriptions = client->descriptions;
  args->num_descriptions = (size_t)client->num_devices;
  return NULL;
}

PJRT_Error *kiln_TopologyDescription_Attributes(PJRT_TopologyDescription_Attributes_Args *args) {
  KILN_PJRT_ARGS(TopologyDescription_Attributes, args, num_attributes);
  args->attributes = NULL;
  args->num_attributes = 0;
  return NULL;
}

/* What identifies a topology for the framework's compile cache key (JAX hashes it): Kiln's
 * platform and its device count, the only things a Kiln topology has. FNV-1a, 64 bits. */
PJRT_Error *kiln_TopologyDescription_Fingerprint(PJRT_TopologyDescription_Fingerprint_Args *args) {
  KILN_PJRT_ARGS_ON(TopologyDescription_Fingerprint, args, fingerprint, topology);
  char text[64];
  int length = snprintf(text, sizeof text, KILN_PJRT_PLATFORM " devices=%d",
                        args->topology->client->num_devices);
  uint64_t hash = 14695981039346656037ull;
  for (int i = 0; i < length; i++) hash = (hash ^ (unsigned char)text[i]) * 1099511628211ull;
  args->fingerprint = hash;
  return NULL;
}
