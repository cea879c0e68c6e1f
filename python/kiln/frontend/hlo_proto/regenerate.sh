#!/bin/sh
# Regenerates hlo_subset_pb2.py from hlo_subset.proto (a development step; Kiln itself needs
# only the protobuf runtime). The protoc is grpcio-tools' bundled one, pinned so the
# generated code's version matches the protobuf runtime Kiln pins (protoc 35.x -> 7.35.x).
#   python -m venv /tmp/protoc-env && /tmp/protoc-env/bin/pip install grpcio-tools==1.84.0
#   PYTHON=/tmp/protoc-env/bin/python python/kiln/frontend/hlo_proto/regenerate.sh
set -eu
# The proto path is python/, so the descriptor's file name is Kiln's own
# (kiln/frontend/hlo_proto/hlo_subset.proto) and cannot clash in protobuf's default pool.
root=$(cd "$(dirname "$0")/../../.." && pwd)
"${PYTHON:-python}" -m grpc_tools.protoc --proto_path="$root" --python_out="$root" \
  "$root/kiln/frontend/hlo_proto/hlo_subset.proto"
