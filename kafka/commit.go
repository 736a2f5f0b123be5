package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CommitError is the outcome of an offset commit as franz-go's callback
// reports it: the request's error, else the first partition's error in the
// answer (a commit too late in a rebalance fails partition by partition).
func CommitError(resp *kmsg.OffsetCommitResponse, err error) error {
	if err != nil || resp == nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if perr := kerr.ErrorForCode(p.ErrorCode); perr != nil {
				return perr
			}
		}
	}
	return nil
}
