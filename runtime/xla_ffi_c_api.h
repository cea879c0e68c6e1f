/* The XLA FFI C ABI as Kiln's runtime implements it: the binary interface of XLA's published
 * `xla/ffi/api/c_api.h` (API 0.3, the version jaxlib's headers speak), declared here so that
 * the runtime builds without jaxlib. Field order, types and enum values are fixed by that
 * interface; a handler built against jaxlib's headers checks the call frame's struct_size,
 * which kiln_ffi.c fills from the *_STRUCT_SIZE values below (offset of the last field the
 * interface counts, plus its size). Internal to libkiln_runtime; not installed. */
#ifndef KILN_XLA_FFI_C_API_H_
#define KILN_XLA_FFI_C_API_H_

#include <stddef.h>
#include <stdint.h>

#define XLA_FFI_API_MAJOR 0
#define XLA_FFI_API_MINOR 3

#define KILN_FFI_SIZE_UPTO(type, field) (offsetof(type, field) + sizeof(((type*)0)->field))

typedef struct XLA_FFI_Api XLA_FFI_Api;
typedef struct XLA_FFI_Error XLA_FFI_Error;
typedef struct XLA_FFI_ExecutionContext XLA_FFI_ExecutionContext;
typedef struct XLA_FFI_Future XLA_FFI_Future;

typedef struct XLA_FFI_Extension_Base {
  size_t struct_size;
  int type; /* 1: the metadata extension */
  struct XLA_FFI_Extension_Base* next;
} XLA_FFI_Extension_Base;

typedef struct XLA_FFI_Api_Version {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  int major_version;
  int minor_version;
} XLA_FFI_Api_Version;
enum { XLA_FFI_Api_Version_STRUCT_SIZE = KILN_FFI_SIZE_UPTO(XLA_FFI_Api_Version, minor_version) };

/* absl status codes */
typedef enum {
  XLA_FFI_Error_Code_OK = 0,
  XLA_FFI_Error_Code_CANCELLED = 1,
  XLA_FFI_Error_Code_UNKNOWN = 2,
  XLA_FFI_Error_Code_INVALID_ARGUMENT = 3,
  XLA_FFI_Error_Code_DEADLINE_EXCEEDED = 4,
  XLA_FFI_Error_Code_NOT_FOUND = 5,
  XLA_FFI_Error_Code_ALREADY_EXISTS = 6,
  XLA_FFI_Error_Code_PERMISSION_DENIED = 7,
  XLA_FFI_Error_Code_RESOURCE_EXHAUSTED = 8,
  XLA_FFI_Error_Code_FAILED_PRECONDITION = 9,
  XLA_FFI_Error_Code_ABORTED = 10,
  XLA_FFI_Error_Code_OUT_OF_RANGE = 11,
  XLA_FFI_Error_Code_UNIMPLEMENTED = 12,
  XLA_FFI_Error_Code_INTERNAL = 13,
  XLA_FFI_Error_Code_UNAVAILABLE = 14,
  XLA_FFI_Error_Code_DATA_LOSS = 15,
  XLA_FFI_Error_Code_UNAUTHENTICATED = 16
} XLA_FFI_Error_Code;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  const char* message;
  XLA_FFI_Error_Code errc;
} XLA_FFI_Error_Create_Args;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_Error* error;
  const char* message; /* out */
} XLA_FFI_Error_GetMessage_Args;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_Error* error;
} XLA_FFI_Error_Destroy_Args;

/* xla::PrimitiveType numbers */
typedef enum {
  XLA_FFI_DataType_INVALID = 0,
  XLA_FFI_DataType_PRED = 1,
  XLA_FFI_DataType_S8 = 2,
  XLA_FFI_DataType_S16 = 3,
  XLA_FFI_DataType_S32 = 4,
  XLA_FFI_DataType_S64 = 5,
  XLA_FFI_DataType_U8 = 6,
  XLA_FFI_DataType_U16 = 7,
  XLA_FFI_DataType_U32 = 8,
  XLA_FFI_DataType_U64 = 9,
  XLA_FFI_DataType_F16 = 10,
  XLA_FFI_DataType_F32 = 11,
  XLA_FFI_DataType_F64 = 12,
  XLA_FFI_DataType_C64 = 15,
  XLA_FFI_DataType_BF16 = 16,
  XLA_FFI_DataType_TOKEN = 17,
  XLA_FFI_DataType_C128 = 18,
  XLA_FFI_DataType_F8E5M2 = 19,
  XLA_FFI_DataType_F8E4M3FN = 20,
  XLA_FFI_DataType_S4 = 21,
  XLA_FFI_DataType_U4 = 22,
  XLA_FFI_DataType_F8E4M3B11FNUZ = 23,
  XLA_FFI_DataType_F8E5M2FNUZ = 24,
  XLA_FFI_DataType_F8E4M3FNUZ = 25,
  XLA_FFI_DataType_S2 = 26,
  XLA_FFI_DataType_U2 = 27,
  XLA_FFI_DataType_F8E4M3 = 28,
  XLA_FFI_DataType_F8E3M4 = 29,
  XLA_FFI_DataType_S1 = 30,
  XLA_FFI_DataType_U1 = 31,
  XLA_FFI_DataType_F4E2M1FN = 32,
  XLA_FFI_DataType_F8E8M0FNU = 33
} XLA_FFI_DataType;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_DataType dtype;
  void* data;
  int64_t rank;
  int64_t* dims;
} XLA_FFI_Buffer;
enum { XLA_FFI_Buffer_STRUCT_SIZE = KILN_FFI_SIZE_UPTO(XLA_FFI_Buffer, dims) };

typedef enum { XLA_FFI_ArgType_BUFFER = 1 } XLA_FFI_ArgType;
typedef enum { XLA_FFI_RetType_BUFFER = 1 } XLA_FFI_RetType;
typedef enum {
  XLA_FFI_AttrType_ARRAY = 1,
  XLA_FFI_AttrType_DICTIONARY = 2,
  XLA_FFI_AttrType_SCALAR = 3,
  XLA_FFI_AttrType_STRING = 4
} XLA_FFI_AttrType;

typedef struct {
  const char* ptr;
  size_t len;
} XLA_FFI_ByteSpan;

typedef struct {
  XLA_FFI_DataType dtype;
  void* value;
} XLA_FFI_Scalar;

typedef struct {
  XLA_FFI_DataType dtype;
  size_t size;
  void* data;
} XLA_FFI_Array;

typedef struct {
  int64_t type_id;
} XLA_FFI_TypeId;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  void (*deleter)(void* object);
} XLA_FFI_TypeInfo;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_Future* future; /* out */
} XLA_FFI_Future_Create_Args;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_Future* future;
} XLA_FFI_Future_SetAvailable_Args;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_Future* future;
  XLA_FFI_Error* error; /* the runtime takes it */
} XLA_FFI_Future_SetError_Args;

typedef enum {
  XLA_FFI_ExecutionStage_INSTANTIATE = 0,
  XLA_FFI_ExecutionStage_PREPARE = 1,
  XLA_FFI_ExecutionStage_INITIALIZE = 2,
  XLA_FFI_ExecutionStage_EXECUTE = 3
} XLA_FFI_ExecutionStage;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  int64_t size;
  XLA_FFI_ArgType* types;
  void** args;
} XLA_FFI_Args;
enum { XLA_FFI_Args_STRUCT_SIZE = KILN_FFI_SIZE_UPTO(XLA_FFI_Args, args) };

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  int64_t size;
  XLA_FFI_RetType* types;
  void** rets;
} XLA_FFI_Rets;
enum { XLA_FFI_Rets_STRUCT_SIZE = KILN_FFI_SIZE_UPTO(XLA_FFI_Rets, rets) };

/* Attributes sorted by name: handlers look them up by binary search. */
typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  int64_t size;
  XLA_FFI_AttrType* types;
  XLA_FFI_ByteSpan** names;
  void** attrs;
} XLA_FFI_Attrs;
enum { XLA_FFI_Attrs_STRUCT_SIZE = KILN_FFI_SIZE_UPTO(XLA_FFI_Attrs, attrs) };

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  const XLA_FFI_Api* api;
  XLA_FFI_ExecutionContext* ctx;
  XLA_FFI_ExecutionStage stage;
  XLA_FFI_Args args;
  XLA_FFI_Rets rets;
  XLA_FFI_Attrs attrs;
  XLA_FFI_Future* future; /* out; not counted in the interface's struct size */
} XLA_FFI_CallFrame;
enum { XLA_FFI_CallFrame_STRUCT_SIZE = KILN_FFI_SIZE_UPTO(XLA_FFI_CallFrame, attrs) };

typedef XLA_FFI_Error* XLA_FFI_Handler(XLA_FFI_CallFrame* call_frame);

typedef struct {
  XLA_FFI_Handler* instantiate;
  XLA_FFI_Handler* prepare;
  XLA_FFI_Handler* initialize;
  XLA_FFI_Handler* execute;
} XLA_FFI_Handler_Bundle;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_ByteSpan name;
  XLA_FFI_ByteSpan platform;
  XLA_FFI_Handler_Bundle bundle;
  uint32_t traits;
} XLA_FFI_Handler_Register_Args;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_ByteSpan name;
  XLA_FFI_TypeId* type_id; /* in-out */
  const XLA_FFI_TypeInfo* type_info;
} XLA_FFI_Type_Register_Args;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_ExecutionContext* ctx;
  XLA_FFI_TypeId* type_id;
  void* data; /* out */
} XLA_FFI_ExecutionContext_Get_Args;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_ExecutionContext* ctx;
  XLA_FFI_ExecutionStage stage;
  XLA_FFI_TypeId* type_id;
  void* state;
} XLA_FFI_State_Set_Args;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_ExecutionContext* ctx;
  XLA_FFI_ExecutionStage stage;
  XLA_FFI_TypeId* type_id;
  void* state; /* out */
} XLA_FFI_State_Get_Args;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_ExecutionContext* ctx;
  void* stream; /* out */
} XLA_FFI_Stream_Get_Args;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_ExecutionContext* ctx;
  size_t size;
  size_t alignment;
  void* data; /* out */
} XLA_FFI_DeviceMemory_Allocate_Args;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_ExecutionContext* ctx;
  size_t size;
  void* data;
} XLA_FFI_DeviceMemory_Free_Args;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_ExecutionContext* ctx;
  void (*task)(void* data);
  void* data;
} XLA_FFI_ThreadPool_Schedule_Args;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_ExecutionContext* ctx;
  int64_t* num_threads; /* out */
} XLA_FFI_ThreadPool_NumThreads_Args;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_ExecutionContext* ctx;
  int64_t run_id; /* out */
} XLA_FFI_RunId_Get_Args;

typedef struct {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_ExecutionContext* ctx;
  int32_t device_ordinal; /* out */
} XLA_FFI_DeviceOrdinal_Get_Args;

/* The function table, in the interface's order. */
struct XLA_FFI_Api {
  size_t struct_size;
  XLA_FFI_Extension_Base* extension_start;
  XLA_FFI_Api_Version api_version;
  const void* internal_api; /* XLA's own; Kiln leaves it NULL */
  XLA_FFI_Error* (*XLA_FFI_Error_Create)(XLA_FFI_Error_Create_Args*);
  void (*XLA_FFI_Error_GetMessage)(XLA_FFI_Error_GetMessage_Args*);
  void (*XLA_FFI_Error_Destroy)(XLA_FFI_Error_Destroy_Args*);
  XLA_FFI_Error* (*XLA_FFI_Handler_Register)(XLA_FFI_Handler_Register_Args*);
  XLA_FFI_Error* (*XLA_FFI_Stream_Get)(XLA_FFI_Stream_Get_Args*);
  XLA_FFI_Error* (*XLA_FFI_Type_Register)(XLA_FFI_Type_Register_Args*);
  XLA_FFI_Error* (*XLA_FFI_ExecutionContext_Get)(XLA_FFI_ExecutionContext_Get_Args*);
  XLA_FFI_Error* (*XLA_FFI_State_Set)(XLA_FFI_State_Set_Args*);
  XLA_FFI_Error* (*XLA_FFI_State_Get)(XLA_FFI_State_Get_Args*);
  XLA_FFI_Error* (*XLA_FFI_DeviceMemory_Allocate)(XLA_FFI_DeviceMemory_Allocate_Args*);
  XLA_FFI_Error* (*XLA_FFI_DeviceMemory_Free)(XLA_FFI_DeviceMemory_Free_Args*);
  XLA_FFI_Error* (*XLA_FFI_ThreadPool_Schedule)(XLA_FFI_ThreadPool_Schedule_Args*);
  XLA_FFI_Error* (*XLA_FFI_ThreadPool_NumThreads)(XLA_FFI_ThreadPool_NumThreads_Args*);
  XLA_FFI_Error* (*XLA_FFI_Future_Create)(XLA_FFI_Future_Create_Args*);
  XLA_FFI_Error* (*XLA_FFI_Future_SetAvailable)(XLA_FFI_Future_SetAvailable_Args*);
  XLA_FFI_Error* (*XLA_FFI_Future_SetError)(XLA_FFI_Future_SetError_Args*);
  XLA_FFI_Error* (*XLA_FFI_RunId_Get)(XLA_FFI_RunId_Get_Args*);
  XLA_FFI_Error* (*XLA_FFI_DeviceOrdinal_Get)(XLA_FFI_DeviceOrdinal_Get_Args*);
};
enum { XLA_FFI_Api_STRUCT_SIZE = KILN_FFI_SIZE_UPTO(XLA_FFI_Api, XLA_FFI_DeviceOrdinal_Get) };

const XLA_FFI_Api* XLA_FFI_GetApi(void);

#endif /* KILN_XLA_FFI_C_API_H_ */
