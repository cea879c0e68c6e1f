/* XLA's typed FFI (custom calls with api_version 4) in Kiln's runtime.
 *
 * A handler compiled against jaxlib's unmodified headers (xla/ffi/api/{c_api,api,ffi}.h) sees
 * an XLA_FFI_CallFrame and calls back into the XLA_FFI_Api this file provides. Written from
 * the published C API header (c_api.h); the struct layouts are that header's.
 *
 * What a Kiln FFI call site holds (made once, when a program is loaded):
 *  - the handler bundle (instantiate / prepare / initialize / execute);
 *  - every operand and result leaf's XLA dtype and dimensions (data pointers arrive per call);
 *  - the attributes, decoded from the blob Kiln's Python side encodes (`_encode_ffi_attributes`
 *    in kiln/runtime/custom_call.py) into the sorted XLA_FFI_Attrs the headers binary-search;
 *  - the instance state the instantiate stage set.
 * Each call builds its frame on the stack (several threads may call one site), then runs
 * prepare, initialize and execute in turn, with one execution context per call holding the
 * states those stages set and the scratch memory still allocated; both are released after.
 *
 * On the CPU there is no stream (XLA_FFI_Stream_Get fails: the GPU target passes one through
 * kiln_ffi_call's `stream`), no thread pool for handlers, and no user data. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/custom_call.h"
#include "kiln/ffi.h"
#include "xla_ffi_c_api.h"

/* ---- errors ----------------------------------------------------------------------------- */

struct XLA_FFI_Error {
  XLA_FFI_Error_Code code;
  char* message;
};

static XLA_FFI_Error* make_error(XLA_FFI_Error_Code code, const char* message) {
  XLA_FFI_Error* error = (XLA_FFI_Error*)malloc(sizeof(XLA_FFI_Error));
  if (!error) return NULL; /* the caller sees success; nothing better is possible */
  error->code = code;
  error->message = strdup(message ? message : "");
  return error;
}

static XLA_FFI_Error* ffi_error_create(XLA_FFI_Error_Create_Args* args) {
  return make_error(args->errc, args->message);
}

static void ffi_error_get_message(XLA_FFI_Error_GetMessage_Args* args) {
  args->message = args->error && args->error->message ? args->error->message : "";
}

static void destroy_error(XLA_FFI_Error* error) {
  if (!error) return;
  free(error->message);
  free(error);
}

static void ffi_error_destroy(XLA_FFI_Error_Destroy_Args* args) { destroy_error(args->error); }

static const char* code_name(XLA_FFI_Error_Code code) {
  static const char* names[] = {
      "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
      "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
      "UNAUTHENTICATED"};
  return (unsigned)code < sizeof(names) / sizeof(names[0]) ? names[code] : "UNKNOWN";
}

/* ---- registered types (for states and user data) ------------------------------------------ */

typedef struct RegisteredType {
  char* name;
  int64_t id;
  void (*deleter)(void*);
  struct RegisteredType* next;
} RegisteredType;

static pthread_mutex_t types_lock = PTHREAD_MUTEX_INITIALIZER;
static RegisteredType* types = NULL;
static int64_t next_type_id = 1;

static RegisteredType* find_type_locked(int64_t id) {
  for (RegisteredType* t = types; t; t = t->next)
    if (t->id == id) return t;
  return NULL;
}

static XLA_FFI_Error* ffi_type_register(XLA_FFI_Type_Register_Args* args) {
  char name[256];
  size_t len = args->name.len < sizeof name - 1 ? args->name.len : sizeof name - 1;
  memcpy(name, args->name.ptr, len);
  name[len] = '\0';
  pthread_mutex_lock(&types_lock);
  XLA_FFI_Error* error = NULL;
  RegisteredType* found = NULL;
  for (RegisteredType* t = types; t; t = t->next)
    if (strcmp(t->name, name) == 0) found = t;
  if (found) {
    /* Registering a name again (a library loaded twice) must give the same id. */
    if (args->type_id->type_id != 0 && args->type_id->type_id != found->id)
      error = make_error(XLA_FFI_Error_Code_ALREADY_EXISTS,
                         "an FFI type of this name is registered with another type id");
    else
      args->type_id->type_id = found->id;
  } else if (args->type_id->type_id != 0 && find_type_locked(args->type_id->type_id)) {
    error = make_error(XLA_FFI_Error_Code_ALREADY_EXISTS, "this FFI type id is already taken");
  } else {
    RegisteredType* t = (RegisteredType*)calloc(1, sizeof(RegisteredType));
    if (!t) {
      error = make_error(XLA_FFI_Error_Code_RESOURCE_EXHAUSTED, "out of memory");
    } else {
      t->name = strdup(name);
      t->id = args->type_id->type_id ? args->type_id->type_id : next_type_id;
      if (t->id >= next_type_id) next_type_id = t->id + 1;
      t->deleter = args->type_info ? args->type_info->deleter : NULL;
      t->next = types;
      types = t;
      args->type_id->type_id = t->id;
    }
  }
  pthread_mutex_unlock(&types_lock);
  return error;
}

static void delete_state(int64_t type_id, void* state) {
  if (!state) return;
  pthread_mutex_lock(&types_lock);
  RegisteredType* t = find_type_locked(type_id);
  void (*deleter)(void*) = t ? t->deleter : NULL;
  pthread_mutex_unlock(&types_lock);
  if (deleter) deleter(state);
}

/* ---- handlers libraries register themselves (XLA_FFI_REGISTER_HANDLER) --------------------- */

static pthread_mutex_t handlers_lock = PTHREAD_MUTEX_INITIALIZER;
static KilnFfiRegistration* handlers = NULL;

static XLA_FFI_Error* ffi_handler_register(XLA_FFI_Handler_Register_Args* args) {
  KilnFfiRegistration* r = (KilnFfiRegistration*)calloc(1, sizeof(KilnFfiRegistration));
  if (!r) return make_error(XLA_FFI_Error_Code_RESOURCE_EXHAUSTED, "out of memory");
  r->name = strndup(args->name.ptr, args->name.len);
  r->platform = strndup(args->platform.ptr, args->platform.len);
  r->instantiate = (void*)args->bundle.instantiate;
  r->prepare = (void*)args->bundle.prepare;
  r->initialize = (void*)args->bundle.initialize;
  r->execute = (void*)args->bundle.execute;
  r->traits = args->traits;
  pthread_mutex_lock(&handlers_lock);
  r->next = handlers;
  handlers = r;
  pthread_mutex_unlock(&handlers_lock);
  return NULL;
}

KilnFfiRegistration* KilnFfiRegistrations(void) {
  pthread_mutex_lock(&handlers_lock);
  KilnFfiRegistration* head = handlers;
  pthread_mutex_unlock(&handlers_lock);
  return head;
}

/* ---- call sites ----------------------------------------------------------------------------- */

typedef struct FfiLeaf {
  XLA_FFI_DataType dtype;
  int64_t rank;
  int64_t* dims;
} FfiLeaf;

struct KilnFfiSite {
  char* name;
  XLA_FFI_Handler* stages[4]; /* indexed by XLA_FFI_ExecutionStage */
  int64_t num_args, num_rets;
  FfiLeaf* leaves; /* args then rets */
  XLA_FFI_Attrs attrs;
  int64_t instance_type;
  void* instance_state;
};

/* What a handler's context refers to during one stage of one call. */
struct XLA_FFI_ExecutionContext {
  KilnFfiSite* site;
  void* stream;
  int64_t run_id;
  int64_t state_type[4];
  void* state[4];            /* per-call states of prepare and initialize */
  struct Scratch* scratch;   /* blocks handed out and not yet freed */
  KilnFfiDeviceAlloc device_alloc;  /* scratch memory on the device (NULL: host memory) */
  KilnFfiDeviceFree device_free;
};

typedef struct Scratch {
  void* data;
  struct Scratch* next;
} Scratch;

/* -- the attribute blob: a sequence of entries, each
 *      u32 name length, name, u8 kind (XLA_FFI_AttrType), then
 *      SCALAR: u8 dtype, the value (its dtype's size);
 *      ARRAY:  u8 dtype, u64 count, count values;
 *      STRING: u32 length, the bytes;
 *      DICTIONARY: u32 entry count, the entries,
 *    preceded by the u32 count of top-level entries, names sorted (Python sorts them). */

typedef struct Reader {
  const unsigned char* p;
  const unsigned char* end;
  int bad;
} Reader;

static int take(Reader* r, void* out, size_t n) {
  if (r->bad || (size_t)(r->end - r->p) < n) {
    r->bad = 1;
    if (out) memset(out, 0, n);
    return 0;
  }
  if (out) memcpy(out, r->p, n);
  r->p += n;
  return 1;
}

static size_t dtype_size(XLA_FFI_DataType t) {
  switch (t) {
    case XLA_FFI_DataType_PRED: case XLA_FFI_DataType_S8: case XLA_FFI_DataType_U8:
    case XLA_FFI_DataType_S4: case XLA_FFI_DataType_U4: case XLA_FFI_DataType_S2:
    case XLA_FFI_DataType_U2: case XLA_FFI_DataType_S1: case XLA_FFI_DataType_U1:
    case XLA_FFI_DataType_F8E5M2: case XLA_FFI_DataType_F8E3M4: case XLA_FFI_DataType_F8E4M3:
    case XLA_FFI_DataType_F8E4M3FN: case XLA_FFI_DataType_F8E4M3B11FNUZ:
    case XLA_FFI_DataType_F8E5M2FNUZ: case XLA_FFI_DataType_F8E4M3FNUZ:
    case XLA_FFI_DataType_F4E2M1FN: case XLA_FFI_DataType_F8E8M0FNU:
      return 1;
    case XLA_FFI_DataType_S16: case XLA_FFI_DataType_U16: case XLA_FFI_DataType_F16:
    case XLA_FFI_DataType_BF16:
      return 2;
    case XLA_FFI_DataType_S32: case XLA_FFI_DataType_U32: case XLA_FFI_DataType_F32:
      return 4;
    case XLA_FFI_DataType_S64: case XLA_FFI_DataType_U64: case XLA_FFI_DataType_F64:
    case XLA_FFI_DataType_C64:
      return 8;
    case XLA_FFI_DataType_C128:
      return 16;
    default:
      return 0;
  }
}

static void* copy_bytes(Reader* r, size_t n) {
  void* out = malloc(n ? n : 1);
  if (!out) {
    r->bad = 1;
    return NULL;
  }
  take(r, out, n);
  return out;
}

static int read_attrs(Reader* r, XLA_FFI_Attrs* attrs, int depth);

static void* read_value(Reader* r, XLA_FFI_AttrType kind, int depth) {
  uint8_t dtype = 0;
  switch (kind) {
    case XLA_FFI_AttrType_SCALAR: {
      take(r, &dtype, 1);
      XLA_FFI_Scalar* s = (XLA_FFI_Scalar*)calloc(1, sizeof *s);
      if (!s || !dtype_size((XLA_FFI_DataType)dtype)) { r->bad = 1; free(s); return NULL; }
      s->dtype = (XLA_FFI_DataType)dtype;
      s->value = copy_bytes(r, dtype_size(s->dtype));
      return s;
    }
    case XLA_FFI_AttrType_ARRAY: {
      uint64_t count = 0;
      take(r, &dtype, 1);
      take(r, &count, 8);
      size_t size = dtype_size((XLA_FFI_DataType)dtype);
      XLA_FFI_Array* a = (XLA_FFI_Array*)calloc(1, sizeof *a);
      if (!a || !size || count > (uint64_t)(r->end - r->p) / size) { r->bad = 1; free(a); return NULL; }
      a->dtype = (XLA_FFI_DataType)dtype;
      a->size = (size_t)count;
      a->data = copy_bytes(r, size * count);
      return a;
    }
    case XLA_FFI_AttrType_STRING: {
      uint32_t len = 0;
      take(r, &len, 4);
      XLA_FFI_ByteSpan* s = (XLA_FFI_ByteSpan*)calloc(1, sizeof *s);
      if (!s) { r->bad = 1; return NULL; }
      s->ptr = (const char*)copy_bytes(r, len);
      s->len = len;
      return s;
    }
    case XLA_FFI_AttrType_DICTIONARY: {
      XLA_FFI_Attrs* d = (XLA_FFI_Attrs*)calloc(1, sizeof *d);
      if (!d || depth > 64 || !read_attrs(r, d, depth + 1)) { r->bad = 1; return d; }
      return d;
    }
    default:
      r->bad = 1;
      return NULL;
  }
}

static int read_attrs(Reader* r, XLA_FFI_Attrs* attrs, int depth) {
  uint32_t count = 0;
  take(r, &count, 4);
  attrs->struct_size = XLA_FFI_Attrs_STRUCT_SIZE;
  attrs->extension_start = NULL;
  attrs->size = 0;
  if (r->bad || count > (uint32_t)(r->end - r->p)) return 0;
  attrs->types = (XLA_FFI_AttrType*)calloc(count ? count : 1, sizeof(XLA_FFI_AttrType));
  attrs->names = (XLA_FFI_ByteSpan**)calloc(count ? count : 1, sizeof(XLA_FFI_ByteSpan*));
  attrs->attrs = (void**)calloc(count ? count : 1, sizeof(void*));
  if (!attrs->types || !attrs->names || !attrs->attrs) return 0;
  for (uint32_t i = 0; i < count && !r->bad; ++i) {
    uint32_t len = 0;
    uint8_t kind = 0;
    take(r, &len, 4);
    XLA_FFI_ByteSpan* name = (XLA_FFI_ByteSpan*)calloc(1, sizeof *name);
    if (!name) return 0;
    name->ptr = (const char*)copy_bytes(r, len);
    name->len = len;
    take(r, &kind, 1);
    attrs->names[i] = name;
    attrs->types[i] = (XLA_FFI_AttrType)kind;
    attrs->attrs[i] = read_value(r, (XLA_FFI_AttrType)kind, depth);
    attrs->size = i + 1;
  }
  return !r->bad;
}

KilnFfiSite* KilnFfiSiteCreate(const char* name, void* instantiate, void* prepare,
                               void* initialize, void* execute, int64_t num_args,
                               int64_t num_rets, const int32_t* dtypes, const int64_t* ranks,
                               const int64_t* dims, const void* attributes,
                               size_t attributes_len) {
  KilnFfiSite* site = (KilnFfiSite*)calloc(1, sizeof(KilnFfiSite));
  if (!site) return NULL;
  site->name = strdup(name);
  site->stages[XLA_FFI_ExecutionStage_INSTANTIATE] = (XLA_FFI_Handler*)instantiate;
  site->stages[XLA_FFI_ExecutionStage_PREPARE] = (XLA_FFI_Handler*)prepare;
  site->stages[XLA_FFI_ExecutionStage_INITIALIZE] = (XLA_FFI_Handler*)initialize;
  site->stages[XLA_FFI_ExecutionStage_EXECUTE] = (XLA_FFI_Handler*)execute;
  site->num_args = num_args;
  site->num_rets = num_rets;
  int64_t n = num_args + num_rets;
  site->leaves = (FfiLeaf*)calloc(n ? n : 1, sizeof(FfiLeaf));
  if (!site->name || !site->leaves) return NULL;
  for (int64_t i = 0, d = 0; i < n; d += ranks[i], ++i) {
    site->leaves[i].dtype = (XLA_FFI_DataType)dtypes[i];
    site->leaves[i].rank = ranks[i];
    site->leaves[i].dims = (int64_t*)malloc(sizeof(int64_t) * (ranks[i] ? ranks[i] : 1));
    if (!site->leaves[i].dims) return NULL;
    if (ranks[i]) memcpy(site->leaves[i].dims, dims + d, sizeof(int64_t) * ranks[i]);
  }
  Reader reader = {(const unsigned char*)attributes,
                   (const unsigned char*)attributes + attributes_len, 0};
  if (!read_attrs(&reader, &site->attrs, 0) || reader.p != reader.end) {
    fprintf(stderr, "kiln: malformed FFI attributes for custom call '%s'\n", name);
    return NULL;
  }
  return site;
}

/* ---- running a stage ------------------------------------------------------------------------- */

static const XLA_FFI_Api* api(void);

static void free_scratch(XLA_FFI_ExecutionContext* ctx, Scratch* s) {
  if (ctx && ctx->device_free) ctx->device_free(s->data);
  else free(s->data);
  free(s);
}

static void release_context(XLA_FFI_ExecutionContext* ctx) {
  while (ctx->scratch) {
    Scratch* s = ctx->scratch;
    ctx->scratch = s->next;
    free_scratch(ctx, s);
  }
  for (int stage = XLA_FFI_ExecutionStage_PREPARE; stage <= XLA_FFI_ExecutionStage_INITIALIZE; ++stage) {
    delete_state(ctx->state_type[stage], ctx->state[stage]);
    ctx->state[stage] = NULL;
  }
}

/* A future a handler returned: the call waits for it (Kiln runs one op at a time). */
struct XLA_FFI_Future {
  pthread_mutex_t lock;
  pthread_cond_t ready;
  int done;
  XLA_FFI_Error* error;
};

static XLA_FFI_Error* ffi_future_create(XLA_FFI_Future_Create_Args* args) {
  XLA_FFI_Future* f = (XLA_FFI_Future*)calloc(1, sizeof(XLA_FFI_Future));
  if (!f) return make_error(XLA_FFI_Error_Code_RESOURCE_EXHAUSTED, "out of memory");
  pthread_mutex_init(&f->lock, NULL);
  pthread_cond_init(&f->ready, NULL);
  args->future = f;
  return NULL;
}

static XLA_FFI_Error* complete(XLA_FFI_Future* f, XLA_FFI_Error* error) {
  pthread_mutex_lock(&f->lock);
  if (f->done) {
    pthread_mutex_unlock(&f->lock);
    destroy_error(error);
    return make_error(XLA_FFI_Error_Code_FAILED_PRECONDITION, "the future is already complete");
  }
  f->done = 1;
  f->error = error;
  pthread_cond_broadcast(&f->ready);
  pthread_mutex_unlock(&f->lock);
  return NULL;
}

static XLA_FFI_Error* ffi_future_set_available(XLA_FFI_Future_SetAvailable_Args* args) {
  return complete(args->future, NULL);
}

static XLA_FFI_Error* ffi_future_set_error(XLA_FFI_Future_SetError_Args* args) {
  return complete(args->future, args->error);
}

static XLA_FFI_Error* await_future(XLA_FFI_Future* f) {
  pthread_mutex_lock(&f->lock);
  while (!f->done) pthread_cond_wait(&f->ready, &f->lock);
  XLA_FFI_Error* error = f->error;
  pthread_mutex_unlock(&f->lock);
  pthread_cond_destroy(&f->ready);
  pthread_mutex_destroy(&f->lock);
  free(f);
  return error;
}

static XLA_FFI_Error* run_stage(KilnFfiSite* site, XLA_FFI_ExecutionStage stage,
                                XLA_FFI_ExecutionContext* ctx, void** data) {
  XLA_FFI_Handler* handler = site->stages[stage];
  if (!handler) return NULL;
  int64_t n = site->num_args + site->num_rets;
  XLA_FFI_Buffer buffers[n ? n : 1];
  void* pointers[n ? n : 1];
  XLA_FFI_ArgType arg_types[site->num_args ? site->num_args : 1];
  XLA_FFI_RetType ret_types[site->num_rets ? site->num_rets : 1];
  for (int64_t i = 0; i < n; ++i) {
    buffers[i].struct_size = XLA_FFI_Buffer_STRUCT_SIZE;
    buffers[i].extension_start = NULL;
    buffers[i].dtype = site->leaves[i].dtype;
    buffers[i].data = data ? data[i] : NULL;
    buffers[i].rank = site->leaves[i].rank;
    buffers[i].dims = site->leaves[i].dims;
    pointers[i] = &buffers[i];
    if (i < site->num_args) arg_types[i] = XLA_FFI_ArgType_BUFFER;
    else ret_types[i - site->num_args] = XLA_FFI_RetType_BUFFER;
  }
  XLA_FFI_CallFrame frame;
  memset(&frame, 0, sizeof frame);
  frame.struct_size = XLA_FFI_CallFrame_STRUCT_SIZE;
  frame.api = api();
  frame.ctx = ctx;
  frame.stage = stage;
  frame.args.struct_size = XLA_FFI_Args_STRUCT_SIZE;
  frame.args.size = site->num_args;
  frame.args.types = arg_types;
  frame.args.args = pointers;
  frame.rets.struct_size = XLA_FFI_Rets_STRUCT_SIZE;
  frame.rets.size = site->num_rets;
  frame.rets.types = ret_types;
  frame.rets.rets = pointers + site->num_args;
  frame.attrs = site->attrs;
  frame.future = NULL;
  XLA_FFI_Error* error = handler(&frame);
  if (!error && frame.future) error = await_future(frame.future);
  return error;
}

/* "custom call 'name' failed (CODE): message", into `status` */
static void report(KilnFfiSite* site, XLA_FFI_ExecutionStage stage, XLA_FFI_Error* error,
                   XlaCustomCallStatus* status) {
  static const char* stages[] = {"instantiate", "prepare", "initialize", "execute"};
  const char* message = error->message ? error->message : "";
  size_t len = strlen(site->name) + strlen(message) + 96;
  char* text = (char*)malloc(len);
  if (text) {
    if (stage == XLA_FFI_ExecutionStage_EXECUTE)
      snprintf(text, len, "custom call '%s' failed (%s): %s", site->name, code_name(error->code),
               message);
    else
      snprintf(text, len, "custom call '%s' failed in its %s stage (%s): %s", site->name,
               stages[stage], code_name(error->code), message);
    XlaCustomCallStatusSetFailure(status, text, strlen(text));
    free(text);
  } else {
    XlaCustomCallStatusSetFailure(status, message, strlen(message));
  }
  destroy_error(error);
}

static atomic_llong run_ids = 0;

void kiln_ffi_call(KilnFfiSite* site, void** leaves, void* stream, XlaCustomCallStatus* status) {
  kiln_ffi_call_on_device(site, leaves, stream, NULL, NULL, status);
}

void kiln_ffi_call_on_device(KilnFfiSite* site, void** leaves, void* stream,
                             KilnFfiDeviceAlloc alloc, KilnFfiDeviceFree free_,
                             XlaCustomCallStatus* status) {
  XLA_FFI_ExecutionContext ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.site = site;
  ctx.stream = stream;
  ctx.device_alloc = alloc;
  ctx.device_free = free_;
  ctx.run_id = atomic_fetch_add(&run_ids, 1) + 1;
  for (int stage = XLA_FFI_ExecutionStage_PREPARE; stage <= XLA_FFI_ExecutionStage_EXECUTE; ++stage) {
    XLA_FFI_Error* error = run_stage(site, (XLA_FFI_ExecutionStage)stage, &ctx, leaves);
    if (error) {
      report(site, (XLA_FFI_ExecutionStage)stage, error, status);
      break;
    }
  }
  release_context(&ctx);
}

/* The instantiate stage, when the site is made: returns NULL, or a message (owned by the
 * site, valid until the next call) saying why the handler refused. */
const char* KilnFfiSiteInstantiate(KilnFfiSite* site) {
  static _Thread_local char message[1024];
  XLA_FFI_ExecutionContext ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.site = site;
  XLA_FFI_Error* error = run_stage(site, XLA_FFI_ExecutionStage_INSTANTIATE, &ctx, NULL);
  release_context(&ctx);
  if (!error) return NULL;
  snprintf(message, sizeof message, "custom call '%s' failed in its instantiate stage (%s): %s",
           site->name, code_name(error->code), error->message ? error->message : "");
  destroy_error(error);
  return message;
}

/* ---- the execution context ------------------------------------------------------------------ */

static XLA_FFI_Error* ffi_stream_get(XLA_FFI_Stream_Get_Args* args) {
  if (!args->ctx || !args->ctx->stream)
    return make_error(XLA_FFI_Error_Code_UNIMPLEMENTED,
                      "no stream: Kiln runs this custom call on the CPU, where handlers get no "
                      "device stream");
  args->stream = args->ctx->stream;
  return NULL;
}

static XLA_FFI_Error* ffi_execution_context_get(XLA_FFI_ExecutionContext_Get_Args* args) {
  (void)args;
  return make_error(XLA_FFI_Error_Code_NOT_FOUND,
                    "Kiln passes no user data in the FFI execution context");
}

static XLA_FFI_Error* ffi_state_set(XLA_FFI_State_Set_Args* args) {
  XLA_FFI_ExecutionContext* ctx = args->ctx;
  if (!ctx || (unsigned)args->stage > XLA_FFI_ExecutionStage_INITIALIZE)
    return make_error(XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "state can be set by the instantiate, prepare and initialize stages only");
  int64_t type = args->type_id ? args->type_id->type_id : 0;
  if (args->stage == XLA_FFI_ExecutionStage_INSTANTIATE) {
    if (ctx->site->instance_state)
      return make_error(XLA_FFI_Error_Code_ALREADY_EXISTS, "the instance state is already set");
    ctx->site->instance_state = args->state;
    ctx->site->instance_type = type;
  } else {
    if (ctx->state[args->stage])
      return make_error(XLA_FFI_Error_Code_ALREADY_EXISTS, "the state is already set");
    ctx->state[args->stage] = args->state;
    ctx->state_type[args->stage] = type;
  }
  return NULL;
}

static XLA_FFI_Error* ffi_state_get(XLA_FFI_State_Get_Args* args) {
  XLA_FFI_ExecutionContext* ctx = args->ctx;
  if (!ctx || (unsigned)args->stage > XLA_FFI_ExecutionStage_INITIALIZE)
    return make_error(XLA_FFI_Error_Code_INVALID_ARGUMENT, "no state for this execution stage");
  int64_t type = args->type_id ? args->type_id->type_id : 0;
  void* state = args->stage == XLA_FFI_ExecutionStage_INSTANTIATE ? ctx->site->instance_state
                                                                  : ctx->state[args->stage];
  int64_t set_type = args->stage == XLA_FFI_ExecutionStage_INSTANTIATE ? ctx->site->instance_type
                                                                       : ctx->state_type[args->stage];
  if (!state) return make_error(XLA_FFI_Error_Code_NOT_FOUND, "the state is not set");
  if (set_type != type)
    return make_error(XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "the state was set with another type id");
  args->state = state;
  return NULL;
}

static XLA_FFI_Error* ffi_device_memory_allocate(XLA_FFI_DeviceMemory_Allocate_Args* args) {
  size_t alignment = args->alignment < sizeof(void*) ? sizeof(void*) : args->alignment;
  if (alignment & (alignment - 1))
    return make_error(XLA_FFI_Error_Code_INVALID_ARGUMENT, "alignment must be a power of two");
  Scratch* s = (Scratch*)malloc(sizeof(Scratch));
  void* data = NULL;
  size_t size = args->size ? args->size : 1;
  if (s && args->ctx && args->ctx->device_alloc) {
    /* the device allocator aligns to 256 bytes (cuMemAlloc); more is not offered */
    if (alignment > 256) {
      free(s);
      return make_error(XLA_FFI_Error_Code_INVALID_ARGUMENT,
                        "device scratch memory is aligned to at most 256 bytes");
    }
    if (args->ctx->device_alloc(&data, size) != 0 || !data) {
      free(s);
      return make_error(XLA_FFI_Error_Code_RESOURCE_EXHAUSTED,
                        "cannot allocate device scratch memory");
    }
  } else if (!s || posix_memalign(&data, alignment, size) != 0) {
    free(s);
    return make_error(XLA_FFI_Error_Code_RESOURCE_EXHAUSTED, "cannot allocate scratch memory");
  }
  s->data = data;
  s->next = args->ctx ? args->ctx->scratch : NULL;
  if (args->ctx) args->ctx->scratch = s;
  else free(s); /* no context to free it with: the caller frees it */
  args->data = data;
  return NULL;
}

static XLA_FFI_Error* ffi_device_memory_free(XLA_FFI_DeviceMemory_Free_Args* args) {
  if (!args->data) return NULL;
  Scratch** link = args->ctx ? &args->ctx->scratch : NULL;
  while (link && *link && (*link)->data != args->data) link = &(*link)->next;
  if (!link || !*link)
    return make_error(XLA_FFI_Error_Code_INVALID_ARGUMENT,
                      "this memory was not allocated in this call");
  Scratch* s = *link;
  *link = s->next;
  free_scratch(args->ctx, s);
  return NULL;
}

static XLA_FFI_Error* ffi_thread_pool_schedule(XLA_FFI_ThreadPool_Schedule_Args* args) {
  (void)args;
  return make_error(XLA_FFI_Error_Code_UNAVAILABLE,
                    "Kiln provides no thread pool to FFI handlers; do the work in the handler");
}

static XLA_FFI_Error* ffi_thread_pool_num_threads(XLA_FFI_ThreadPool_NumThreads_Args* args) {
  (void)args;
  return make_error(XLA_FFI_Error_Code_UNAVAILABLE,
                    "Kiln provides no thread pool to FFI handlers");
}

static XLA_FFI_Error* ffi_run_id_get(XLA_FFI_RunId_Get_Args* args) {
  args->run_id = args->ctx ? args->ctx->run_id : 0;
  return NULL;
}

static XLA_FFI_Error* ffi_device_ordinal_get(XLA_FFI_DeviceOrdinal_Get_Args* args) {
  args->device_ordinal = 0; /* one CPU device */
  return NULL;
}

/* ---- the API table ------------------------------------------------------------------------- */

static const XLA_FFI_Api kiln_ffi_api = {
    .struct_size = XLA_FFI_Api_STRUCT_SIZE,
    .extension_start = NULL,
    .api_version = {XLA_FFI_Api_Version_STRUCT_SIZE, NULL, XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR},
    .internal_api = NULL, /* only XLA's own handlers use it */
    .XLA_FFI_Error_Create = ffi_error_create,
    .XLA_FFI_Error_GetMessage = ffi_error_get_message,
    .XLA_FFI_Error_Destroy = ffi_error_destroy,
    .XLA_FFI_Handler_Register = ffi_handler_register,
    .XLA_FFI_Stream_Get = ffi_stream_get,
    .XLA_FFI_Type_Register = ffi_type_register,
    .XLA_FFI_ExecutionContext_Get = ffi_execution_context_get,
    .XLA_FFI_State_Set = ffi_state_set,
    .XLA_FFI_State_Get = ffi_state_get,
    .XLA_FFI_DeviceMemory_Allocate = ffi_device_memory_allocate,
    .XLA_FFI_DeviceMemory_Free = ffi_device_memory_free,
    .XLA_FFI_ThreadPool_Schedule = ffi_thread_pool_schedule,
    .XLA_FFI_ThreadPool_NumThreads = ffi_thread_pool_num_threads,
    .XLA_FFI_Future_Create = ffi_future_create,
    .XLA_FFI_Future_SetAvailable = ffi_future_set_available,
    .XLA_FFI_Future_SetError = ffi_future_set_error,
    .XLA_FFI_RunId_Get = ffi_run_id_get,
    .XLA_FFI_DeviceOrdinal_Get = ffi_device_ordinal_get,
};

static const XLA_FFI_Api* api(void) { return &kiln_ffi_api; }

const XLA_FFI_Api* XLA_FFI_GetApi(void) { return &kiln_ffi_api; }
