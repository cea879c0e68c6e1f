/* Buffers of Kiln's PJRT plugin: arrays in host memory, dense and row-major.
 *
 * Host data arrives with byte strides (transposed or sliced numpy arrays) and leaves with the
 * host layout the framework asks for; both are honoured by a strided copy. A buffer's memory
 * lives until its handle is destroyed and every external reference (a numpy array that JAX
 * made over it, reading it in place) is dropped: `holds` counts them. */
#include <stdlib.h>
#include <string.h>

#include "kiln_pjrt_internal.h"

size_t kiln_pjrt_element_size(PJRT_Buffer_Type type) {
  switch (type) {
    case PJRT_Buffer_Type_PRED:
    case PJRT_Buffer_Type_S8:
    case PJRT_Buffer_Type_U8:
    case PJRT_Buffer_Type_S4:
    case PJRT_Buffer_Type_U4:
    case PJRT_Buffer_Type_S2:
    case PJRT_Buffer_Type_U2:
    case PJRT_Buffer_Type_F8E5M2:
    case PJRT_Buffer_Type_F8E4M3FN:
    case PJRT_Buffer_Type_F8E4M3B11FNUZ:
    case PJRT_Buffer_Type_F8E5M2FNUZ:
    case PJRT_Buffer_Type_F8E4M3FNUZ:
    case PJRT_Buffer_Type_F8E4M3:
    case PJRT_Buffer_Type_F8E3M4:
    case PJRT_Buffer_Type_F8E8M0FNU:
    case PJRT_Buffer_Type_F4E2M1FN:
      return 1;
    case PJRT_Buffer_Type_S16:
    case PJRT_Buffer_Type_U16:
    case PJRT_Buffer_Type_F16:
    case PJRT_Buffer_Type_BF16:
      return 2;
    case PJRT_Buffer_Type_S32:
    case PJRT_Buffer_Type_U32:
    case PJRT_Buffer_Type_F32:
      return 4;
    case PJRT_Buffer_Type_S64:
    case PJRT_Buffer_Type_U64:
    case PJRT_Buffer_Type_F64:
    case PJRT_Buffer_Type_C64:
      return 8;
    case PJRT_Buffer_Type_C128:
      return 16;
    default:
      return 0;
  }
}

int64_t kiln_pjrt_element_count(const int64_t *dims, size_t rank) {
  int64_t count = 1;
  for (size_t i = 0; i < rank; i++) {
    if (dims[i] < 0 || (dims[i] > 0 && count > INT64_MAX / dims[i])) return -1;
    count *= dims[i];
  }
  return count;
}

/* The buffer's shape, without data: dims and a row-major minor_to_major in one block. */
static PJRT_Buffer *buffer_shell(PJRT_Device *device, PJRT_Buffer_Type type, const int64_t *dims,
                                 size_t rank) {
  PJRT_Buffer *buffer = calloc(1, sizeof *buffer);
  if (buffer == NULL) return NULL;
  buffer->dims = malloc((2 * rank + 1) * sizeof(int64_t));
  if (buffer->dims == NULL) {
    free(buffer);
    return NULL;
  }
  if (rank) memcpy(buffer->dims, dims, rank * sizeof(int64_t));
  for (size_t i = 0; i < rank; i++) buffer->dims[rank + i] = (int64_t)(rank - 1 - i);
  buffer->device = device;
  buffer->type = type;
  buffer->rank = rank;
  buffer->size_bytes = (size_t)kiln_pjrt_element_count(dims, rank) * kiln_pjrt_element_size(type);
  atomic_init(&buffer->holds, 1);
  atomic_init(&buffer->deleted, false);
  return buffer;
}

/* Large blocks kept for reuse, as python/kiln/driver/result_memory.py keeps Kiln's own
 * results': past glibc's mmap threshold a freed block goes back to the kernel, and the next
 * buffer of that size is a fresh mapping that the kernel zeroes page by page before the
 * program writes it (most of a 32 MB elementwise call through the plugin: layernorm 3.7x,
 * int_elementwise 5.3x slower than Kiln called directly). Freed blocks of KEEP_MIN bytes or
 * more wait in a bounded list for the next buffer of the same size. */
#define KEEP_MIN ((size_t)4 << 20)
#define KEEP_MAX ((size_t)256 << 20)
#define KEEP_SLOTS 64
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  size_t size;
  void *data;
} kept[KEEP_SLOTS];
static size_t kept_bytes = 0;

/* 64-byte alignment: what Kiln's generated code and numpy views of it like best. */
static size_t block_size(size_t size_bytes) {
  size_t rounded = (size_bytes + 63) & ~(size_t)63;
  return rounded ? rounded : 64;
}

static void *block_take(size_t size) {
  if (size >= KEEP_MIN) {
    pthread_mutex_lock(&kept_lock);
    for (int i = 0; i < KEEP_SLOTS; i++)
      if (kept[i].data != NULL && kept[i].size == size) {
        void *data = kept[i].data;
        kept[i].data = NULL;
        kept_bytes -= size;
        pthread_mutex_unlock(&kept_lock);
        return data;
      }
    pthread_mutex_unlock(&kept_lock);
  }
  return aligned_alloc(64, size);
}

static void block_give_back(void *data, size_t size) {
  if (size >= KEEP_MIN) {
    pthread_mutex_lock(&kept_lock);
    if (kept_bytes + size <= KEEP_MAX)
      for (int i = 0; i < KEEP_SLOTS; i++)
        if (kept[i].data == NULL) {
          kept[i].data = data;
          kept[i].size = size;
          kept_bytes += size;
          pthread_mutex_unlock(&kept_lock);
          return;
        }
    pthread_mutex_unlock(&kept_lock);
  }
  free(data);
}

PJRT_Buffer *kiln_pjrt_buffer_new(PJRT_Device *device, PJRT_Buffer_Type type,
                                  const int64_t *dims, size_t rank) {
  PJRT_Buffer *buffer = buffer_shell(device, type, dims, rank);
  if (buffer == NULL) return NULL;
  buffer->data = block_take(block_size(buffer->size_bytes));
  if (buffer->data == NULL) {
    free(buffer->dims);
    free(buffer);
    return NULL;
  }
  return buffer;
}

PJRT_Buffer *kiln_pjrt_buffer_adopt(PJRT_Device *device, PJRT_Buffer_Type type,
                                    const int64_t *dims, size_t rank, void *data, void *owner) {
  PJRT_Buffer *buffer = buffer_shell(device, type, dims, rank);
  if (buffer == NULL) return NULL;
  buffer->data = data;
  buffer->owner = owner;
  return buffer;
}

static void buffer_release(PJRT_Buffer *buffer) {
  if (atomic_fetch_sub(&buffer->holds, 1) != 1) return;
  if (buffer->owner) kiln_pjrt_release_owner(buffer->owner);
  else block_give_back(buffer->data, block_size(buffer->size_bytes));
  kiln_pjrt_event_free(buffer->pending);
  free(buffer->dims);
  free(buffer);
}

void kiln_pjrt_buffer_free(PJRT_Buffer *buffer) { buffer_release(buffer); }
void kiln_pjrt_buffer_hold(PJRT_Buffer *buffer) { atomic_fetch_add(&buffer->holds, 1); }
void kiln_pjrt_buffer_release(PJRT_Buffer *buffer) { buffer_release(buffer); }

PJRT_Error *kiln_pjrt_buffer_wait(PJRT_Buffer *buffer) {
  /* A failed run's error as it was: the first run's message, however far it was passed on. */
  return buffer->pending ? kiln_pjrt_event_wait(buffer->pending) : NULL;
}

/* Checks a shape and element type from the framework. */
static PJRT_Error *check_shape(const char *entry, PJRT_Buffer_Type type, const int64_t *dims,
                               size_t rank) {
  if (kiln_pjrt_element_size(type) == 0)
    return kiln_pjrt_error(PJRT_Error_Code_UNIMPLEMENTED,
                           "%s: Kiln's PJRT plugin has no arrays of PJRT element type %d", entry,
                           (int)type);
  if (rank && dims == NULL)
    return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT, "%s: no dimensions", entry);
  if (kiln_pjrt_element_count(dims, rank) < 0)
    return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT,
                           "%s: negative or overflowing dimensions", entry);
  return NULL;
}

/* Copies an array of `rank` dims between two strided layouts (byte strides); innermost runs
 * that are dense on both sides become one memcpy. */
static void strided_copy(char *dst, const int64_t *dst_strides, const char *src,
                         const int64_t *src_strides, const int64_t *dims, size_t rank,
                         size_t element) {
  if (rank == 0) {
    memcpy(dst, src, element);
    return;
  }
  if (rank == 1 && dst_strides[0] == (int64_t)element && src_strides[0] == (int64_t)element) {
    memcpy(dst, src, (size_t)dims[0] * element);
    return;
  }
  for (int64_t i = 0; i < dims[0]; i++)
    strided_copy(dst + i * dst_strides[0], dst_strides + 1, src + i * src_strides[0],
                 src_strides + 1, dims + 1, rank - 1, element);
}

static void dense_strides(const int64_t *dims, size_t rank, size_t element, int64_t *strides) {
  int64_t stride = (int64_t)element;
  for (size_t i = rank; i-- > 0;) {
    strides[i] = stride;
    stride *= dims[i] ? dims[i] : 1;
  }
}

/* Whether `layout` (possibly NULL) is the dense row-major layout Kiln keeps. */
static bool is_row_major(const PJRT_Buffer_MemoryLayout *layout, size_t rank) {
  if (layout == NULL) return true;
  if (layout->type != PJRT_Buffer_MemoryLayout_Type_Tiled) return false;
  const PJRT_Buffer_MemoryLayout_Tiled *tiled = &layout->tiled;
  if (tiled->num_tiles != 0) return false;
  if (tiled->minor_to_major_size == 0) return true;
  if (tiled->minor_to_major_size != rank) return false;
  for (size_t i = 0; i < rank; i++)
    if (tiled->minor_to_major[i] != (int64_t)(rank - 1 - i)) return false;
  return true;
}

/* Byte strides of a host layout (strides, or a permutation without tiles); false if Kiln
 * cannot write that layout. */
static bool host_layout_strides(const PJRT_Buffer_MemoryLayout *layout, const int64_t *dims,
                                size_t rank, size_t element, int64_t *strides) {
  if (layout == NULL || is_row_major(layout, rank)) {
    dense_strides(dims, rank, element, strides);
    return true;
  }
  if (layout->type == PJRT_Buffer_MemoryLayout_Type_Strides) {
    if (layout->strides.num_byte_strides != rank) return false;
    memcpy(strides, layout->strides.byte_strides, rank * sizeof(int64_t));
    return true;
  }
  const PJRT_Buffer_MemoryLayout_Tiled *tiled = &layout->tiled;
  if (tiled->num_tiles != 0 || tiled->minor_to_major_size != rank) return false;
  int64_t stride = (int64_t)element;
  for (size_t i = 0; i < rank; i++) {
    int64_t dim = tiled->minor_to_major[i];
    if (dim < 0 || (size_t)dim >= rank) return false;
    strides[dim] = stride;
    stride *= dims[dim] ? dims[dim] : 1;
  }
  return true;
}

/* The bytes a strided array spans. */
static size_t strided_extent(const int64_t *dims, const int64_t *strides, size_t rank,
                             size_t element) {
  size_t extent = element;
  for (size_t i = 0; i < rank; i++) {
    if (dims[i] == 0) return 0;
    extent += (size_t)((dims[i] - 1) * (strides[i] < 0 ? -strides[i] : strides[i]));
  }
  return extent;
}

static PJRT_Device *memory_device(PJRT_Client *client, PJRT_Device *device, PJRT_Memory *memory) {
  if (memory != NULL) {
    for (int i = 0; i < client->num_devices; i++)
      if (client->memories[i] == memory) return client->devices[i];
    return NULL;
  }
  return device ? device : client->devices[0];
}

PJRT_Error *kiln_Client_BufferFromHostBuffer(PJRT_Client_BufferFromHostBuffer_Args *args) {
  KILN_PJRT_ARGS_ON(Client_BufferFromHostBuffer, args, buffer, client);
  const char *entry = "PJRT_Client_BufferFromHostBuffer";
  PJRT_Error *error = check_shape(entry, args->type, args->dims, args->num_dims);
  if (error) return error;
  if (!is_row_major(args->device_layout, args->num_dims))
    return kiln_pjrt_error(PJRT_Error_Code_UNIMPLEMENTED,
                           "%s: Kiln keeps arrays row-major; another device layout was asked",
                           entry);
  PJRT_Device *device = memory_device(args->client, args->device, args->memory);
  if (device == NULL)
    return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT, "%s: not a memory of this client",
                           entry);
  size_t rank = args->num_dims;
  if (args->byte_strides != NULL && args->num_byte_strides != rank)
    return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT,
                           "%s: %zu byte strides for %zu dimensions", entry,
                           args->num_byte_strides, rank);
  PJRT_Buffer *buffer = kiln_pjrt_buffer_new(device, args->type, args->dims, rank);
  if (buffer == NULL)
    return kiln_pjrt_out_of_memory(entry);
  size_t element = kiln_pjrt_element_size(args->type);
  int64_t dense[rank ? rank : 1];
  dense_strides(args->dims, rank, element, dense);
  if (buffer->size_bytes == 0) {
    /* nothing to copy */
  } else if (args->byte_strides == NULL ||
             !memcmp(args->byte_strides, dense, rank * sizeof(int64_t))) {
    memcpy(buffer->data, args->data, buffer->size_bytes);
  } else {
    strided_copy(buffer->data, dense, args->data, args->byte_strides, args->dims, rank, element);
  }
  /* The data was copied: the host buffer is free as soon as this returns. */
  args->done_with_host_buffer = kiln_pjrt_event_ready(NULL);
  args->buffer = buffer;
  return NULL;
}

PJRT_Error *kiln_Client_CreateUninitializedBuffer(
    PJRT_Client_CreateUninitializedBuffer_Args *args) {
  KILN_PJRT_ARGS_ON(Client_CreateUninitializedBuffer, args, buffer, client);
  const char *entry = "PJRT_Client_CreateUninitializedBuffer";
  PJRT_Error *error =
      check_shape(entry, args->shape_element_type, args->shape_dims, args->shape_num_dims);
  if (error) return error;
  if (!is_row_major(args->shape_layout, args->shape_num_dims))
    return kiln_pjrt_error(PJRT_Error_Code_UNIMPLEMENTED, "%s: Kiln keeps arrays row-major", entry);
  PJRT_Device *device = memory_device(args->client, args->device, args->memory);
  if (device == NULL)
    return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT, "%s: not a memory of this client",
                           entry);
  PJRT_Buffer *buffer = kiln_pjrt_buffer_new(device, args->shape_element_type, args->shape_dims,
                                             args->shape_num_dims);
  if (buffer == NULL)
    return kiln_pjrt_out_of_memory(entry);
  memset(buffer->data, 0, buffer->size_bytes);
  args->buffer = buffer;
  return NULL;
}

PJRT_Error *kiln_Buffer_Destroy(PJRT_Buffer_Destroy_Args *args) {
  KILN_PJRT_ARGS(Buffer_Destroy, args, buffer);
  if (args->buffer) buffer_release(args->buffer);
  return NULL;
}

PJRT_Error *kiln_Buffer_ElementType(PJRT_Buffer_ElementType_Args *args) {
  KILN_PJRT_ARGS_ON(Buffer_ElementType, args, type, buffer);
  args->type = args->buffer->type;
  return NULL;
}

PJRT_Error *kiln_Buffer_Dimensions(PJRT_Buffer_Dimensions_Args *args) {
  KILN_PJRT_ARGS_ON(Buffer_Dimensions, args, num_dims, buffer);
  args->dims = args->buffer->dims;
  args->num_dims = args->buffer->rank;
  return NULL;
}

PJRT_Error *kiln_Buffer_UnpaddedDimensions(PJRT_Buffer_UnpaddedDimensions_Args *args) {
  KILN_PJRT_ARGS_ON(Buffer_UnpaddedDimensions, args, num_dims, buffer);
  args->unpadded_dims = args->buffer->dims; /* Kiln does not pad */
  args->num_dims = args->buffer->rank;
  return NULL;
}

PJRT_Error *kiln_Buffer_DynamicDimensionIndices(PJRT_Buffer_DynamicDimensionIndices_Args *args) {
  KILN_PJRT_ARGS(Buffer_DynamicDimensionIndices, args, num_dynamic_dims);
  args->dynamic_dim_indices = NULL; /* buffers have static shapes */
  args->num_dynamic_dims = 0;
  return NULL;
}

PJRT_Error *kiln_Buffer_GetMemoryLayout(PJRT_Buffer_GetMemoryLayout_Args *args) {
  KILN_PJRT_ARGS_ON(Buffer_GetMemoryLayout, args, layout, buffer);
  PJRT_Buffer *buffer = args->buffer;
  memset(&args->layout, 0, sizeof args->layout);
  args->layout.struct_size = sizeof args->layout;
  args->layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
  args->layout.tiled.struct_size = sizeof args->layout.tiled;
  args->layout.tiled.minor_to_major = buffer->dims + buffer->rank;
  args->layout.tiled.minor_to_major_size = buffer->rank;
  args->layout.tiled.num_tiles = 0;
  return NULL;
}

PJRT_Error *kiln_Buffer_OnDeviceSizeInBytes(PJRT_Buffer_OnDeviceSizeInBytes_Args *args) {
  KILN_PJRT_ARGS_ON(Buffer_OnDeviceSizeInBytes, args, on_device_size_in_bytes, buffer);
  args->on_device_size_in_bytes = args->buffer->size_bytes;
  return NULL;
}

PJRT_Error *kiln_Buffer_Device(PJRT_Buffer_Device_Args *args) {
  KILN_PJRT_ARGS_ON(Buffer_Device, args, device, buffer);
  args->device = args->buffer->device;
  return NULL;
}

PJRT_Error *kiln_Buffer_Memory(PJRT_Buffer_Memory_Args *args) {
  KILN_PJRT_ARGS_ON(Buffer_Memory, args, memory, buffer);
  args->memory = kiln_pjrt_device_memory(args->buffer->device);
  return NULL;
}

PJRT_Error *kiln_Buffer_Delete(PJRT_Buffer_Delete_Args *args) {
  KILN_PJRT_ARGS_ON(Buffer_Delete, args, buffer, buffer);
  /* The memory goes with the handle (or the last external reference); from now on the buffer
   * may not be used as an argument. */
  atomic_store(&args->buffer->deleted, true);
  return NULL;
}

PJRT_Error *kiln_Buffer_IsDeleted(PJRT_Buffer_IsDeleted_Args *args) {
  KILN_PJRT_ARGS_ON(Buffer_IsDeleted, args, is_deleted, buffer);
  args->is_deleted = atomic_load(&args->buffer->deleted);
  return NULL;
}

static PJRT_Error *copy_to(const char *entry, PJRT_Buffer *source, PJRT_Device *device,
                           PJRT_Buffer **out) {
  if (atomic_load(&source->deleted))
    return kiln_pjrt_error(PJRT_Error_Code_FAILED_PRECONDITION, "%s: the buffer was deleted",
                           entry);
  PJRT_Error *failed = kiln_pjrt_buffer_wait(source);
  if (failed) return failed;
  PJRT_Buffer *copy = kiln_pjrt_buffer_new(device, source->type, source->dims, source->rank);
  if (copy == NULL)
    return kiln_pjrt_out_of_memory(entry);
  memcpy(copy->data, source->data, source->size_bytes);
  *out = copy;
  return NULL;
}

PJRT_Error *kiln_Buffer_CopyToDevice(PJRT_Buffer_CopyToDevice_Args *args) {
  KILN_PJRT_ARGS_ON(Buffer_CopyToDevice, args, dst_buffer, buffer);
  return copy_to("PJRT_Buffer_CopyToDevice", args->buffer, args->dst_device, &args->dst_buffer);
}

PJRT_Error *kiln_Buffer_CopyToMemory(PJRT_Buffer_CopyToMemory_Args *args) {
  KILN_PJRT_ARGS_ON(Buffer_CopyToMemory, args, dst_buffer, buffer);
  PJRT_Device *device = memory_device(args->buffer->device->client, NULL, args->dst_memory);
  if (device == NULL)
    return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT,
                           "PJRT_Buffer_CopyToMemory: not a memory of this client");
  return copy_to("PJRT_Buffer_CopyToMemory", args->buffer, device, &args->dst_buffer);
}

PJRT_Error *kiln_Buffer_ToHostBuffer(PJRT_Buffer_ToHostBuffer_Args *args) {
  KILN_PJRT_ARGS_ON(Buffer_ToHostBuffer, args, event, src);
  const char *entry = "PJRT_Buffer_ToHostBuffer";
  PJRT_Buffer *buffer = args->src;
  size_t rank = buffer->rank, element = kiln_pjrt_element_size(buffer->type);
  int64_t strides[rank ? rank : 1];
  if (!host_layout_strides(args->host_layout, buffer->dims, rank, element, strides))
    return kiln_pjrt_error(PJRT_Error_Code_UNIMPLEMENTED,
                           "%s: Kiln cannot write a tiled host layout", entry);
  size_t needed = strided_extent(buffer->dims, strides, rank, element);
  if (args->dst == NULL) { /* the caller asks for the size first */
    args->dst_size = needed;
    return NULL;
  }
  if (atomic_load(&buffer->deleted))
    return kiln_pjrt_error(PJRT_Error_Code_FAILED_PRECONDITION, "%s: the buffer was deleted",
                           entry);
  if (args->dst_size < needed)
    return kiln_pjrt_error(PJRT_Error_Code_INVALID_ARGUMENT,
                           "%s: destination of %zu bytes, the array needs %zu", entry,
                           args->dst_size, needed);
  for (size_t i = 0; i < rank; i++)
    if (strides[i] < 0)
      return kiln_pjrt_error(PJRT_Error_Code_UNIMPLEMENTED, "%s: negative host strides", entry);
  PJRT_Error *failed = kiln_pjrt_buffer_wait(buffer);
  if (failed) return failed;
  int64_t dense[rank ? rank : 1];
  dense_strides(buffer->dims, rank, element, dense);
  if (buffer->size_bytes != 0)
    strided_copy(args->dst, strides, buffer->data, dense, buffer->dims, rank, element);
  args->event = kiln_pjrt_event_ready(NULL);
  return NULL;
}

PJRT_Error *kiln_Buffer_CopyRawToHost(PJRT_Buffer_CopyRawToHost_Args *args) {
  KILN_PJRT_ARGS_ON(Buffer_CopyRawToHost, args, event, buffer);
  PJRT_Buffer *buffer = args->buffer;
  if (args->offset < 0 || args->transfer_size < 0 ||
      (uint64_t)args->offset + (uint64_t)args->transfer_size > buffer->size_bytes)
    return kiln_pjrt_error(PJRT_Error_Code_OUT_OF_RANGE,
                           "PJRT_Buffer_CopyRawToHost: bytes [%lld, +%lld) of a %zu-byte buffer",
                           (long long)args->offset, (long long)args->transfer_size,
                           buffer->size_bytes);
  PJRT_Error *failed = kiln_pjrt_buffer_wait(buffer);
  if (failed) return failed;
  memcpy(args->dst, (char *)buffer->data + args->offset, (size_t)args->transfer_size);
  args->event = kiln_pjrt_event_ready(NULL);
  return NULL;
}

PJRT_Error *kiln_Buffer_IsOnCpu(PJRT_Buffer_IsOnCpu_Args *args) {
  KILN_PJRT_ARGS(Buffer_IsOnCpu, args, is_on_cpu);
  args->is_on_cpu = true; /* the framework may read it in place */
  return NULL;
}

/* Completes the framework's event `user_arg` with a buffer's outcome. */
static void complete(PJRT_Error *error, void *user_arg) {
  kiln_pjrt_event_set((PJRT_Event *)user_arg, kiln_pjrt_error_code(error),
                      kiln_pjrt_error_message(error));
  kiln_pjrt_error_free(error);
}

PJRT_Error *kiln_Buffer_ReadyEvent(PJRT_Buffer_ReadyEvent_Args *args) {
  KILN_PJRT_ARGS_ON(Buffer_ReadyEvent, args, event, buffer);
  PJRT_Buffer *buffer = args->buffer;
  if (buffer->pending == NULL || kiln_pjrt_event_is_ready(buffer->pending)) {
    PJRT_Error *error = buffer->pending ? kiln_pjrt_event_wait(buffer->pending) : NULL;
    args->event = kiln_pjrt_event_ready(error);
  } else {
    /* The framework's own event (it destroys it), completed with the run writing the data;
     * the buffer is held until then, so its pending event outlives the callback. */
    args->event = kiln_pjrt_event_new();
    if (args->event == NULL) return kiln_pjrt_out_of_memory("PJRT_Buffer_ReadyEvent");
    if (!kiln_pjrt_event_on_ready(buffer->pending, complete, args->event)) {
      kiln_pjrt_event_free(args->event);
      args->event = NULL;
      return kiln_pjrt_out_of_memory("PJRT_Buffer_ReadyEvent");
    }
  }
  if (args->event == NULL) return kiln_pjrt_out_of_memory("PJRT_Buffer_ReadyEvent");
  return NULL;
}

PJRT_Error *kiln_Buffer_UnsafePointer(PJRT_Buffer_UnsafePointer_Args *args) {
  KILN_PJRT_ARGS_ON(Buffer_UnsafePointer, args, buffer_pointer, buffer);
  PJRT_Error *failed = kiln_pjrt_buffer_wait(args->buffer);
  if (failed) return failed;
  args->buffer_pointer = (uintptr_t)args->buffer->data;
  return NULL;
}

PJRT_Error *kiln_Buffer_IncreaseExternalReferenceCount(
    PJRT_Buffer_IncreaseExternalReferenceCount_Args *args) {
  KILN_PJRT_ARGS_ON(Buffer_IncreaseExternalReferenceCount, args, buffer, buffer);
  /* The framework reads the memory in place from now on: the data must be there. */
  PJRT_Error *failed = kiln_pjrt_buffer_wait(args->buffer);
  if (failed) return failed;
  atomic_fetch_add(&args->buffer->holds, 1);
  return NULL;
}

PJRT_Error *kiln_Buffer_DecreaseExternalReferenceCount(
    PJRT_Buffer_DecreaseExternalReferenceCount_Args *args) {
  KILN_PJRT_ARGS_ON(Buffer_DecreaseExternalReferenceCount, args, buffer, buffer);
  buffer_release(args->buffer);
  return NULL;
}

PJRT_Error *kiln_Buffer_OpaqueDeviceMemoryDataPointer(
    PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args *args) {
  KILN_PJRT_ARGS_ON(Buffer_OpaqueDeviceMemoryDataPointer, args, device_memory_ptr, buffer);
  PJRT_Error *failed = kiln_pjrt_buffer_wait(args->buffer);
  if (failed) return failed;
  args->device_memory_ptr = args->buffer->data;
  return NULL;
}
