package broker

import (
	"context"
	"fmt"

	"google.golang.org/grpc/status"

	quirev1 "github.com/quirelog/quire/api/quirev1"
	"github.com/quirelog/quire/auth"
)

// DeleteOffsets removes some of a group's committed offsets on the
// controller (Kafka's OffsetDelete): the refusal of a partition (a
// topic a member is subscribed to, an unknown one) is in the answer, the
// group's (unknown, a bad id) the call's status.
func (s *groupService) DeleteOffsets(ctx context.Context, req *quirev1.DeleteOffsetsRequest) (*quirev1.DeleteOffsetsResponse, error) {
	resp, err := s.b.cluster.fwd.DeleteOffsets(ctx, req)
	if err != nil {
		return nil, toStatus(fmt.Errorf("delete offsets: %w", err))
	}
	n := 0
	for _, p := range resp.Partitions {
		if p.Error == nil {
			n++
		}
	}
	s.b.logger.Info("deleted group offsets", "group", req.Group, "partitions", n, "refused", len(resp.Partitions)-n)
	return resp, nil
}

// DeleteOffsets is OffsetDelete on the Kafka listener. As in Kafka, it
// needs Delete on the group (else the whole answer is
// GROUP_AUTHORIZATION_FAILED) and Read on each topic, a topic without it
// refused TOPIC_AUTHORIZATION_FAILED on its own.
func (k kafkaBackend) DeleteOffsets(ctx context.Context, req *quirev1.DeleteOffsetsRequest) (*quirev1.DeleteOffsetsResponse, error) {
	if err := k.b.authorizeKafkaNeed(ctx, groupNeed(auth.OpDelete, req.Group)); err != nil {
		return nil, err
	}
	allowed := &quirev1.DeleteOffsetsRequest{Group: req.Group}
	var refused []*quirev1.DeleteOffsetsResult
	for _, t := range req.Topics {
		err := k.b.authorizeKafkaNeed(ctx, topicNeed(auth.OpRead, t.Topic))
		if err == nil {
			allowed.Topics = append(allowed.Topics, t)
			continue
		}
		e := &quirev1.Error{Code: quirev1.ErrorCode_TOPIC_AUTHORIZATION_FAILED, Message: status.Convert(err).Message(), LeaderId: -1, LeaderEpoch: -1}
		for _, p := range t.Partitions {
			refused = append(refused, &quirev1.DeleteOffsetsResult{Topic: t.Topic, Partition: p, Error: e})
		}
	}
	resp := &quirev1.DeleteOffsetsResponse{}
	if len(allowed.Topics) > 0 {
		var err error
		if resp, err = (&groupService{b: k.b}).DeleteOffsets(ctx, allowed); err != nil {
			return nil, err
		}
	}
	resp.Partitions = append(resp.Partitions, refused...)
	return resp, nil
}
