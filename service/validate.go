package service

import (
	"fmt"

	quirev1 "github.com/quirelog/quire/api/quirev1"
)

// The checks every RPC taking the same field makes of it, so that a field
// the proto calls invalid is refused the same way wherever it is sent:
// topic names (validateTopicName, admin.go), sizes, counts and waits
// (notNegative); the request core checks the shape of a produce request
// and a subscription's topics (request.CheckSubscription).

// field is a request field's proto name and value, for notNegative.
type field struct {
	name string
	v    int64
}

// notNegative refuses the first field below 0 (INVALID_REQUEST): a size,
// count or wait a client chooses, where 0 means the default.
func notNegative(fs ...field) error {
	for _, f := range fs {
		if f.v < 0 {
			return fmt.Errorf("%w: %s is negative (%d); it must be 0 (the default) or more", ErrInvalidRequest, f.name, f.v)
		}
	}
	return nil
}

// checkFetchRequest refuses what is wrong with a Fetch or FetchStream as
// a whole: no partitions, a negative wait or size.
func checkFetchRequest(req *quirev1.FetchRequest) error {
	if len(req.Partitions) == 0 {
		return fmt.Errorf("%w: no partitions", ErrInvalidRequest)
	}
	if err := notNegative(field{"max_wait_ms", int64(req.MaxWaitMs)}, field{"min_bytes", int64(req.MinBytes)},
		field{"max_bytes", int64(req.MaxBytes)}); err != nil {
		return err
	}
	for _, p := range req.Partitions {
		if err := partitionMaxBytes(p.Topic, p.Partition, p.MaxBytes); err != nil {
			return err
		}
	}
	return nil
}

// partitionMaxBytes refuses a negative max_bytes of one partition.
func partitionMaxBytes(topic string, p, maxBytes int32) error {
	if err := notNegative(field{"max_bytes", int64(maxBytes)}); err != nil {
		return fmt.Errorf("%s-%d: %w", topic, p, err)
	}
	return nil
}

// checkFetchRecords refuses what is wrong with a FetchRecords request.
func checkFetchRecords(req *quirev1.FetchRecordsRequest) error {
	if err := validateTopicName(req.Topic); err != nil {
		return err // INVALID_TOPIC_EXCEPTION, as Produce and CreateTopic say
	}
	if err := checkRecordFormat(req.Format); err != nil {
		return err
	}
	return notNegative(field{"max_records", int64(req.MaxRecords)}, field{"max_wait_ms", int64(req.MaxWaitMs)},
		field{"max_bytes", int64(req.MaxBytes)})
}
