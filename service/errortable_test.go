package service

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/group"
	"github.com/quirelog/quire/internal/errcode"
	"github.com/quirelog/quire/metadata"
	"github.com/quirelog/quire/record"
	"github.com/quirelog/quire/replica"
	"github.com/quirelog/quire/request"
	"github.com/quirelog/quire/share"
	"github.com/quirelog/quire/sharegroup"
	"github.com/quirelog/quire/storage"
	"github.com/quirelog/quire/subscribe"
	"github.com/quirelog/quire/txn"
)

// sentinelDirs are the packages (directories, relative to this one) whose
// exported Err… sentinels can reach a client and so must each have a row
// in the error table. A new package of such errors joins with one line.
// broker's sentinels are all others' under a name of its own
// (broker/errors.go), so this package's rows cover them.
var sentinelDirs = []string{"../storage", "../record", "../metadata", "../replica", "../group", "../subscribe", "../request", "../share", "../sharegroup", "../txn", "."}

// sentinels holds the values of those sentinels by package-qualified name.
// Go cannot look a variable up by name, so they are listed; the test parses
// the packages' sources and fails on any sentinel missing here, so a new
// one is never left out of the check.
var sentinels = map[string]error{
	"share.ErrInvalidRecordState":        share.ErrInvalidRecordState,
	"share.ErrInvalidRequest":            share.ErrInvalidRequest,
	"share.ErrInvalidConfig":             share.ErrInvalidConfig,
	"sharegroup.ErrUnknownMember":        sharegroup.ErrUnknownMember,
	"sharegroup.ErrFencedMemberEpoch":    sharegroup.ErrFencedMemberEpoch,
	"sharegroup.ErrInvalidRequest":       sharegroup.ErrInvalidRequest,
	"sharegroup.ErrStateNotSaved":        sharegroup.ErrStateNotSaved,
	"request.ErrShareGroupsDisabled":     request.ErrShareGroupsDisabled,
	"request.ErrShareGroupNotFound":      request.ErrShareGroupNotFound,
	"request.ErrShareConfigUnsupported":  request.ErrShareConfigUnsupported,
	"request.ErrShareOffsetsUnsupported": request.ErrShareOffsetsUnsupported,
	"request.ErrShareRecordNotHeld":      request.ErrShareRecordNotHeld,

	"request.ErrShareMemberUnconfirmed": request.ErrShareMemberUnconfirmed,

	"storage.ErrOutOfOrderSequence":   storage.ErrOutOfOrderSequence,
	"storage.ErrInvalidProducerEpoch": storage.ErrInvalidProducerEpoch,
	"storage.ErrUnknownProducerID":    storage.ErrUnknownProducerID,
	"storage.ErrDuplicateSequence":    storage.ErrDuplicateSequence,
	"storage.ErrOffsetOutOfRange":     storage.ErrOffsetOutOfRange,
	"storage.ErrCorruptBatch":         storage.ErrCorruptBatch,
	"storage.ErrRecordTooLarge":       storage.ErrRecordTooLarge,
	"storage.ErrLogFailed":            storage.ErrLogFailed,
	"storage.ErrNoKey":                storage.ErrNoKey,
	"storage.ErrOffsetOverlap":        storage.ErrOffsetOverlap,
	"storage.ErrOffsetGap":            storage.ErrOffsetGap,
	"storage.ErrStaleEpoch":           storage.ErrStaleEpoch,
	"storage.ErrClosed":               storage.ErrClosed,
	"storage.ErrInvalidConfig":        storage.ErrInvalidConfig,
	"storage.ErrBadCheckpoint":        storage.ErrBadCheckpoint,
	"storage.ErrBadMetaProperties":    storage.ErrBadMetaProperties,
	"storage.ErrInjected":             storage.ErrInjected,
	"storage.ErrInvalidTxnState":      storage.ErrInvalidTxnState,
	"storage.ErrCoordinatorFenced":    storage.ErrCoordinatorFenced,
	"storage.ErrOpenTransaction":      storage.ErrOpenTransaction,

	"txn.ErrConcurrentTransactions":   txn.ErrConcurrentTransactions,
	"txn.ErrProducerFenced":           txn.ErrProducerFenced,
	"txn.ErrInvalidProducerIDMapping": txn.ErrInvalidProducerIDMapping,
	"txn.ErrInvalidTxnState":          txn.ErrInvalidTxnState,
	"txn.ErrInvalidTimeout":           txn.ErrInvalidTimeout,
	"txn.ErrInvalidTransactionalID":   txn.ErrInvalidTransactionalID,

	"record.ErrCorrupt":     record.ErrCorrupt,
	"record.ErrBadCRC":      record.ErrBadCRC,
	"record.ErrBadMagic":    record.ErrBadMagic,
	"record.ErrTruncated":   record.ErrTruncated,
	"record.ErrBadLength":   record.ErrBadLength,
	"record.ErrRecordCount": record.ErrRecordCount,
	"record.ErrBadRecord":   record.ErrBadRecord,
	"record.ErrBadCodec":    record.ErrBadCodec,
	"record.ErrDecompress":  record.ErrDecompress,
	"record.ErrBadControl":  record.ErrBadControl,

	"metadata.ErrNotController":               metadata.ErrNotController,
	"metadata.ErrTopicExists":                 metadata.ErrTopicExists,
	"metadata.ErrUnknownTopic":                metadata.ErrUnknownTopic,
	"metadata.ErrShareStateFenced":            metadata.ErrShareStateFenced,
	"metadata.ErrInvalidPartitions":           metadata.ErrInvalidPartitions,
	"metadata.ErrPartitionBudget":             metadata.ErrPartitionBudget,
	"metadata.ErrInvalidReplicationFactor":    metadata.ErrInvalidReplicationFactor,
	"metadata.ErrUnknownBroker":               metadata.ErrUnknownBroker,
	"metadata.ErrFencedBroker":                metadata.ErrFencedBroker,
	"metadata.ErrStaleEpoch":                  metadata.ErrStaleEpoch,
	"metadata.ErrNoQuorum":                    metadata.ErrNoQuorum,
	"metadata.ErrClusterIDMismatch":           metadata.ErrClusterIDMismatch,
	"metadata.ErrShutdown":                    metadata.ErrShutdown,
	"metadata.ErrBrokerNotRemovable":          metadata.ErrBrokerNotRemovable,
	"metadata.ErrInvalidGroupID":              metadata.ErrInvalidGroupID,
	"metadata.ErrInvalidOffsetCommit":         metadata.ErrInvalidOffsetCommit,
	"metadata.ErrInvalidPartition":            metadata.ErrInvalidPartition,
	"metadata.ErrInvalidShareGroupConfig":     metadata.ErrInvalidShareGroupConfig,
	"metadata.ErrUnknownGroup":                metadata.ErrUnknownGroup,
	"metadata.ErrGroupSubscribedToTopic":      metadata.ErrGroupSubscribedToTopic,
	"metadata.ErrElectionNotNeeded":           metadata.ErrElectionNotNeeded,
	"metadata.ErrPreferredLeaderNotAvailable": metadata.ErrPreferredLeaderNotAvailable,
	"metadata.ErrInvalidReassignment":         metadata.ErrInvalidReassignment,
	"metadata.ErrNoReassignmentInProgress":    metadata.ErrNoReassignmentInProgress,
	"metadata.ErrCommittedSince":              metadata.ErrCommittedSince,
	"replica.ErrUnknownTopicOrPartition":      replica.ErrUnknownTopicOrPartition,
	"replica.ErrInvalidRequest":               replica.ErrInvalidRequest,
	"subscribe.ErrInvalidRequest":             subscribe.ErrInvalidRequest,
	"replica.ErrNotLeader":                    replica.ErrNotLeader,
	"replica.ErrLeaderNotAvailable":           replica.ErrLeaderNotAvailable,
	"replica.ErrNotEnoughReplicas":            replica.ErrNotEnoughReplicas,
	"replica.ErrNotEnoughReplicasAfterAppend": replica.ErrNotEnoughReplicasAfterAppend,
	"replica.ErrRequestTimedOut":              replica.ErrRequestTimedOut,
	"replica.ErrFencedLeaderEpoch":            replica.ErrFencedLeaderEpoch,
	"replica.ErrUnknownLeaderEpoch":           replica.ErrUnknownLeaderEpoch,
	"replica.ErrStaleBrokerEpoch":             replica.ErrStaleBrokerEpoch,
	"service.ErrRequestTooLarge":              ErrRequestTooLarge,
	"replica.ErrOffsetNotAvailable":           replica.ErrOffsetNotAvailable,
	"replica.ErrISRRefused":                   replica.ErrISRRefused,
	"metadata.ErrUnsupportedVersion":          metadata.ErrUnsupportedVersion,
	"metadata.ErrFeatureUpdateFailed":         metadata.ErrFeatureUpdateFailed,
	"metadata.ErrUnknownCommand":              metadata.ErrUnknownCommand,
	"metadata.ErrInvalidGroupRecords":         metadata.ErrInvalidGroupRecords,
	"metadata.ErrNotCoordinator":              metadata.ErrNotCoordinator,
	"metadata.ErrUnknownUser":                 metadata.ErrUnknownUser,
	"metadata.ErrInvalidUser":                 metadata.ErrInvalidUser,
	"metadata.ErrInvalidACL":                  metadata.ErrInvalidACL,

	"group.ErrInvalidConfig":         group.ErrInvalidConfig,
	"group.ErrInvalidGroupID":        group.ErrInvalidGroupID,
	"group.ErrInvalidRequest":        group.ErrInvalidRequest,
	"group.ErrUnknownMemberID":       group.ErrUnknownMemberID,
	"group.ErrFencedMemberEpoch":     group.ErrFencedMemberEpoch,
	"group.ErrStaleMemberEpoch":      group.ErrStaleMemberEpoch,
	"group.ErrUnsupportedAssignor":   group.ErrUnsupportedAssignor,
	"group.ErrInvalidRegex":          group.ErrInvalidRegex,
	"group.ErrGroupMaxSizeReached":   group.ErrGroupMaxSizeReached,
	"group.ErrUnknownGroup":          group.ErrUnknownGroup,
	"group.ErrNonEmptyGroup":         group.ErrNonEmptyGroup,
	"group.ErrFencedInstanceID":      group.ErrFencedInstanceID,
	"group.ErrIllegalGeneration":     group.ErrIllegalGeneration,
	"group.ErrInvalidSessionTimeout": group.ErrInvalidSessionTimeout,
	"group.ErrInvalidRecord":         group.ErrInvalidRecord,

	"service.ErrUnknownTopicOrPartition":      ErrUnknownTopicOrPartition,
	"service.ErrInvalidTopic":                 ErrInvalidTopic,
	"request.ErrInvalidTopic":                 request.ErrInvalidTopic,
	"request.ErrInvalidRequiredAcks":          request.ErrInvalidRequiredAcks,
	"request.ErrTopicAuthorizationFailed":     request.ErrTopicAuthorizationFailed,
	"request.ErrGroupAuthorizationFailed":     request.ErrGroupAuthorizationFailed,
	"request.ErrClusterAuthorizationFailed":   request.ErrClusterAuthorizationFailed,
	"request.ErrLeaderUnreachable":            request.ErrLeaderUnreachable,
	"request.ErrInvalidPartitions":            request.ErrInvalidPartitions,
	"request.ErrInvalidReplicationFactor":     request.ErrInvalidReplicationFactor,
	"request.ErrInvalidConfig":                request.ErrInvalidConfig,
	"request.ErrBrokersNotReady":              request.ErrBrokersNotReady,
	"request.ErrPolicyViolation":              request.ErrPolicyViolation,
	"request.ErrTransactionsUnsupported":      request.ErrTransactionsUnsupported,
	"request.ErrTransactionalIDNotFound":      request.ErrTransactionalIDNotFound,
	"service.ErrAuthenticationFailed":         ErrAuthenticationFailed,
	"service.ErrTopicAuthorizationFailed":     ErrTopicAuthorizationFailed,
	"service.ErrGroupAuthorizationFailed":     ErrGroupAuthorizationFailed,
	"service.ErrClusterAuthorizationFailed":   ErrClusterAuthorizationFailed,
	"service.ErrInvalidPartitions":            ErrInvalidPartitions,
	"service.ErrInvalidReplicationFactor":     ErrInvalidReplicationFactor,
	"service.ErrInvalidConfig":                ErrInvalidConfig,
	"service.ErrInvalidRequest":               ErrInvalidRequest,
	"service.ErrInvalidRequiredAcks":          ErrInvalidRequiredAcks,
	"service.ErrNotLeader":                    ErrNotLeader,
	"service.ErrLeaderNotAvailable":           ErrLeaderNotAvailable,
	"service.ErrNotEnoughReplicas":            ErrNotEnoughReplicas,
	"service.ErrNotEnoughReplicasAfterAppend": ErrNotEnoughReplicasAfterAppend,
	"service.ErrBrokersNotReady":              ErrBrokersNotReady,
	"service.ErrRequestTimedOut":              ErrRequestTimedOut,
	"service.ErrFencedLeaderEpoch":            ErrFencedLeaderEpoch,
	"service.ErrUnknownLeaderEpoch":           ErrUnknownLeaderEpoch,
	"service.ErrPolicyViolation":              ErrPolicyViolation,
	"service.ErrShuttingDown":                 ErrShuttingDown,
	"service.ErrStaleBrokerEpoch":             ErrStaleBrokerEpoch,
}

// exportedSentinels parses dir's non-test Go files and returns each
// package-level exported variable named Err…, qualified by its package
// name, with where it is declared.
func exportedSentinels(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := map[string]string{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				for _, name := range spec.(*ast.ValueSpec).Names {
					if name.IsExported() && strings.HasPrefix(name.Name, "Err") {
						found[f.Name.Name+"."+name.Name] = fset.Position(name.Pos()).String()
					}
				}
			}
		}
	}
	if len(found) == 0 {
		t.Fatalf("no Err… sentinels found in %s: is the directory right?", dir)
	}
	return found
}

// TestErrorTableCoversEverySentinel fails when an exported sentinel of the
// packages in sentinelDirs has no row in the error table: it would reach
// clients as UNKNOWN_SERVER_ERROR, not retriable, whatever it means.
func TestErrorTableCoversEverySentinel(t *testing.T) {
	t.Parallel()
	parsed := map[string]string{}
	for _, dir := range sentinelDirs {
		for name, pos := range exportedSentinels(t, dir) {
			parsed[name] = pos
		}
	}
	var names []string
	for name := range parsed {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		err, ok := sentinels[name]
		if !ok {
			t.Errorf("%s (%s) is not in this test's sentinels: add it there and give it a row in the error table", name, parsed[name])
			continue
		}
		m := lookupError(fmt.Errorf("some context: %w", err))
		if m.code == quirev1.ErrorCode_UNKNOWN_SERVER_ERROR {
			t.Errorf("%s has no row in the error table: clients would see UNKNOWN_SERVER_ERROR", name)
		}
		if !errcode.Known(m.code) {
			t.Errorf("%s maps to %v, which errcode does not declare", name, m.code)
		}
	}
	for name := range sentinels {
		if _, ok := parsed[name]; !ok {
			t.Errorf("%s is listed in this test but declared in none of %v", name, sentinelDirs)
		}
	}
}

// TestErrorTableRetriabilityIsTheCodes: no row says anything of its own
// about retriability; it is the declaration of its code, in the inline
// error and in the status detail alike.
func TestErrorTableRetriabilityIsTheCodes(t *testing.T) {
	t.Parallel()
	for _, m := range errorTable {
		if m.retriable != errcode.Retriable(m.code) {
			t.Errorf("%v: row retriable=%v, its code %v is declared %v", m.err, m.retriable, m.code, errcode.Retriable(m.code))
		}
		st := status.Convert(toStatus(fmt.Errorf("ctx: %w", m.err)))
		var d *quirev1.Error
		for _, x := range st.Details() {
			if e, ok := x.(*quirev1.Error); ok {
				d = e
			}
		}
		if d == nil || d.Code != m.code || d.Retriable != errcode.Retriable(m.code) {
			t.Errorf("%v: status detail %+v, want %v retriable=%v", m.err, d, m.code, errcode.Retriable(m.code))
		}
	}
}

// TestErrorStaleLogEpochIsNotLeader: an append refused because the log
// already holds a newer leader's batches (storage.ErrStaleEpoch) tells the
// client that this broker no longer leads: NOT_LEADER_OR_FOLLOWER,
// retriable after a metadata refresh, not UNKNOWN_SERVER_ERROR.
func TestErrorStaleLogEpochIsNotLeader(t *testing.T) {
	t.Parallel()
	log, err := storage.OpenLog(t.TempDir(), "t", 0, storage.DefaultLogConfig(), 0, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close() })
	batch := func() []byte {
		b := record.NewBuilder(record.None)
		b.Append(1, nil, []byte("v"), nil)
		return b.Build()
	}
	if _, err := log.AppendAsLeader(batch(), 5); err != nil {
		t.Fatal(err)
	}
	_, err = log.AppendAsLeader(batch(), 4)
	if err == nil {
		t.Fatal("an append at an older epoch succeeded")
	}
	e := toError(err)
	if e.Code != quirev1.ErrorCode_NOT_LEADER_OR_FOLLOWER || !e.Retriable {
		t.Fatalf("stale epoch reaches clients as %v retriable=%v (%s)", e.Code, e.Retriable, e.Message)
	}
	if st := status.Convert(toStatus(err)); st.Code() != codes.FailedPrecondition {
		t.Fatalf("stale epoch: status %v", st.Code())
	}
}

func TestBrokerErrorTable(t *testing.T) {
	t.Parallel()
	for _, m := range errorTable {
		e := toError(m.err)
		if e.Code != m.code || e.Retriable != m.retriable {
			t.Errorf("%v maps to %v/%v, want %v/%v (shadowed by an earlier row?)", m.err, e.Code, e.Retriable, m.code, m.retriable)
		}
	}
	if e := toError(errors.New("surprise")); e.Code.String() != "UNKNOWN_SERVER_ERROR" || e.Retriable {
		t.Errorf("unknown error: %+v", e)
	}
	if toError(nil) != nil || toStatus(nil) != nil {
		t.Errorf("nil must map to nil")
	}
}
