// Package service is the gRPC door: the quire.v1 services (Admin,
// Producer, Consumer, Metadata, Groups, Security) over the request core
// (package request).
//
// Each handler turns its quire.v1 request into the core's types, calls
// the core, and turns the answer back (produce.go, fetch*.go, admin.go,
// group*.go, security_service.go, ...); errors become statuses and
// inline quire.v1.Errors here, at the edge, through the one error table
// (errors.go), which the node also gives the core as its codes. The
// core authorizes what it serves as the principal of the caller's
// Identity (identity.go: CoreContext); a request another broker passed
// on carries ForwardedHeader and is not passed on again.
//
// The gRPC transport of the hot paths is here too: the server codec that
// decodes a produce request's batches by hand into pooled buffers
// (codec.go, produce_buf.go), the fetch answers sent from the read
// buffers (fetch_buf.go), the request size limit (recvlimit.go) and the
// INVALID_ARGUMENT of a request that does not parse (decode.go).
//
// The node (package broker) builds the services with New, over its
// request core and what they need of it beside (Node, a
// subscribe.Broker), and registers them on its gRPC server (Register).
package service
