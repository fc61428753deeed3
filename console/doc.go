// Package console is Quire's web console, served by `quire console`: the
// cluster's brokers and partitions (under-replicated and offline ones
// highlighted), topics (a page at a time) with each partition's leader,
// replicas, ISR, offsets and size on disk, a message browser (bounded,
// paged reads from the newest, the oldest, an offset or a timestamp,
// filtered by key, header or value) and a record's page, consumer groups
// with their members and lag, the partition moves in progress with the
// bytes each new replica has still to fetch, throughput per topic and per
// broker (a ring
// of samples the console takes itself, from the high watermarks and the
// brokers' metrics listeners), charts drawn as inline SVG with a time
// axis, users and ACLs, a live tail of a topic (server-sent events), and
// actions behind a confirmation page: produce a record, edit a topic's
// config, add and delete ACLs, create and delete a topic, add partitions,
// delete a topic's records below an offset, reset an empty group's
// offsets.
//
// It talks to the cluster only through the public gRPC API (api/quirev1)
// and the Go client, so it works against any node and shows nothing a
// plain gRPC client could not get. Pages are html/template and a little
// plain JavaScript, embedded in the binary (web/); there is no front-end
// build step.
//
// Errors from the cluster are shown on the page in words (the broker's
// message). Every page refreshes itself in place every few seconds; when
// the console or the cluster cannot be reached, the page says so and keeps
// trying.
package console
