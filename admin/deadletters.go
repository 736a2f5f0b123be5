package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/doclog/doclog/kafka"
	"github.com/doclog/doclog/record"
)

// DeadLetterEntry is one record of the dead-letter topic and its place.
type DeadLetterEntry struct {
	Partition  int32              `json:"partition"`
	Offset     int64              `json:"offset"`
	DeadLetter *record.DeadLetter `json:"deadLetter,omitempty"`
	// DecodeError is set for a record on the topic that is not a valid
	// dead letter (written by something other than doclog).
	DecodeError string `json:"decodeError,omitempty"`
}

// Ref is "partition:offset", how commands name an entry.
func (e DeadLetterEntry) Ref() string { return fmt.Sprintf("%d:%d", e.Partition, e.Offset) }

// ListDeadLetters reads the whole dead-letter topic, from each partition's
// start to the end it had when the call began, without a consumer group (an
// operator's look must not move anyone's offsets).
func ListDeadLetters(ctx context.Context, cfg kafka.Config, topic string) ([]DeadLetterEntry, error) {
	admCl, err := kafka.NewClient(cfg, nil)
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	starts, ends, err := partitionBounds(ctx, kadm.NewClient(admCl), topic)
	if err != nil {
		return nil, fmt.Errorf("listing dead letters: %w", err)
	}
	out := []DeadLetterEntry{}
	err = readPartitions(ctx, cfg, topic, starts, ends, func(rec *kgo.Record) {
		e := DeadLetterEntry{Partition: rec.Partition, Offset: rec.Offset}
		if dl, err := record.DecodeDeadLetter(rec); err != nil {
			e.DecodeError = err.Error()
		} else {
			e.DeadLetter = dl
		}
		out = append(out, e)
	})
	if err != nil {
		return nil, fmt.Errorf("listing dead letters: %w", err)
	}
	return out, nil
}

// ErrNotRedrivable reports a dead letter that holds no decodable job.
var ErrNotRedrivable = errors.New("dead letter holds no decodable job: fix the producer and submit the job again")

// RedriveDeadLetter submits a dead letter's job again as a new job: a fresh
// UUIDv7 id (a job that has a result is never applied again, so the old id
// would only return its failure), the same document, actions and meta. It
// returns the new job id once the broker acknowledged it.
func RedriveDeadLetter(ctx context.Context, cl *kgo.Client, jobsTopic string, e DeadLetterEntry, now time.Time) (string, error) {
	if e.DeadLetter == nil || e.DeadLetter.Job == nil {
		return "", fmt.Errorf("redriving %s: %w", e.Ref(), ErrNotRedrivable)
	}
	job := *e.DeadLetter.Job
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("redriving %s: %w", e.Ref(), err)
	}
	job.JobID = id.String()
	job.SubmittedAtUtcMs = now.UnixMilli()
	rec, err := record.NewJobRecord(jobsTopic, &job)
	if err != nil {
		return "", fmt.Errorf("redriving %s: %w", e.Ref(), err)
	}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return "", fmt.Errorf("redriving %s: producing job %s: %w", e.Ref(), job.JobID, err)
	}
	return job.JobID, nil
}

// PurgeDeadLetters deletes every dead letter written before the call, by
// moving each partition's start offset to its current end. It returns how
// many records it removed.
func PurgeDeadLetters(ctx context.Context, adm *kadm.Client, topic string) (int64, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("purging dead letters: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("purging dead letters: %w", err)
	}
	var n int64
	offsets := kadm.Offsets{}
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, o.Partition)
		if o.Err == nil && o.Offset > s.Offset {
			n += o.Offset - s.Offset
			offsets.Add(kadm.Offset{Topic: topic, Partition: o.Partition, At: o.Offset})
		}
	})
	if n == 0 {
		return 0, nil
	}
	res, err := adm.DeleteRecords(ctx, offsets)
	if err != nil {
		return 0, fmt.Errorf("purging dead letters: %w", err)
	}
	if err := res.Error(); err != nil {
		return 0, fmt.Errorf("purging dead letters: %w", err)
	}
	return n, nil
}
