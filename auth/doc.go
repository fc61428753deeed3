// Package auth is who a caller is and what it may do, as pure code:
// principals and the mapping of a certificate's subject to one (Kafka's
// ssl.principal.mapping.rules), SCRAM-SHA-256 salted credentials and
// their verification, and the evaluation of ACLs (deny over allow, no
// match refused, super users pass). It does no I/O and imports no gRPC:
// the broker gathers the inputs (the TLS peer, the metadata image's users
// and ACLs) and acts on the answers.
package auth
