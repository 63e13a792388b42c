#!/usr/bin/env bash
# Regenerate the Python gRPC code from proto/raftlog/v1/*.proto (run `make proto`).
#
#   proto/generate.sh [OUT_DIR]     OUT_DIR defaults to proto/ (the committed code)
#   PYTHON=... selects the interpreter with grpcio-tools (default: .venv/bin/python).
#
# Layout: the .proto files live at proto/raftlog/v1/ so their import path (and the file names
# inside the descriptors, which gRPC reflection and other languages see) is
# "raftlog/v1/<name>.proto", package raftlog.v1. The Python modules are generated flat into
# proto/, which is the package raftlog.proto: raftlog.proto.client_pb2, ..._pb2_grpc, ..._pb2.pyi.
# protoc writes cross-file imports from the proto path ("from raftlog.v1 import client_pb2");
# this script rewrites them to "from raftlog.proto import client_pb2" and fails if any other
# reference to the raftlog.v1 module path is left. It also puts "# mypy: ignore-errors" first in
# every generated file: protobuf and grpc ship no type stubs, so the generated .pyi subclass an
# untyped base and the _pb2_grpc.py are unannotated; mypy still reads the .pyi for the message
# fields' types when other modules import them (protobuf-only modules stay Any).
#
# The generated files are committed (a wheel's users have no grpcio-tools); never edit them by
# hand: tests/unit/proto/test_api.py regenerates into a temporary directory and requires
# byte-identical output.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here}"
python="${PYTHON:-$here/../.venv/bin/python}"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

protos=()
while IFS= read -r name; do
    protos+=("$here/raftlog/v1/$name")
done < <(cd "$here/raftlog/v1" && LC_ALL=C ls -1 -- *.proto)

"$python" -m grpc_tools.protoc -I "$here" \
    --python_out="$tmp" --pyi_out="$tmp" --grpc_python_out="$tmp" "${protos[@]}"

mkdir -p "$out"
for generated in "$tmp"/raftlog/v1/*_pb2*.py "$tmp"/raftlog/v1/*_pb2*.pyi; do
    target="$out/$(basename "$generated")"
    {
        echo "# mypy: ignore-errors"
        sed -E 's/^from raftlog\.v1 import /from raftlog.proto import /' "$generated"
    } >"$target"
    if grep -nE '^[[:space:]]*(from|import)[[:space:]]+raftlog\.v1([. ]|$)' "$target" >&2; then
        echo "generate.sh: unrewritten raftlog.v1 import in $target" >&2
        exit 1
    fi
done
