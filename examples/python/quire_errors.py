"""Reading quire.v1.Error from a failed gRPC call, with grpcio alone.

Quire answers a failed call with a gRPC status whose details hold one
quire.v1.Error (code, message, retriable, leader_id, leader_epoch). gRPC
carries the details in the trailing metadata entry grpc-status-details-bin:
a serialized google.rpc.Status whose `details` are google.protobuf.Any
messages. grpcio-status would decode it; without it, parse the bytes with
status.proto (the same fields, in this directory) and unpack the Any.
"""

import grpc

from quire.v1 import errors_pb2
import status_pb2

STATUS_DETAILS_KEY = "grpc-status-details-bin"


def quire_error(err):
    """Returns the quire.v1.Error of a grpc.RpcError, or None if it has none
    (a transport failure, or a status from something other than Quire)."""
    if not isinstance(err, grpc.Call):
        return None
    for key, value in err.trailing_metadata() or ():
        if key != STATUS_DETAILS_KEY:
            continue
        st = status_pb2.Status()
        st.ParseFromString(value)
        for detail in st.details:
            e = errors_pb2.Error()
            if detail.Is(e.DESCRIPTOR):
                detail.Unpack(e)
                return e
    return None
